package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/google/renameio/v2"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/source"
)

// The journal lives in the tree's state directory:
//
//	.smpatch/state.json        applied patches and those in flight ("pending", "reverting"), signed
//	.smpatch/NAME.orig.tar     original bytes of every file a patch changed, each at PATH
//	.smpatch/NAME.patched.tar  the bytes the patch wrote (to show drift, and to reverse-apply)
//	.smpatch/NAME.target.tar   bytes a forced revert writes
//	.smpatch/lock              gofrs/flock; held by every command that writes the journal or the tree
//
// Every file of it is opened without following a symlink, and the
// directory itself must be a real directory.

const (
	stateName = "state.json"
	lockName  = "lock"
)

// waitNotice is how long a command waits for the lock before it says so.
const waitNotice = 500 * time.Millisecond

// DefaultLockTimeout is how long a command waits for the journal's lock
// when Options do not say: an apply or a revert holds it for seconds.
const DefaultLockTimeout = 2 * time.Minute

// Options steer how a journal is opened.
type Options struct {
	// Waiting is told, once, when another smpatch has held the journal's
	// lock for a moment: one line for people. Nil says nothing.
	Waiting func(line string)
	// LockTimeout bounds the wait for the lock (0: DefaultLockTimeout);
	// past it the open fails with a *LockTimeoutError.
	LockTimeout time.Duration
}

// LockTimeoutError is a lock another command held for longer than the
// wait allowed. Nothing was changed.
type LockTimeoutError struct {
	Tree   string
	Holder string
	Waited time.Duration
}

func (e *LockTimeoutError) Error() string {
	return fmt.Sprintf("the journal of %s is locked by %s: gave up after %s (--lock-timeout); nothing was changed", e.Tree, e.Holder, e.Waited)
}

// lockWait is one command's wait for the lock: it says so once after
// waitNotice, gives up at the timeout and stops when ctx ends.
type lockWait struct {
	start    time.Time
	told     bool
	opts     Options
	tree     string
	lockPath string
}

func newLockWait(opts Options, tree, lockPath string) *lockWait {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	return &lockWait{start: time.Now(), opts: opts, tree: tree, lockPath: lockPath}
}

// wait waits a moment before the next try, or says why not to try again:
// a *StoppedError when ctx ended, a *LockTimeoutError past the timeout.
func (w *lockWait) wait(ctx context.Context) error {
	waited := time.Since(w.start)
	if !w.told && w.opts.Waiting != nil && waited >= waitNotice {
		w.told = true
		w.opts.Waiting(fmt.Sprintf("waiting for the journal lock of %s, held by %s; giving up after %s (--lock-timeout)", w.tree, holder(w.lockPath), w.opts.LockTimeout))
	}
	if waited >= w.opts.LockTimeout {
		return &LockTimeoutError{Tree: w.tree, Holder: holder(w.lockPath), Waited: w.opts.LockTimeout}
	}
	select {
	case <-ctx.Done():
		return &StoppedError{What: fmt.Sprintf("stopped before writing: nothing was changed (while waiting for the journal lock of %s, held by %s)", w.tree, holder(w.lockPath)), Err: ctx.Err()}
	case <-time.After(20 * time.Millisecond):
		return nil
	}
}

// Journal is a tree's journal, open: locked, its state read and proved
// this user's. One opened by Open may be written; one opened by Read is
// only read.
type Journal struct {
	t     source.WritableTree
	dir   string
	lock  *flock.Flock
	state *State
	// readOnly: opened by Read, under a shared lock (or none: no lock file).
	readOnly bool
	// created is set when this command made the state directory: the tree
	// root is synced with the first durable write.
	created bool
	// copies holds the journal copies read, by "KIND/NAME".
	copies map[string]map[string][]byte
}

// State is the journal's state as last read or written. Callers read it;
// only the journal changes it.
func (j *Journal) State() *State { return j.state }

func (j *Journal) statePath() string { return filepath.Join(j.dir, stateName) }

