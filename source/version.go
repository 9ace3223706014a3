package source

import (
	"context"
	"errors"
	"fmt"
	"github.com/smpatch/smpatch/internal/lazyre"
	"io/fs"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/hashicorp/go-version"
)

// detectVersion reads the version of t: version.py literal, dist-info
// METADATA, nearest git tag. An unknown version is (nil, reason, nil).
func detectVersion(ctx context.Context, t *dirTree) (*version.Version, string, error) {
	var reasons []string
	files := VersionFiles(t.project)
	if t.project == FlashInfer {
		files = append(files, "flashinfer/_build_meta.py")
	}
	for _, f := range files {
		if _, ok := t.toDisk(f); !ok {
			continue // not installed (version.txt of a checkout)
		}
		data, err := t.ReadFile(f)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				reasons = append(reasons, fmt.Sprintf("%s: %v", f, err))
			}
			continue
		}
		s, line, ok := RevisionVersionLiteral(f, data)
		if !ok {
			reasons = append(reasons, f+" has no version literal")
			continue
		}
		v, err := ParseVersion(s)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s:%d: %v", f, line, err))
			continue
		}
		return v, fmt.Sprintf("%s:%d", f, line), nil
	}
	if t.kind == KindSitePackages {
		d, err := FindDist([]string{t.root}, DistName(t.project))
		if err == nil && d != nil && d.Version != "" {
			v, err := ParseVersion(d.Version)
			if err == nil {
				return v, "dist-info METADATA (" + d.DistInfo + ")", nil
			}
			reasons = append(reasons, fmt.Sprintf("dist-info version %q: %v", d.Version, err))
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			reasons = append(reasons, fmt.Sprintf("dist-info: %v", err))
		} else {
			reasons = append(reasons, "no dist-info for "+DistName(t.project))
		}
	}
	if t.kind == KindCheckout {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		v, from, err := NearestTag(ctx, t.root)
		if err == nil {
			return v, from, nil
		}
		reasons = append(reasons, err.Error())
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "no version source found")
	}
	return nil, "unknown: " + strings.Join(reasons, "; "), nil
}

// MaxTagDistance is how many commits past a version tag the tag still names
// the code. sglang tags its releases on release branches, so a commit of main
// reaches its nearest tag through thousands of commits (0.5.6.post2 is 9053
// commits behind main of 2026-08): such a tag says nothing about the code,
// and the version is treated as unknown (variants are then tried by
// content). Release branches sit within a few dozen commits of their tags.
const MaxTagDistance = 500

// maxTagWalk bounds the history walk of NearestTag.
const maxTagWalk = 200000

// NearestTag opens the git repository holding dir and walks from HEAD to the
// nearest commit that carries a tag parseable as a PEP 440 version, at most
// MaxTagDistance commits back.
func NearestTag(ctx context.Context, dir string) (*version.Version, string, error) {
	st, _, err := OpenGitStorage(dir)
	if err != nil {
		return nil, "", fmt.Errorf("no git repository: %v", err)
	}
	head, err := storer.ResolveReference(st, plumbing.HEAD)
	if err != nil {
		return nil, "", fmt.Errorf("git HEAD: %v", err)
	}
	type tagged struct {
		name string
		v    *version.Version
	}
	tags := map[plumbing.Hash][]tagged{}
	iter, err := st.IterReferences()
	if err != nil {
		return nil, "", fmt.Errorf("git tags: %v", err)
	}
	_ = iter.ForEach(func(ref *plumbing.Reference) error {
		if !ref.Name().IsTag() {
			return nil
		}
		name := ref.Name().Short()
		v, err := ParseVersion(strings.TrimPrefix(name, "v"))
		if err != nil {
			return nil
		}
		h := ref.Hash()
		if ref.Type() != plumbing.HashReference {
			return nil
		}
		if tag, err := object.GetTag(st, h); err == nil {
			c, err := tag.Commit()
			if err != nil {
				return nil
			}
			h = c.Hash
		}
		tags[h] = append(tags[h], tagged{name, v})
		return nil
	})
	if len(tags) == 0 {
		return nil, "", errors.New("git repository has no version tags")
	}
	// Breadth-first from HEAD, so the tag with the fewest commits between it
	// and HEAD wins.
	seen := map[plumbing.Hash]bool{head.Hash(): true}
	type item struct {
		h    plumbing.Hash
		dist int
	}
	queue := []item{{head.Hash(), 0}}
	for n := 0; len(queue) > 0 && n < maxTagWalk; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, "", err
			}
		}
		it := queue[0]
		queue = queue[1:]
		if ts := tags[it.h]; len(ts) > 0 {
			best := ts[0]
			for _, t := range ts[1:] {
				if ComparePEP440(t.v, best.v) > 0 {
					best = t
				}
			}
			if it.dist > MaxTagDistance {
				return nil, "", fmt.Errorf("nearest version tag %s is %d commits behind HEAD, more than %d: too far to name the code", best.name, it.dist, MaxTagDistance)
			}
			from := "git tag " + best.name
			if it.dist > 0 {
				from += fmt.Sprintf(" (+%d commits)", it.dist)
			}
			return best.v, from, nil
		}
		c, err := object.GetCommit(st, it.h)
		if err != nil {
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				continue // shallow clone boundary
			}
			return nil, "", fmt.Errorf("git commit %s: %v", it.h, err)
		}
		for _, ph := range c.ParentHashes {
			if !seen[ph] {
				seen[ph] = true
				queue = append(queue, item{ph, it.dist + 1})
			}
		}
	}
	return nil, "", errors.New("no tagged commit reachable from HEAD")
}

// VersionFiles are the files a project's version literal is read from, in order.
func VersionFiles(p Project) []string {
	switch p {
	case SGLang:
		return []string{"python/sglang/version.py"}
	case FlashInfer:
		return []string{"version.txt", "flashinfer/version.txt", "flashinfer/version.py"}
	}
	return nil
}

var pyVersionLiteral = lazyre.New(`(?m)^__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']`)

// RevisionVersionLiteral reads a version from the contents of one of VersionFiles:
// a bare version (version.txt) or a __version__ = "..." literal. It returns
// the line it was found on; placeholders such as "0.0.0+unknown" are skipped.
func RevisionVersionLiteral(name string, data []byte) (string, int, bool) {
	if strings.HasSuffix(name, ".txt") {
		s := strings.TrimSpace(string(data))
		if s == "" || strings.ContainsAny(s, " \t\n") {
			return "", 0, false
		}
		return s, 1, true
	}
	for _, m := range pyVersionLiteral().FindAllSubmatchIndex(data, -1) {
		s := string(data[m[2]:m[3]])
		if strings.HasPrefix(s, "0.0.0") {
			continue // a fallback for builds without metadata
		}
		line := 1 + strings.Count(string(data[:m[0]]), "\n")
		return s, line, true
	}
	return "", 0, false
}
