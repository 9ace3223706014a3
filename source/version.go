package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

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
		v, from, err := readTag(ctx, t.root)
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
	for from := 0; ; {
		start, end, vs, ve, ok := versionLiteral(data, from)
		if !ok {
			return "", 0, false
		}
		from = end
		s := string(data[vs:ve])
		if strings.HasPrefix(s, "0.0.0") {
			continue // a fallback for builds without metadata
		}
		line := 1 + bytes.Count(data[:start], []byte("\n"))
		return s, line, true
	}
}

// A TagReader reads the version of the checkout at dir from its git
// history: the nearest commit from HEAD that carries a tag parseable as a
// PEP 440 version, at most MaxTagDistance commits back, and where it was
// found ("git tag v0.5.9 (+3 commits)"). Its errors say why there is none,
// in one line.
type TagReader func(ctx context.Context, dir string) (*version.Version, string, error)

var tagReader atomic.Pointer[TagReader]

// SetTagReader sets how a checkout whose files name no version reads it
// from git. Reading git history is go-git's, so this package does not:
// the program sets source/gitrepo's reader (NearestTag).
func SetTagReader(r TagReader) { tagReader.Store(&r) }

// readTag asks the TagReader set, after a look for a .git directory or
// file from dir up (no repository: nothing to ask).
func readTag(ctx context.Context, dir string) (*version.Version, string, error) {
	if _, err := FindGitRoot(dir); errors.Is(err, ErrNoGitRepository) {
		return nil, "", fmt.Errorf("no git repository: %w", err)
	}
	r := tagReader.Load()
	if r == nil || *r == nil {
		return nil, "", errors.New("git tags not read: no git reader in this program")
	}
	return (*r)(ctx, dir)
}

// ErrNoGitRepository is FindGitRoot's error when no directory from dir up
// to the root holds a .git directory or file.
var ErrNoGitRepository = errors.New("repository does not exist")

// FindGitRoot is the work tree of the git repository holding dir: dir (or
// its directory, for a file) or the nearest parent with a .git directory or
// file.
func FindGitRoot(dir string) (string, error) {
	path, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		path = filepath.Dir(path)
	}
	for {
		_, err := os.Stat(filepath.Join(path, ".git"))
		if err == nil {
			return path, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(path)
		if parent == path {
			return "", ErrNoGitRepository
		}
		path = parent
	}
}