// Exists reports whether t has a journal: a state directory holding a
// state.json. A state directory that is not a real directory is an error.
func Exists(t source.WritableTree) (bool, error) {
	ok, err := lstatStateDir(t.StateDir())
	if err != nil || !ok {
		return false, err
	}
	_, err = os.Lstat(filepath.Join(t.StateDir(), stateName))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// emptyState is the state of a tree without a journal.
func emptyState(t source.WritableTree) *State {
	return &State{Format: stateFormat, Tree: t.Root(), Kind: string(t.Kind())}
}

// Open opens the journal of t for writing: it makes the state directory
// when there is none, takes the lock (waiting for another smpatch until
// ctx ends, and saying so after a moment) and reads the state. A journal
// this user did not write is refused (UntrustedError); nothing in flight
// is finished yet (Recover).
func Open(ctx context.Context, t source.WritableTree, opts Options) (*Journal, error) {
	return open(ctx, t, opts, false)
}

// open is Open; adopting skips the signature check (Trust, which signs
// what it read).
func open(ctx context.Context, t source.WritableTree, opts Options, adopting bool) (*Journal, error) {
	dir := t.StateDir()
	exists, err := lstatStateDir(dir)
	if err != nil {
		return nil, err
	}
	j := &Journal{t: t, dir: dir, created: !exists}
	if !exists {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("journal: %w", err)
		}
		if t.Kind() == source.KindCheckout {
			if err := addGitExclude(t.Root()); err != nil {
				return nil, fmt.Errorf("journal: .git/info/exclude: %w", err)
			}
		}
	}
	if err := j.takeLock(ctx, opts); err != nil {
		return nil, err
	}
	if err := j.load(adopting); err != nil {
		j.Close()
		return nil, err
	}
	if !adopting {
		j.cleanStale() // proved this user's: what a kill left is ours
	}
	return j, nil
}

// takeLock takes the journal's lock. The holder before may have removed
// the state directory (a revert that left nothing applied) while this one
// waited: the lock held is then on a file nobody else can see, and is
// taken again on the file at the lock's path.
func (j *Journal) takeLock(ctx context.Context, opts Options) error {
	lockPath := filepath.Join(j.dir, lockName)
	w := newLockWait(opts, j.t.Root(), lockPath)
	for {
		if err := os.Mkdir(j.dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("journal: %w", err)
		}
		if _, err := lstatStateDir(j.dir); err != nil {
			return err
		}
		writeStateGitignore(j.dir)
		if err := checkLockFile(lockPath); err != nil {
			return err
		}
		// O_NONBLOCK: a named pipe put there between the check and the
		// open must not hold the open for good.
		l := flock.New(lockPath, flock.SetFlag(os.O_CREATE|os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK), flock.SetPermissions(0o644))
		ok, err := l.TryLock()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed between the mkdir and the open: make it again
		case errors.Is(err, syscall.ELOOP):
			return fmt.Errorf("journal lock %s: a symlink; refusing (remove it)", lockPath)
		case err != nil:
			return fmt.Errorf("journal lock %s: %w", lockPath, err)
		case ok:
			if err := heldRegular(l, lockPath); err != nil {
				return err
			}
			if sameLockFile(l, lockPath) {
				j.lock = l
				recordHolder(lockPath)
				return nil
			}
			_ = l.Unlock()
			continue
		}
		if err := w.wait(ctx); err != nil {
			return err
		}
	}
}

// checkLockFile refuses a lock file that is there and is not a regular
// file: a named pipe would hold every open of it (deaf to signals, in
// open(2)), a directory or device is not smpatch's.
func checkLockFile(p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return nil // absent: made by the open; other errors: the open says
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("journal lock %s: a symlink; refusing (remove it)", p)
	}
	if w := NotRegular(st.Mode()); w != "" {
		return fmt.Errorf("journal lock %s: %s; refusing (remove it)", p, w)
	}
	return nil
}

// heldRegular releases l and refuses when the file it holds is not a
// regular file (swapped in after checkLockFile).
func heldRegular(l *flock.Flock, p string) error {
	st, err := l.Stat()
	if err == nil && st.Mode().IsRegular() {
		return nil
	}
	_ = l.Unlock()
	if err != nil {
		return fmt.Errorf("journal lock %s: %w", p, err)
	}
	return fmt.Errorf("journal lock %s: %s; refusing (remove it)", p, NotRegular(st.Mode()))
}

// sameLockFile reports whether the file l holds is the one at p now.
func sameLockFile(l *flock.Flock, p string) bool {
	held, err1 := l.Stat()
	cur, err2 := os.Lstat(p)
	return err1 == nil && err2 == nil && os.SameFile(held, cur)
}

// recordHolder writes this process's id into the lock file, for the
// command that waits on it to name.
func recordHolder(p string) {
	f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if f.Truncate(0) == nil {
		_, _ = f.WriteString("pid " + strconv.Itoa(os.Getpid()) + "\n")
	}
}

// holder names the process whose id the lock file holds, or "another
// smpatch".
func holder(p string) string {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err == nil {
		defer f.Close()
		if b, err := bounded.ReadAll(f, 64, p); err == nil {
			if s := strings.TrimSpace(string(b)); strings.HasPrefix(s, "pid ") {
				if _, err := strconv.Atoi(s[4:]); err == nil {
					return "another smpatch (" + s + ")"
				}
			}
		}
	}
	return "another smpatch"
}

