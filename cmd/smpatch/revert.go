package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// smpatch revert [NAME...]: restore the original bytes.

// revertOptions are smpatch revert's flags, streams and dependencies.
type revertOptions struct {
	IO      IOStreams
	Catalog func() (*patches.Catalog, error)
	Tree    func(ctx context.Context, repo string, project source.Project) (source.WritableTree, error)
	// Lock is how the command waits for the tree's journal lock, saying so on w.
	Lock func(w io.Writer) journal.Options
	// CatalogDirs are the --catalog directories (the built-in catalog
	// alone serves a revert of no name nothing).
	CatalogDirs func() []string

	Names  []string
	Repo   string
	Force  bool
	DryRun bool
	JSON   bool
	Series bool // --series: the patches of the catalog's series
}

func (o *revertOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the patched tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.BoolVar(&o.Force, "force", false, "for files changed since apply: reverse-apply only the patch's hunks, keeping other edits")
	f.BoolVar(&o.DryRun, "dry-run", false, "say what would be restored, and whether a revert would be refused; write nothing")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
	f.BoolVar(&o.Series, "series", false, "revert the patches of the --catalog directories' series that are applied (newest first), and no other")
}

func newRevertCmd(f *Factory) *cobra.Command {
	o := &revertOptions{Catalog: f.Catalog, Tree: f.Tree, CatalogDirs: f.CatalogDirs, Lock: f.lockOptions}
	c := &cobra.Command{
		Use:   "revert [NAME...]",
		Short: "Restore the original bytes of applied patches (every applied patch when no NAME)",
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Names = streams(c), args
			return runRevert(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runRevert(ctx context.Context, o *revertOptions) error {
	w, errw := o.IO.Out, o.IO.ErrOut
	args := o.Names
	if o.Series {
		if len(args) > 0 {
			return withCode(exitUsage, errors.New("revert: --series or names, not both"))
		}
		cat, err := o.Catalog()
		if err != nil {
			return err
		}
		ss := cat.Series()
		if len(ss) == 0 {
			return withCode(exitUsage, errors.New("revert: --series: no catalog directory orders its patches (a series file or order keys)"))
		}
		for _, s := range ss {
			for _, p := range s.Patches {
				args = append(args, p.Name)
			}
		}
	}
	// The journal has all a revert needs: the catalog serves names
	// (their project, the did-you-mean, what needs what) and warns about
	// a broken --catalog directory. With neither names nor directories,
	// the built-in catalog alone has nothing to add, so it is not loaded.
	// A broken catalog only costs the did-you-mean.
	var cat *patches.Catalog
	if len(args) > 0 || len(o.CatalogDirs()) > 0 {
		var err error
		if cat, err = o.Catalog(); err != nil {
			fmt.Fprintf(errw, "smpatch: warning: %v\n", err)
			cat = nil
		}
	}
	var project source.Project
	if len(args) > 0 && cat != nil {
		if p, err := cat.Get(args[0]); err == nil {
			project = p.Project
		}
	}
	t, err := o.Tree(ctx, o.Repo, project)
	if err != nil {
		return err
	}
	if o.DryRun {
		return revertDryRun(ctx, o, t, cat)
	}
	res, err := patches.Revert(ctx, t, cat, args, patches.RevertOptions{Force: o.Force, Waiting: waitingLine(errw), LockTimeout: o.Lock(errw).LockTimeout})
	if res != nil {
		for _, r := range res.Recovered {
			fmt.Fprintf(errw, "smpatch: %s\n", r)
		}
	}
	var de *patches.RevertRefusedError
	if err != nil && (!errors.As(err, &de) || de.Result == nil) {
		return err
	}
	if o.JSON {
		if jerr := WriteJSON(w, res); jerr != nil {
			return jerr
		}
		return err
	}
	if de != nil {
		for _, po := range res.Patches {
			for _, f := range po.Files {
				if f.State == "changed" {
					fmt.Fprintf(w, "%s: %s changed since it was applied:\n", po.Name, source.ShownPath(t, f.Path))
					fmt.Fprint(w, f.Diff)
				}
			}
		}
		return err
	}
	for _, n := range res.NotApplied {
		fmt.Fprintf(w, "%s: not applied, nothing to revert\n", n)
	}
	if len(res.Patches) == 0 && len(res.NotApplied) == 0 {
		fmt.Fprintf(w, "nothing to revert in %s\n", t.Root())
	}
	for _, po := range res.Patches {
		fmt.Fprintf(w, "%s: reverted\n", po.Name)
		for _, f := range po.Files {
			switch f.State {
			case "restored":
				fmt.Fprintf(w, "  %s: original restored\n", source.ShownPath(t, f.Path))
			case "already-original":
				fmt.Fprintf(w, "  %s: already original\n", source.ShownPath(t, f.Path))
			case "forced":
				fmt.Fprintf(w, "  %s: patch hunks reverse-applied, other edits kept\n", source.ShownPath(t, f.Path))
			}
			for _, pyc := range f.PycRemoved {
				fmt.Fprintf(w, "    removed stale bytecode %s\n", source.ShownPath(t, pyc))
			}
			for _, pyc := range f.PycRestored {
				fmt.Fprintf(w, "    restored bytecode %s\n", source.ShownPath(t, pyc))
			}
		}
	}
	return nil
}

// revertDryRun says what a revert of o.Names (every applied patch when
// none) would do, from the journal as status reads it: which files get
// their original bytes back, and which changed since apply, where a
// revert without --force refuses (exit 5). It writes nothing.
func revertDryRun(ctx context.Context, o *revertOptions, t source.WritableTree, cat *patches.Catalog) error {
	w := o.IO.Out
	st, err := patches.Status(ctx, t, cat, journal.Options{Waiting: waitingLine(o.IO.ErrOut)})
	if err != nil {
		return err
	}
	var picked []*patches.PatchStatus
	for _, ps := range st.Patches {
		if len(o.Names) == 0 || slices.Contains(o.Names, ps.Name) {
			picked = append(picked, ps)
		}
	}
	if o.JSON {
		return WriteJSON(w, struct {
			Tree    string                 `json:"tree"`
			DryRun  bool                   `json:"dry_run"`
			Patches []*patches.PatchStatus `json:"patches"`
		}{st.Tree, true, picked})
	}
	for _, n := range o.Names {
		if slices.ContainsFunc(picked, func(ps *patches.PatchStatus) bool { return ps.Name == n }) {
			continue
		}
		if cat != nil {
			if _, err := cat.Get(n); err != nil {
				return err // in neither the journal nor the catalog: the did-you-mean
			}
		}
		fmt.Fprintf(w, "%s: not applied, nothing to revert\n", n)
	}
	if len(picked) == 0 && len(o.Names) == 0 {
		fmt.Fprintf(w, "nothing to revert in %s\n", t.Root())
	}
	changed := 0
	for _, ps := range picked {
		fmt.Fprintf(w, "%s: would revert\n", ps.Name)
		for _, f := range ps.Files {
			switch f.State {
			case "changed":
				changed++
				if o.Force {
					fmt.Fprintf(w, "  %s: changed since apply: the patch's hunks would be reverse-applied, other edits kept\n", source.ShownPath(t, f.Path))
				} else {
					fmt.Fprintf(w, "  %s: changed since apply: a revert refuses (--force takes out only the patch's hunks)\n", source.ShownPath(t, f.Path))
				}
			case "original":
				fmt.Fprintf(w, "  %s: already original\n", source.ShownPath(t, f.Path))
			case "missing":
				fmt.Fprintf(w, "  %s: missing: the original would be written back\n", source.ShownPath(t, f.Path))
			default:
				fmt.Fprintf(w, "  %s: original would be restored\n", source.ShownPath(t, f.Path))
			}
		}
		if ps.Damaged != "" {
			fmt.Fprintf(w, "  journal damaged: %s: a revert refuses\n", ps.Damaged)
		}
	}
	fmt.Fprintln(w, "dry run: nothing written")
	if changed > 0 && !o.Force {
		return &patches.RevertRefusedError{Msg: fmt.Sprintf("revert --dry-run: %d file(s) changed since apply; a revert would refuse (exit 5) without --force", changed)}
	}
	return nil
}
