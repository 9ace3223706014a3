package patches

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// Which files an adopted journal may name. A journal from elsewhere says
// what its entries changed, and the next command that writes finishes an
// entry in flight unasked: a forged pending entry naming .envrc or
// .vscode/tasks.json once had its "originals" written there. An installed
// package confines every path to the package; a checkout does not, so the
// rule is the catalog's: an entry may name only files its patch writes.

// TrustOptions steer Trust.
type TrustOptions struct {
	Lock journal.Options
	// AnyFile adopts an entry naming files its patch does not write (or
	// whose patch the catalog lacks), once read; never a file that tools
	// run or read on their own (ToolFile).
	AnyFile bool
}

// Trust adopts the journal of t (journal.Trust) when every file each
// entry names is one its patch in cat writes, and with bytes its diff
// explains: a path one of the patch's diffs names (or, for a variant that
// looks for moved code, a file of the same kind under one of its search
// directories), whose recorded original bytes that diff turns into the
// recorded patched ones. What the journal would write there is then the
// catalog's own change taken back out. cat may be nil (every entry is then
// outside the catalog).
func Trust(ctx context.Context, t source.WritableTree, cat *Catalog, opts TrustOptions) (*journal.TrustResult, error) {
	return journal.Trust(ctx, t, journal.TrustOptions{Options: opts.Lock, Refuse: func(e *journal.Entry, f *journal.FileRecord, orig []byte) string {
		why := outsidePatch(cat, t.Project(), e, f, orig)
		if why == "" {
			return ""
		}
		if tool := ToolFile(f.Path); tool != "" {
			return why + "; it is " + tool + ": never adopted"
		}
		if opts.AnyFile {
			return ""
		}
		return why + ": read the journal, then adopt it with --any-file"
	}})
}

// outsidePatch says why the patch of entry e in cat (in a tree of project
// p) does not explain what e would write to the file f, whose original
// bytes are orig, or "".
func outsidePatch(cat *Catalog, p source.Project, e *journal.Entry, f *journal.FileRecord, orig []byte) string {
	name, rel := e.Name, f.Path
	var pt *Patch
	if cat != nil {
		pt, _ = cat.Lookup(name)
	}
	if pt == nil {
		return "and the catalog has no patch " + name + " (give the catalog it came from with --catalog)"
	}
	if pt.Project != p {
		return fmt.Sprintf("and patch %s of the catalog is for %s, not %s", name, pt.Project, p)
	}
	if e.State == journal.Reverting && (f.Target != "" || f.TargetDelete) {
		return "whose forced revert writes bytes no diff of patch " + name + " explains"
	}
	named := false
	for _, v := range pt.Variants {
		fds := variantDiffsOf(v, rel)
		if len(fds) == 0 {
			continue
		}
		named = true
		if explains(fds, orig, f) {
			return ""
		}
	}
	if named {
		return "with original bytes that no variant of patch " + name + " turns into the bytes recorded as patched"
	}
	return "which patch " + name + " of the catalog never writes"
}

// variantDiffsOf are the diffs of v that write rel, in order: those naming
// it, else (a file the variant may find by anchor under its search
// directories) those of the same kind.
func variantDiffsOf(v *Variant, rel string) []*FileDiff {
	var named, moved []*FileDiff
	for _, fd := range v.Files {
		if rel == fd.OldPath || rel == fd.NewPath {
			named = append(named, fd)
			continue
		}
		for _, d := range v.Search {
			d = cleanDir(d)
			if (d == "" || strings.HasPrefix(rel, d+"/")) && path.Ext(rel) == path.Ext(fd.Path()) && ToolFile(rel) == "" && !fd.IsCreate() && !fd.IsDelete() {
				moved = append(moved, fd)
				break
			}
		}
	}
	if len(named) > 0 {
		return named
	}
	return moved
}

// explains reports whether the diffs fds, applied in turn to orig (nil:
// no file), give the bytes f records as patched (none: the file deleted).
// A moved file is found by one diff, so each is also tried alone.
func explains(fds []*FileDiff, orig []byte, f *journal.FileRecord) bool {
	try := func(fds []*FileDiff) bool {
		cur, exists := orig, orig != nil
		for _, fd := range fds {
			r := matchFile(cur, exists, fd, false)
			if r.Conflicts() {
				return false
			}
			cur, exists = r.New, !r.Delete
			if !exists {
				cur = nil
			}
		}
		return journal.Hash(cur) == f.Patched && (cur == nil) == (f.Patched == "")
	}
	if try(fds) {
		return true
	}
	for _, fd := range fds {
		if len(fds) > 1 && try([]*FileDiff{fd}) {
			return true
		}
	}
	return false
}

// ToolFile says why rel is a file tools run or read on their own, which a
// journal from elsewhere never names ("" otherwise): anything under a
// hidden name (.envrc, .vscode/, .github/workflows/, .git*), and the files
// Python, pytest and make act on unasked.
func ToolFile(rel string) string {
	for part := range strings.SplitSeq(rel, "/") {
		if strings.HasPrefix(part, ".") {
			return "a hidden file (editor, shell or CI configuration)"
		}
	}
	base := path.Base(rel)
	switch {
	case strings.HasSuffix(base, ".pth"), base == "sitecustomize.py", base == "usercustomize.py":
		return "a file Python runs at startup"
	case base == "conftest.py", base == "noxfile.py", base == "setup.py", base == "Makefile", base == "GNUmakefile", base == "Jenkinsfile":
		return "a file build and test tools run"
	}
	return ""
}
