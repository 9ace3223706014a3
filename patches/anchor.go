package patches

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/patches/udiff"
	"github.com/smpatch/smpatch/source"
)

// The anchor search: a file a variant's diff names that is missing, or
// where the diff conflicts, is looked for in the variant's search
// directories by its first hunk (code that moved to another file).

// maxAnchorFiles bounds how many files an anchor search reads.
const maxAnchorFiles = 5000

// findByAnchor looks in the search directories for the file in which the
// diff's first hunk resolves best. It returns the path and bytes of the
// unique best file and a note, or "" and why nothing was found.
func findByAnchor(ctx context.Context, t source.Tree, fd *FileDiff, dirs []string, exclude string, memo *Memo) (string, []byte, string, error) {
	hasher, _ := t.(FileHasher)
	if memo == nil {
		hasher = nil
	}
	ext := path.Ext(fd.Path())
	type cand struct {
		path   string
		data   []byte
		score  float64
		status HunkStatus
	}
	var cands []cand
	seen := map[string]bool{}
	read := 0
	for _, dir := range dirs {
		dir = cleanDir(dir)
		files, err := t.ListFiles(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", nil, "", fmt.Errorf("listing %s: %w", dir, err)
		}
		for _, f := range files {
			if seen[f] || f == exclude || path.Ext(f) != ext {
				continue
			}
			seen[f] = true
			if read >= maxAnchorFiles {
				break
			}
			if err := ctx.Err(); err != nil {
				return "", nil, "", err
			}
			read++
			var key anchorKey
			if hasher != nil {
				if h, ok := hasher.FileHash(f); ok {
					key = anchorKey{fd.Hunks[0], h}
					if hit, ok := memo.getAnchor(key); ok {
						if hit.status != Conflict {
							cands = append(cands, cand{path: f, score: hit.score, status: hit.status})
						}
						continue
					}
				}
			}
			data, err := t.ReadFile(f)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return "", nil, "", err
			}
			res := udiff.MatchHunk(data, fd.Hunks[0])
			score := 1.0
			if res.Status == Fuzzy {
				score = res.Score
			}
			if key.hunk != nil {
				memo.putAnchor(key, anchorHit{res.Status, score})
			}
			if res.Status == Conflict {
				continue
			}
			cands = append(cands, cand{path: f, data: data, score: score, status: res.Status})
		}
	}
	if len(cands) == 0 {
		return "", nil, fmt.Sprintf("not found by anchor in %s", strings.Join(dirs, ", ")), nil
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
	if len(cands) > 1 && cands[1].score == cands[0].score {
		var names []string
		for _, c := range cands {
			if c.score == cands[0].score {
				names = append(names, source.ShownPath(t, c.path))
			}
		}
		return "", nil, fmt.Sprintf("anchor is ambiguous: the first hunk matches %s", strings.Join(names, ", ")), nil
	}
	c := cands[0]
	if c.data == nil { // remembered from another revision: read it now
		data, err := t.ReadFile(c.path)
		if err != nil {
			return "", nil, "", err
		}
		c.data = data
	}
	return c.path, c.data, fmt.Sprintf("found by anchor (hunk 1 %s) in %s", c.status, source.ShownPath(t, c.path)), nil
}

// cleanDir turns "a/b/", "./a//b" into "a/b", and "." or "/" into "".
func cleanDir(dir string) string {
	c := strings.TrimPrefix(path.Clean("/"+dir), "/")
	return c
}