// Read opens the journal of t for reading only: it writes nothing (no
// directory, no lock file, no entry finished). When there is a lock file it
// takes it shared, so that what it reads is one command's state and
// copies, waiting as Open does. A tree without a journal has an empty
// state. A journal this user did not write is refused (UntrustedError).
func Read(ctx context.Context, t source.WritableTree, opts Options) (*Journal, error) {
	j := &Journal{t: t, dir: t.StateDir(), readOnly: true}
	ok, err := Exists(t)
	if err != nil {
		return nil, err
	}
	if !ok {
		j.state = emptyState(t)
		return j, nil
	}
	lockPath := filepath.Join(j.dir, lockName)
	l := flock.New(lockPath, flock.SetFlag(os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK))
	w := newLockWait(opts, t.Root(), lockPath)
	for {
		if err := checkLockFile(lockPath); err != nil {
			return nil, err
		}
		ok, err := l.TryRLock()
		if errors.Is(err, fs.ErrNotExist) {
			break // no lock file: no writer ever held it
		}
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("journal lock %s: a symlink; refusing (remove it)", lockPath)
		}
		if err != nil {
			return nil, fmt.Errorf("journal lock %s: %w", lockPath, err)
		}
		if ok {
			if err := heldRegular(l, lockPath); err != nil {
				return nil, err
			}
			j.lock = l
			break
		}
		if err := w.wait(ctx); err != nil {
			return nil, err
		}
	}
	if err := j.load(false); err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

// Close releases the lock. A journal opened for writing that has nothing
// left applied is removed first: its own files, each by name, the lock
// last, then the directory when it is empty (another command may have
// made a new lock in it already). A command that opened the lock file
// before it was removed finds, once it holds it, that it is no longer the
// file at the lock's path, and takes the lock again.
func (j *Journal) Close() {
	if !j.readOnly && j.state != nil && len(j.state.Patches) == 0 {
		if ok, err := lstatStateDir(j.dir); ok && err == nil {
			if ents, err := os.ReadDir(j.dir); err == nil {
				for _, de := range ents {
					if n := de.Name(); n != lockName && !de.IsDir() {
						_ = os.Remove(filepath.Join(j.dir, n))
					}
				}
			}
			_ = os.Remove(filepath.Join(j.dir, lockName))
			_ = os.Remove(j.dir)
		}
	}
	if j.lock != nil {
		_ = j.lock.Unlock()
	}
}

// load reads state.json: bounded, checked, and proved this user's unless
// adopting.
func (j *Journal) load(adopting bool) error {
	f, err := openInJournal(j.dir, stateName)
	if errors.Is(err, fs.ErrNotExist) {
		j.state = emptyState(j.t)
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return fmt.Errorf("journal: %w", err)
	} else if st.Size() > maxStateBytes {
		return &JournalError{Path: j.statePath(), Msg: fmt.Sprintf("%d bytes, more than the %d a journal may have", st.Size(), maxStateBytes)}
	}
	data, err := bounded.ReadAll(f, maxStateBytes, j.statePath())
	if err != nil {
		return &JournalError{Path: j.statePath(), Msg: err.Error()}
	}
	s, why, err := decodeState(j.statePath(), data)
	if err != nil {
		return err
	}
	if why != "" && !adopting {
		return &UntrustedError{Path: j.statePath(), Tree: j.t.Root(), Reason: why, Entries: len(s.Patches)}
	}
	j.state = s
	return nil
}

// save writes state.json durably: a temporary file beside it, synced,
// renamed over it, and the state directory synced (with the tree root when
// this command made the state directory).
func (j *Journal) save() error {
	if j.readOnly {
		return errors.New("journal: opened for reading only")
	}
	j.state.Format = stateFormat
	data, err := encodeState(j.state)
	if err != nil {
		return err
	}
	if err := renameio.WriteFile(j.statePath(), data, 0o644, renameio.WithTempDir(j.dir)); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return j.syncDir()
}

// dropState removes state.json durably (nothing is applied any more): it
// goes before any copy, so no entry ever names a copy that is gone.
func (j *Journal) dropState() error {
	if err := os.Remove(j.statePath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: %w", err)
	}
	return j.syncDir()
}

// syncDir syncs the state directory, and the tree root while the state
// directory this command made is not known durable there.
func (j *Journal) syncDir() error {
	if err := syncDir(j.dir); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if j.created {
		if err := syncDir(filepath.Dir(j.dir)); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		j.created = false
	}
	return nil
}

