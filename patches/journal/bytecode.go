package journal

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/smpatch/smpatch/source"
)

// Cached bytecode. Apply removes the .pyc files of every .py it writes
// (an unchecked-hash pyc would keep running the old source) and keeps
// copies of them; a revert, or the rollback of an apply, puts them back
// beside the original bytes, so that an installed package is again as pip
// left it (its RECORD lists them; a site-packages directory the server
// cannot write would otherwise compile those modules at every start). A
// timestamp-based pyc records its source's mtime and size: the restored
// source gets that mtime back when the size is the one recorded, or the
// pyc would be stale at once. A copy that is missing or has other bytes is
// not put back: the module is then compiled again, as after any change.

// IsBytecodeOf reports whether pyc (a repository path) is cached bytecode
// of the .py file src: __pycache__/STEM.TAG.pyc (or .opt-N.pyc) beside it.
func IsBytecodeOf(pyc, src string) bool {
	if !strings.HasSuffix(src, ".py") || path.Dir(pyc) != path.Join(path.Dir(src), "__pycache__") {
		return false
	}
	stem := strings.TrimSuffix(path.Base(src), ".py")
	mid, ok := strings.CutPrefix(path.Base(pyc), stem+".")
	return ok && strings.HasSuffix(mid, ".pyc") && strings.TrimSuffix(mid, ".pyc") != "" && !strings.Contains(mid, "/")
}

// readBytecode reads the .pyc files beside the .py file rel (repository
// path -> bytes), each bounded as a journal copy is; none for other files.
func readBytecode(t source.WritableTree, rel string) map[string][]byte {
	if !strings.HasSuffix(rel, ".py") {
		return nil
	}
	out := map[string][]byte{}
	inRoot(t, rel, func(r *os.Root, d string) {
		cache := filepath.Join(filepath.Dir(d), "__pycache__")
		for _, de := range readDir(r, cache) {
			pyc := path.Join(path.Dir(rel), "__pycache__", de.Name())
			if !de.Type().IsRegular() || !IsBytecodeOf(pyc, rel) || len(out) >= maxBytecodePerFile {
				continue
			}
			if b, err := readInRoot(r, filepath.Join(cache, de.Name()), maxCopyBytes); err == nil {
				out[pyc] = b
			}
		}
	})
	return out
}

// readInRoot reads a regular file through r, at most max bytes.
func readInRoot(r *os.Root, name string, max int64) ([]byte, error) {
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > max {
		return nil, errors.New("not a regular file of a journal copy's size")
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// recordBytecode reads the bytecode beside each .py file a write changes
// and records it in the file's record; it returns the copies to keep, by
// path, in order.
func recordBytecode(t source.WritableTree, f *FileRecord, old []byte) ([]string, map[string][]byte) {
	if old == nil {
		return nil, nil
	}
	pycs := readBytecode(t, f.Path)
	order := make([]string, 0, len(pycs))
	for p := range pycs {
		order = append(order, p)
	}
	sort.Strings(order)
	for _, p := range order {
		f.Bytecode = append(f.Bytecode, Bytecode{Path: p, SHA256: Hash(pycs[p])})
	}
	return order, pycs
}

// restoreBytecode puts back, beside the file of f now at its original
// bytes, the bytecode apply removed, after removing any compiled since.
// It returns the paths it removed and those it put back.
func (j *Journal) restoreBytecode(e *Entry, f *FileRecord) (removed, restored []string) {
	removed = RemovePyc(j.t, f.Path)
	for _, b := range f.Bytecode {
		data, err := j.readCopy(kindBytecode, e.Name, b.Path)
		if err != nil || !IsBytecodeOf(b.Path, f.Path) {
			continue
		}
		if writeBytecode(j.t, f.Path, b.Path, data) {
			restored = append(restored, b.Path)
		}
	}
	return removed, restored
}

// writeBytecode writes the pyc data at the repository path pyc (beside
// src) and, for a timestamp-based pyc whose recorded size is src's, gives
// src the mtime the pyc records.
func writeBytecode(t source.WritableTree, src, pyc string, data []byte) bool {
	if t.CheckPath(pyc) != nil || t.CheckPath(src) != nil {
		return false
	}
	dp, err := t.DiskPath(pyc)
	if err != nil {
		return false
	}
	ds, err := t.DiskPath(src)
	if err != nil {
		return false
	}
	r, err := t.OpenRoot()
	if err != nil {
		return false
	}
	defer r.Close()
	if err := r.MkdirAll(filepath.Dir(dp), 0o755); err != nil {
		return false
	}
	tmp := filepath.Join(filepath.Dir(dp), "."+filepath.Base(dp)+".smpatch-tmp")
	if err := r.WriteFile(tmp, data, 0o644); err != nil {
		return false
	}
	if err := r.Rename(tmp, dp); err != nil {
		_ = r.Remove(tmp)
		return false
	}
	// PEP 552: magic, flags; flags bit 0 clear: source mtime and size.
	if len(data) >= 16 && binary.LittleEndian.Uint32(data[4:8])&1 == 0 {
		mtime := binary.LittleEndian.Uint32(data[8:12])
		size := binary.LittleEndian.Uint32(data[12:16])
		if st, err := r.Stat(ds); err == nil && uint32(st.Size()) == size {
			when := time.Unix(int64(mtime), 0)
			_ = r.Chtimes(ds, when, when)
		}
	}
	return true
}
