package journal

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/source"
)

// What the journal does to tree files beyond writing them: reading them
// as they are, clearing what a killed write left beside one, removing the
// stale bytecode of a changed .py file and the directories a patch made.
// Every name goes through the tree's os.Root.

// ReadCurrent reads a tree file; a missing file is nil.
func ReadCurrent(t source.Tree, rel string) ([]byte, error) {
	b, err := t.ReadFile(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if b == nil && err == nil {
		b = []byte{}
	}
	return b, err
}

// HashCurrent is Hash of a tree file ("" when absent).
func HashCurrent(t source.Tree, rel string) (string, error) {
	b, err := ReadCurrent(t, rel)
	if err != nil {
		return "", err
	}
	return Hash(b), nil
}

// inRoot runs f on the tree's root and the disk path of rel; it does
// nothing for a path that is not the tree's or names a place in .git or
// the journal directory.
func inRoot(t source.WritableTree, rel string, f func(r *os.Root, d string)) {
	if t.CheckPath(rel) != nil {
		return
	}
	d, err := t.DiskPath(rel)
	if err != nil {
		return
	}
	r, err := t.OpenRoot()
	if err != nil {
		return
	}
	defer r.Close()
	f(r, d)
}

// cleanTemps removes the temporary files a killed write left beside rel
// (source.TempName's, and ".BASE" followed by digits, as an earlier
// smpatch named them); regular files only.
func cleanTemps(t source.WritableTree, rel string) {
	inRoot(t, rel, func(r *os.Root, d string) {
		dir, base := filepath.Dir(d), filepath.Base(d)
		for _, de := range readDir(r, dir) {
			if de.Type().IsRegular() && (source.IsTempOf(de.Name(), base) || isTempOf(de.Name(), base)) {
				_ = r.Remove(filepath.Join(dir, de.Name()))
			}
		}
	})
}

func readDir(r *os.Root, dir string) []fs.DirEntry {
	f, err := r.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	ents, _ := f.ReadDir(-1)
	return ents
}

// RemovePyc removes the cached bytecode of the .py file rel
// (__pycache__/STEM.TAG.pyc, STEM.TAG.opt-N.pyc): CPython's
// unchecked-hash pycs would otherwise keep running the old source. It
// returns the repository paths it removed, sorted.
func RemovePyc(t source.WritableTree, rel string) []string {
	if !strings.HasSuffix(rel, ".py") {
		return nil
	}
	var removed []string
	inRoot(t, rel, func(r *os.Root, d string) {
		stem := strings.TrimSuffix(filepath.Base(d), ".py")
		cache := filepath.Join(filepath.Dir(d), "__pycache__")
		for _, de := range readDir(r, cache) {
			n := de.Name()
			// stem.TAG.pyc or stem.TAG.opt-N.pyc, never another module's
			mid, ok := strings.CutPrefix(n, stem+".")
			if !ok || !strings.HasSuffix(mid, ".pyc") || strings.TrimSuffix(mid, ".pyc") == "" {
				continue
			}
			if r.Remove(filepath.Join(cache, n)) == nil {
				removed = append(removed, path.Join(path.Dir(rel), "__pycache__", n))
			}
		}
	})
	sort.Strings(removed)
	return removed
}

// NewDirs lists the directories of rels (repository-relative files a
// patch creates) that do not exist yet, deepest first.
func NewDirs(t source.WritableTree, rels []string) []string {
	r, err := t.OpenRoot()
	if err != nil {
		return nil
	}
	defer r.Close()
	seen := map[string]bool{}
	var out []string
	for _, rel := range rels {
		for d := path.Dir(rel); d != "." && d != "/" && !seen[d]; d = path.Dir(d) {
			dd, err := t.DiskPath(d)
			if err != nil {
				break
			}
			if _, err := r.Lstat(dd); err == nil {
				break
			}
			seen[d] = true
			out = append(out, d)
		}
	}
	sortDeepestFirst(out)
	return out
}

// sortDeepestFirst orders directories so that a child comes before its
// parent.
func sortDeepestFirst(dirs []string) {
	sort.SliceStable(dirs, func(i, k int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[k], "/") })
}

// removeCreatedDirs removes the directories apply made for e that are
// empty again; a directory that now holds anything stays.
func removeCreatedDirs(t source.WritableTree, e *Entry) {
	for _, d := range e.CreatedDirs {
		inRoot(t, d, func(r *os.Root, dd string) {
			if len(readDir(r, dd)) > 0 {
				return
			}
			if r.Remove(dd) == nil {
				_ = syncDirIn(r, filepath.Dir(dd))
			}
		})
	}
}

// syncDirIn fsyncs the directory d of r.
func syncDirIn(r *os.Root, d string) error {
	f, err := r.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// mergeDirs is dirs with the directories of more that are above one of
// files added, deepest first.
func mergeDirs(dirs, more []string, files []*FileRecord) []string {
	for _, d := range more {
		if dirOfAny(d, files) && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	sortDeepestFirst(dirs)
	return dirs
}
