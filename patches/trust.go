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
// entry names is one its patch in cat writes, by any variant: a path one
// of its diffs names, or, for a variant that looks for moved code, a file
// of the same kind under one of its search directories. cat may be nil
// (every entry is then outside the catalog).
func Trust(ctx context.Context, t source.WritableTree, cat *Catalog, opts TrustOptions) (*journal.TrustResult, error) {
	return journal.Trust(ctx, t, journal.TrustOptions{Options: opts.Lock, Refuse: func(e *journal.Entry, rel string) string {
		why := outsidePatch(cat, t.Project(), e.Name, rel)
		if why == "" {
			return ""
		}
		if tool := ToolFile(rel); tool != "" {
			return why + "; it is " + tool + ": never adopted"
		}
		if opts.AnyFile {
			return ""
		}
		return why + ": read the journal, then adopt it with --any-file"
	}})
}

// outsidePatch says why the patch called name in cat does not write rel
// in a tree of project p, or "".
func outsidePatch(cat *Catalog, p source.Project, name, rel string) string {
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
	for _, v := range pt.Variants {
		for _, fd := range v.Files {
			if rel == fd.OldPath || rel == fd.NewPath {
				return ""
			}
			for _, d := range v.Search {
				d = cleanDir(d)
				if (d == "" || strings.HasPrefix(rel, d+"/")) && path.Ext(rel) == path.Ext(fd.Path()) && ToolFile(rel) == "" {
					return ""
				}
			}
		}
	}
	return "which patch " + name + " of the catalog never writes"
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
