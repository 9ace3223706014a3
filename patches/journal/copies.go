package journal

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/smpatch/smpatch/internal/termsafe"
)

// Journal copies. Every copy of one kind for one entry is one tar file in
// the state directory, NAME.KIND.tar, holding each file whole under its
// repository path (a forced revert that removes a file records an empty
// PATH.deleted): `tar -xOf .smpatch/NAME.orig.tar PATH` prints one.
//
//	orig     the bytes before apply: what a revert or a rollback writes back (synced)
//	patched  the bytes apply wrote: to show what changed since, and to reverse-apply (not synced)
//	target   the bytes a forced revert writes, while it is in flight (synced)
//	bytecode the .pyc files apply removed beside a .py it wrote, at their
//	         __pycache__ paths: put back with the original (not synced:
//	         one lost costs a recompilation)
//
// A copy is written back only when it has the sha256 the entry recorded.

const (
	kindOrig     = "orig"
	kindPatched  = "patched"
	kindTarget   = "target"
	kindBytecode = "bytecode"
)

var copyKinds = []string{kindOrig, kindPatched, kindTarget, kindBytecode}

func (j *Journal) tarPath(kind, name string) string {
	return filepath.Join(j.dir, name+"."+kind+".tar")
}

// copySet reads (once) the tar file of one kind and entry: path → bytes;
// nil without error when there is none. Only the copies the entry records
// are kept (a copy under any other name is ignored), each bounded.
func (j *Journal) copySet(kind, name string) (map[string][]byte, error) {
	key := kind + "/" + name
	if set, ok := j.copies[key]; ok {
		return set, nil
	}
	want := map[string]bool{}
	files := 0
	if e := j.state.Get(name); e != nil {
		files = len(e.Files)
		for _, f := range e.Files {
			want[f.Path] = true
			want[f.Path+".deleted"] = true
			for _, b := range f.Bytecode {
				want[b.Path] = true
				files++
			}
		}
	}
	f, err := openInJournal(j.dir, name+"."+kind+".tar")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	set, err := readCopies(j.tarPath(kind, name), f, st.Size(), want, files)
	if err != nil {
		return nil, err
	}
	if j.copies == nil {
		j.copies = map[string]map[string][]byte{}
	}
	j.copies[key] = set
	return set, nil
}

// readCopies reads the tar file r (size bytes) of journal copies, keeping
// only the names in want (each at most maxCopyBytes, all together at most
// maxTarBytesKept), the copies of files recorded files. name is the file
// in errors.
func readCopies(name string, r io.Reader, size int64, want map[string]bool, files int) (map[string][]byte, error) {
	set := map[string][]byte{}
	if size > 2*maxTarBytesKept {
		return nil, &JournalError{Path: name, Msg: fmt.Sprintf("%d bytes, more than a journal's copies may have", size)}
	}
	// smpatch writes one entry per recorded name; allow some slack for
	// tars written by hand.
	maxHeaders := min(4*files+64, maxTarHeaders)
	tr := tar.NewReader(bufio.NewReader(r))
	var kept int64
	for n := 0; ; n++ {
		if n >= maxHeaders {
			return nil, &JournalError{Path: name, Msg: fmt.Sprintf("more than %d entries for %d recorded files", maxHeaders, files)}
		}
		h, err := tr.Next()
		if err == io.EOF {
			return set, nil
		}
		if err != nil {
			return nil, &JournalError{Path: name, Msg: err.Error()}
		}
		if h.Typeflag != tar.TypeReg || !want[h.Name] {
			continue
		}
		if _, dup := set[h.Name]; dup {
			return nil, &JournalError{Path: name, Msg: fmt.Sprintf("%q twice", h.Name)}
		}
		if h.Size < 0 || h.Size > maxCopyBytes || h.Size > size {
			return nil, &JournalError{Path: name, Msg: fmt.Sprintf("%q claims %d bytes (the file has %d, a copy may have %d)", h.Name, h.Size, size, int64(maxCopyBytes))}
		}
		kept += h.Size
		if kept > maxTarBytesKept {
			return nil, &JournalError{Path: name, Msg: fmt.Sprintf("copies of more than %d bytes", int64(maxTarBytesKept))}
		}
		b := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return nil, &JournalError{Path: name, Msg: fmt.Sprintf("%q: %v", h.Name, err)}
		}
		set[h.Name] = b
	}
}

// readCopy reads the journal copy of kind for the file rel of entry name
// and checks it against the hash the entry recorded for it; a missing one
// is an error satisfying errors.Is(err, fs.ErrNotExist), a copy with other
// bytes a JournalError.
func (j *Journal) readCopy(kind, name, rel string) ([]byte, error) {
	want := ""
	if e := j.state.Get(name); e != nil {
		if f := e.file(rel); f != nil {
			switch kind {
			case kindOrig:
				want = f.Original
			case kindPatched:
				want = f.Patched
			case kindTarget:
				want = f.Target
			}
		}
		if kind == kindBytecode {
			for _, f := range e.Files {
				for _, b := range f.Bytecode {
					if b.Path == rel {
						want = b.SHA256
					}
				}
			}
		}
	}
	where := j.tarPath(kind, name)
	missing := &fs.PathError{Op: "read", Path: where + ": " + rel, Err: fs.ErrNotExist}
	if want == "" {
		return nil, missing // nothing recorded: no copy can be proved right
	}
	set, err := j.copySet(kind, name)
	if err != nil {
		return nil, err
	}
	b, ok := set[rel]
	if !ok {
		return nil, missing
	}
	if h := Hash(b); h != want {
		return nil, &JournalError{Path: where, Msg: fmt.Sprintf("the copy of %s has sha256 %s, the journal recorded %s", termsafe.Line(rel), h[:12], want[:12])}
	}
	return b, nil
}