// syncDir fsyncs a directory, making the entries renamed, created or
// removed in it durable. A file system that cannot sync a directory
// (EINVAL) is not an error.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// lstatStateDir checks the journal directory: absent, or a real directory
// (never a symlink, which would carry every journal write elsewhere). It
// returns whether it exists.
func lstatStateDir(dir string) (bool, error) {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("journal: %w", err)
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return false, fmt.Errorf("%s: a symlink; smpatch keeps its journal only in a real directory of the tree and will not follow it (remove it)", dir)
	}
	if !st.IsDir() {
		return false, fmt.Errorf("%s: not a directory (remove it)", dir)
	}
	// Another user who may write the journal directory may plant a lock,
	// a copy or a temporary file in it, or remove the copies: refused
	// before anything in it is opened.
	perm := st.Mode().Perm()
	owner := os.Geteuid()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		owner = int(sys.Uid)
	}
	switch {
	case perm&0o002 != 0:
		return false, fmt.Errorf("%s: writable by every user (mode %04o); smpatch keeps a journal only where other users cannot change it: chmod go-w %s (it holds the original bytes of the files patched: keep it)", dir, perm, dir)
	case perm&0o020 != 0 && owner != os.Geteuid():
		return false, fmt.Errorf("%s: writable by its group and owned by uid %d, not this user (mode %04o); smpatch keeps a journal only where other users cannot change it: its owner can chmod g-w %s", dir, owner, perm, dir)
	}
	return true, nil
}

// openInJournal opens the regular file name of the journal directory for
// reading, following no symlink.
func openInJournal(dir, name string) (*os.File, error) {
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s: a symlink; refusing", p)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file", p)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// writeStateGitignore puts a .gitignore ignoring everything in the state
// directory, so that a tree vendored inside another repository (where
// .git/info/exclude is not the tree's) stays clean. An existing entry of
// that name is left alone (O_EXCL: never followed).
func writeStateGitignore(dir string) {
	f, err := os.OpenFile(filepath.Join(dir, ".gitignore"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return
	}
	_, _ = f.WriteString("# smpatch's journal: not part of the tree\n*\n")
	_ = f.Close()
}

// addGitExclude adds the journal directory to .git/info/exclude of the
// repository whose top level is root.
func addGitExclude(root string) error {
	gitDir, ok, err := gitDirOf(root)
	if err != nil || !ok {
		return err
	}
	// Never through a symlinked info/ or exclude: a .git file from an
	// archive can name any directory.
	info := filepath.Join(gitDir, "info")
	if st, err := os.Lstat(info); err == nil && !st.IsDir() {
		return nil
	}
	excl := filepath.Join(info, "exclude")
	var data []byte
	if st, err := os.Lstat(excl); err == nil {
		if !st.Mode().IsRegular() {
			return nil
		}
		if data, err = bounded.ReadFile(nil, excl, 1<<20); err != nil {
			return nil // an exclude file we cannot read is left alone
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	line := "/" + source.StateDirName + "/"
	for l := range strings.SplitSeq(string(data), "\n") {
		switch strings.TrimSpace(l) {
		case line, source.StateDirName + "/", source.StateDirName, "/" + source.StateDirName:
			return nil
		}
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	data = append(data, "# smpatch journal\n"+line+"\n"...)
	if err := os.Mkdir(info, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := renameio.WriteFile(excl, data, 0o644, renameio.WithTempDir(info)); err != nil {
		return err
	}
	return syncDir(info)
}

// gitDirOf is the git directory of the repository whose top level is
// root: .git, or the directory a .git file names (its common directory
// for a linked work tree). ok is false when there is none, or it is not a
// git directory (no HEAD).
func gitDirOf(root string) (string, bool, error) {
	gitPath := filepath.Join(root, ".git")
	st, err := os.Stat(gitPath)
	if err != nil {
		return "", false, nil // not a git top level
	}
	gitDir := gitPath
	if !st.IsDir() {
		data, err := bounded.ReadFile(nil, gitPath, 64<<10)
		if err != nil {
			return "", false, nil
		}
		d, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
		if !ok {
			return "", false, nil
		}
		gitDir = strings.TrimSpace(d)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(root, gitDir)
		}
		if c, err := bounded.ReadFile(nil, filepath.Join(gitDir, "commondir"), 64<<10); err == nil {
			common := strings.TrimSpace(string(c))
			if !filepath.IsAbs(common) {
				common = filepath.Join(gitDir, common)
			}
			gitDir = common
		}
	}
	if st, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil || !st.Mode().IsRegular() {
		return "", false, nil
	}
	return gitDir, true, nil
}
