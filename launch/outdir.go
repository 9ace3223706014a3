package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gofrs/flock"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/confined"
)

// The results directory of a run. smpatch writes only into a directory
// that is new, empty or carries its marker, holds the directory's lock for
// the whole run (a second run into it is refused: its rows would be
// recorded twice, its logs would overwrite the first's, and with docker
// each run's "docker rm -f" would kill the other's container), and writes
// every file through an os.Root of it, never through a symbolic link or
// into a named pipe found in it.

// ResultsMarker marks a directory smpatch matrix run wrote;
// resultsMarkerText is its content (a format and its version).
const (
	ResultsMarker     = ".smpatch-results"
	resultsMarkerText = "{\"format\": \"smpatch-results\", \"version\": 1}\n"
	resultsLock       = ".smpatch-results.lock"
)

// maxOutEntries bounds the walk of an existing results directory before a
// run writes into it: a run of 65536 cells leaves about 4 entries a cell.
const maxOutEntries = 1 << 20

// NotResultsError refuses a non-empty directory that smpatch matrix run
// did not write (it has no marker): the run would replace its results.md
// and logs.
type NotResultsError struct {
	Dir    string
	Reason string
}

func (e *NotResultsError) Error() string {
	return fmt.Sprintf("%s is not empty and was not written by smpatch matrix run (%s); choose another --out or remove it", e.Dir, e.Reason)
}

// OutBusyError refuses a results directory another run is writing into.
type OutBusyError struct {
	Dir    string
	Holder string // "another smpatch (pid N)"
}

func (e *OutBusyError) Error() string {
	return fmt.Sprintf("%s: %s is running into this results directory; wait for it or choose another --out", e.Dir, e.Holder)
}

// outDir is a results directory held by a run.
type outDir struct {
	path string
	root *os.Root
	lock *flock.Flock
}

// checkOut refuses a results directory a run must not write into, and
// writes nothing: a symbolic link given as the directory, a file, a
// non-empty directory without the marker, and a directory holding a
// symbolic link, a named pipe or a device anywhere in it. A missing
// directory is fine.
func checkOut(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link; name the results directory itself", dir)
	case !fi.IsDir():
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	b, err := bounded.ReadFile(nil, filepath.Join(dir, ResultsMarker), 4096)
	if err != nil {
		return &NotResultsError{Dir: dir, Reason: "no " + ResultsMarker + " marker"}
	}
	var mk struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if json.Unmarshal(b, &mk) != nil || mk.Format != "smpatch-results" || mk.Version < 1 {
		return &NotResultsError{Dir: dir, Reason: ResultsMarker + " is not its marker"}
	}
	if mk.Version > 1 {
		return fmt.Errorf("%s: written by a newer smpatch (results format %d); choose another --out", dir, mk.Version)
	}
	return confined.CheckTree(dir, maxOutEntries)
}

// probeOut reports, without taking or making anything, another run
// holding dir's lock.
func probeOut(dir string) error {
	p := filepath.Join(dir, resultsLock)
	l := flock.New(p, flock.SetFlag(os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK))
	ok, err := l.TryRLock()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if !ok {
		return &OutBusyError{Dir: dir, Holder: lockHolder(p)}
	}
	return l.Unlock()
}

// holdOut makes dir when missing, takes its lock (refusing a directory
// another run holds) and writes its marker. checkOut has refused what
// must not be written into.
func holdOut(dir string) (*outDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, resultsLock)
	l := flock.New(p, flock.SetFlag(os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK), flock.SetPermissions(0o644))
	ok, err := l.TryLock()
	switch {
	case errors.Is(err, syscall.ELOOP):
		err = &confined.EntryError{Path: p, Kind: "a symbolic link"}
	case err == nil && !ok:
		err = &OutBusyError{Dir: dir, Holder: lockHolder(p)}
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	if fi, err := l.Stat(); err != nil || !fi.Mode().IsRegular() {
		l.Close()
		root.Close()
		return nil, &confined.EntryError{Path: p, Kind: "not a regular file"}
	}
	if f, err := confined.Create(root, resultsLock, 0o644); err == nil {
		f.WriteString("pid " + strconv.Itoa(os.Getpid()) + "\n")
		f.Close()
	}
	od := &outDir{path: dir, root: root, lock: l}
	if _, err := root.Lstat(ResultsMarker); err != nil {
		if err := confined.WriteFile(root, ResultsMarker, []byte(resultsMarkerText), 0o644); err != nil {
			od.close()
			return nil, err
		}
	}
	return od, nil
}

// lockHolder names the process whose id a lock file holds.
func lockHolder(p string) string {
	b, err := bounded.ReadFile(nil, p, 64)
	if s := strings.TrimSpace(string(b)); err == nil && strings.HasPrefix(s, "pid ") {
		if _, err := strconv.Atoi(s[4:]); err == nil {
			return "another smpatch matrix run (" + s + ")"
		}
	}
	return "another smpatch matrix run"
}

func (d *outDir) close() {
	if d == nil {
		return
	}
	d.lock.Close()
	d.root.Close()
}

// name is rel as a path beside the directory's own, for results and
// messages.
func (d *outDir) name(rel string) string { return filepath.Join(d.path, filepath.FromSlash(rel)) }

func (d *outDir) create(rel string) (*os.File, error) { return confined.Create(d.root, rel, 0o644) }

func (d *outDir) appendTo(rel string) (*os.File, error) {
	return confined.Append(d.root, rel, 0o644)
}

func (d *outDir) writeFile(rel string, data []byte, perm fs.FileMode) error {
	return confined.WriteFile(d.root, rel, data, perm)
}

func (d *outDir) mkdirAll(rel string) error { return confined.MkdirAll(d.root, rel) }

// relName is path (under the directory, as Run names its files) relative
// to the directory, with slashes.
func (d *outDir) relName(path string) (string, error) {
	rel, err := filepath.Rel(d.path, path)
	if err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s is not under the results directory %s", path, d.path)
	}
	return filepath.ToSlash(rel), nil
}

// createLog creates a cell's log, path as newResult names it.
func (d *outDir) createLog(path string) (*os.File, error) {
	rel, err := d.relName(path)
	if err != nil {
		return nil, err
	}
	return d.create(rel)
}
