package launch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
)

// The trees a local run's cells run from are held for the whole run: a
// run that patches a tree holds it alone, runs that only run from it share
// it. So a second run never starts its cells on a tree the first patched
// for its own cells (they would be recorded as unpatched), and never
// patches a tree under cells that run unpatched. A run waits for a tree
// another run holds, saying so, until that run ends or a signal stops it.
//
// The lock is a file of the user's state directory
// ($XDG_STATE_HOME/smpatch/runs/, else ~/.local/state/smpatch/runs/) named
// for the tree's real path, so it holds between the runs of one user on
// one host, and writes nothing into the tree.

// treeWaitNotice is how long a run waits for a tree before it says so.
const treeWaitNotice = 500 * time.Millisecond

// treeLockDir is where the trees' locks live.
func treeLockDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "smpatch", "runs"), nil
	}
	home := os.Getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return "", errors.New("tree lock: neither $XDG_STATE_HOME nor $HOME is set to an absolute directory")
	}
	return filepath.Join(home, ".local", "state", "smpatch", "runs"), nil
}

// treeLockPath is the lock of the tree at root.
func treeLockPath(root string) (string, error) {
	dir, err := treeLockDir()
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(dir, "tree-"+hex.EncodeToString(sum[:8])+".lock"), nil
}

// treeLockError is a tree's lock that could not be made or taken (not a
// wait for another run).
type treeLockError struct{ err error }

func (e *treeLockError) Error() string { return e.err.Error() }
func (e *treeLockError) Unwrap() error { return e.err }

func warnf(o *Options) func(string, ...any) {
	if o.Warn != nil {
		return o.Warn
	}
	return func(format string, args ...any) { fmt.Fprintf(os.Stderr, "smpatch: warning: "+format+"\n", args...) }
}

// treeHold is a run's hold on its trees; release ends it.
type treeHold struct{ locks []*flock.Flock }

func (h *treeHold) release() {
	if h == nil {
		return
	}
	for _, l := range h.locks {
		l.Close()
	}
}

// holdTree takes the lock of the tree at root, exclusive when the run
// patches it, waiting for another run that holds it. out names the run in
// the lock, for the run that waits to show.
func (h *treeHold) holdTree(ctx context.Context, root string, exclusive bool, out string, progress func(string, ...any)) error {
	p, err := treeLockPath(root)
	if err != nil {
		return &treeLockError{err}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return &treeLockError{fmt.Errorf("tree lock: %w", err)}
	}
	l := flock.New(p, flock.SetFlag(os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK), flock.SetPermissions(0o600))
	start, told := time.Now(), false
	for {
		var ok bool
		if exclusive {
			ok, err = l.TryLock()
		} else {
			ok, err = l.TryRLock()
		}
		if err != nil {
			return &treeLockError{fmt.Errorf("tree lock %s: %w", p, err)}
		}
		if ok {
			break
		}
		if !told && time.Since(start) >= treeWaitNotice {
			told = true
			progress("waiting for %s: %s uses it", root, treeHolder(p))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while waiting for %s, which %s uses; nothing was changed: %w", root, treeHolder(p), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if exclusive {
		// Who holds it, for a run that waits; shared holders leave it.
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0); err == nil {
			abs, _ := filepath.Abs(out)
			fmt.Fprintf(f, "pid %d\nresults %s\n", os.Getpid(), abs)
			f.Close()
		}
	}
	h.locks = append(h.locks, l)
	return nil
}

// treeHolder names the run a tree's lock says holds it.
func treeHolder(p string) string {
	b, err := bounded.ReadFile(nil, p, 4096)
	if err != nil {
		return "another smpatch matrix run"
	}
	var pid, results string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "pid "); ok {
			if _, err := strconv.Atoi(v); err == nil {
				pid = v
			}
		}
		if v, ok := strings.CutPrefix(line, "results "); ok {
			results = v
		}
	}
	switch {
	case pid != "" && results != "":
		return fmt.Sprintf("another smpatch matrix run (pid %s, results %s)", pid, results)
	case pid != "":
		return fmt.Sprintf("another smpatch matrix run (pid %s)", pid)
	}
	return "another smpatch matrix run"
}

// holdTrees holds the trees the selected cells of a local run run from:
// those tp patches (exclusively) and, shared, the tree of each other
// project the matrix may run (a cell without patches runs from it just
// the same). A tree of the latter kind that already carries patches
// (applied by hand, or left by a run that did not finish) is warned about,
// and each cell that runs from it carries the warning.
func (r *MatrixRun) holdTrees(ctx context.Context, project source.Project, python string, cells []*Cell, tp *TreePatcher, o *Options) (*treeHold, error) {
	h := &treeHold{}
	held := map[string]bool{}
	hold := func(t source.WritableTree, exclusive bool) error {
		root := t.Root()
		if held[root] {
			return nil
		}
		held[root] = true
		err := h.holdTree(ctx, root, exclusive, o.Out, o.Progress)
		var le *treeLockError
		if errors.As(err, &le) {
			// No state directory to lock in (a read-only home): the run
			// goes on, saying that runs on the tree are not kept apart.
			warnf(o)("%s: %v; runs on this tree are not kept apart", root, err)
			return nil
		}
		return err
	}
	if tp != nil {
		for _, p := range sortedProjects(tp.trees) {
			if err := hold(tp.trees[p], true); err != nil {
				h.release()
				return nil, err
			}
		}
	}
	projects := []source.Project{project}
	if project == "" {
		projects = []source.Project{source.SGLang, source.FlashInfer}
	}
	for _, p := range projects {
		if tp != nil && tp.trees[p] != nil {
			continue
		}
		t, err := source.Resolve(ctx, r.Repo, p, python)
		if ctx.Err() != nil {
			h.release()
			return nil, ctx.Err()
		}
		if err != nil {
			continue // no tree of that project here: nothing runs from one
		}
		if err := hold(t, false); err != nil {
			h.release()
			return nil, err
		}
		warnTreePatched(ctx, t, cells, o)
	}
	return h, nil
}

// warnTreePatched warns when a tree that cells run from unpatched by this
// run already carries patches, and notes it on each such cell.
func warnTreePatched(ctx context.Context, t source.WritableTree, cells []*Cell, o *Options) {
	warn := warnf(o)
	st, err := patches.ReadState(ctx, t)
	if err != nil {
		if ctx.Err() == nil {
			warn("%s: its journal cannot be read (%s): cells may run with patches applied", t.Root(), oneLineErr(err))
		}
		return
	}
	for _, e := range st.Patches {
		by := "not by this run"
		for _, n := range e.Notes {
			if strings.HasPrefix(n, runNote) {
				by = "by an earlier matrix run that did not finish (" + n + ")"
			}
		}
		n := 0
		for _, c := range cells {
			if c.Pruned == "" && !slices.Contains(c.Patches, e.Name) && (len(o.Only) == 0 || slices.Contains(o.Only, c.ID)) {
				c.Warnings = append(c.Warnings, fmt.Sprintf("%s already had %s applied (%s): this cell ran with it", t.Root(), e.Name, by))
				n++
			}
		}
		if n > 0 {
			warn("%s already has %s applied (%s); %d cell(s) without it in their patch set run with it", t.Root(), e.Name, by, n)
		}
	}
}