// Original is the original bytes of the file f of e (nil when the patch
// created it), from the journal's copy checked against its recorded hash.
// A missing or altered copy is a JournalError saying which.
func (j *Journal) Original(e *Entry, f *FileRecord) ([]byte, error) {
	if f.Original == "" {
		return nil, nil
	}
	b, err := j.readCopy(kindOrig, e.Name, f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &JournalError{Path: j.statePath(), Msg: j.Damage(e) + "; nothing written (`smpatch journal forget " + e.Name + "` drops the entry and keeps the tree as it is)"}
	}
	return b, err
}

// Patched is the bytes apply wrote to the file f of e, from the journal's
// copy checked against its recorded hash; an error when there is none (or
// it is not those bytes).
func (j *Journal) Patched(e *Entry, f *FileRecord) ([]byte, error) {
	return j.readCopy(kindPatched, e.Name, f.Path)
}

// target is the bytes a forced revert of e writes to f (nil: it removes
// the file), from its copy.
func (j *Journal) target(e *Entry, f *FileRecord) ([]byte, error) {
	if f.TargetDelete {
		return nil, nil
	}
	b, err := j.readCopy(kindTarget, e.Name, f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &JournalError{Path: j.tarPath(kindTarget, e.Name), Msg: fmt.Sprintf("no copy of the bytes a forced revert writes to %s", termsafe.Line(f.Path))}
	}
	return b, err
}

// Damage says whether the copies of e's original bytes are all there and
// right: "" when they are, else what is wrong, for people.
func (j *Journal) Damage(e *Entry) string {
	var missing []string
	for _, f := range e.Files {
		if f.Original == "" {
			continue
		}
		_, err := j.readCopy(kindOrig, e.Name, f.Path)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, f.Path)
		default:
			return err.Error()
		}
	}
	if len(missing) == 0 {
		return ""
	}
	p := j.tarPath(kindOrig, e.Name)
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s is missing: the original bytes of %d file(s) cannot be restored", p, len(missing))
	}
	return fmt.Sprintf("%s has no copy of %s: its original bytes cannot be restored", p, termsafe.Line(strings.Join(missing, ", ")))
}

// dropCopies removes every copy of the entry name.
func (j *Journal) dropCopies(name string) {
	for _, k := range copyKinds {
		_ = os.Remove(j.tarPath(k, name))
		delete(j.copies, k+"/"+name)
	}
}

// copyWriter writes the tar file of one kind for one entry. Its name is
// cleared first (a symlink itself, never what it points to) and the file
// created exclusively: a name planted in between makes the create fail.
type copyWriter struct {
	f  *os.File
	bw *bufio.Writer
	tw *tar.Writer
}

func (j *Journal) newCopyWriter(kind, name string) (*copyWriter, error) {
	p := j.tarPath(kind, name)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	delete(j.copies, kind+"/"+name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriter(f)
	return &copyWriter{f: f, bw: bw, tw: tar.NewWriter(bw)}, nil
}

// add puts one copy in the tar file.
func (w *copyWriter) add(rel string, data []byte) error {
	// The time only serves people who extract the copies by hand.
	h := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(data)), ModTime: time.Now().Truncate(time.Second)}
	if err := w.tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := w.tw.Write(data)
	return err
}

// close ends the tar file, syncs it when durable, and closes it.
func (w *copyWriter) close(durable bool) error {
	err := w.tw.Close()
	if err == nil {
		err = w.bw.Flush()
	}
	if err == nil && durable {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeCopies writes the copies of one kind for the entry name (path →
// bytes, in the order of paths); durable ones are synced. The state
// directory is synced with the state that names them.
func (j *Journal) writeCopies(kind, name string, paths []string, data map[string][]byte, durable bool) error {
	if len(paths) == 0 {
		return nil
	}
	w, err := j.newCopyWriter(kind, name)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	for _, p := range paths {
		if err := w.add(p, data[p]); err != nil {
			_ = w.close(false)
			return fmt.Errorf("journal: %w", err)
		}
	}
	if err := w.close(durable); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// dropOrphans removes journal copies of entries the state does not name
// (a command killed before its pending entry was saved wrote no tree
// file), and temporary files of state.json a kill left before renaming
// one in.
func (j *Journal) dropOrphans() {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return
	}
	j.cleanStale()
	for _, de := range ents {
		n := de.Name()
		if !de.Type().IsRegular() {
			continue
		}
		for _, k := range copyKinds {
			if name, ok := strings.CutSuffix(n, "."+k+".tar"); ok && j.state.Get(name) == nil {
				_ = os.Remove(filepath.Join(j.dir, n))
			}
		}
	}
}

// cleanStale removes the temporary files of state.json a killed command
// left (".state.json" followed by digits; regular files only, never a
// link or anything else of that name): under the lock, no command is
// writing one.
func (j *Journal) cleanStale() {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return
	}
	for _, de := range ents {
		if de.Type().IsRegular() && isTempOf(de.Name(), stateName) {
			_ = os.Remove(filepath.Join(j.dir, de.Name()))
		}
	}
}

// isTempOf reports whether the file name n is a temporary file written
// for base (renameio names them ".BASE" followed by digits). Matched as
// bytes: a name need not be UTF-8.
func isTempOf(n, base string) bool {
	digits, ok := strings.CutPrefix(n, "."+base)
	if !ok || digits == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}
