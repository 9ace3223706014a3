package patches

import (
	"archive/tar"
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
)

// What the journal reader accepts (docs/security.md, "Journals"): a
// journal is input like any other file, read with bounds, and every path in
// it is checked before it becomes a file name.
const (
	maxStateBytes    = 16 << 20  // state.json
	maxJournalFiles  = 100_000   // file records, all entries together
	maxCopyBytes     = 64 << 20  // one journal copy
	maxTarBytesKept  = 512 << 20 // the copies kept from one tar file
	maxTarHeaders    = 200_000   // headers read from one tar file
	hashHexLen       = 64
	reservedGitDir   = ".git"
	journalStateJSON = "state.json"
)

// JournalError is a journal that cannot be read as smpatch writes them:
// damaged, truncated, over a bound, or naming a path it must not touch.
type JournalError struct {
	Path string
	Msg  string
}

func (e *JournalError) Error() string { return fmt.Sprintf("%s: journal damaged: %s", e.Path, e.Msg) }

// reservedPath says why a repository-relative path is one the journal must
// never name (".git" or the journal directory, at any depth), or "".
func reservedPath(rel string) string {
	for _, part := range strings.Split(rel, "/") {
		switch strings.ToLower(strings.TrimRight(part, ". ")) {
		case reservedGitDir:
			return "inside .git"
		case source.StateDirName:
			return "inside " + source.StateDirName
		}
	}
	return ""
}

func validHash(h string) bool {
	if h == "" {
		return true
	}
	if len(h) != hashHexLen {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parseState decodes and checks state.json; path names the file in
// errors. It does not check the owner.
func parseState(path string, data []byte) (*State, error) {
	bad := func(f string, a ...any) (*State, error) {
		return nil, &JournalError{Path: path, Msg: fmt.Sprintf(f, a...)}
	}
	if len(data) > maxStateBytes {
		return bad("%d bytes, more than the %d a journal may have", len(data), maxStateBytes)
	}
	// The encoder's own shape is read without reflection; anything else
	// by encoding/json, which also words the errors.
	s, ok := decodeState(data)
	if !ok {
		s = new(State)
		if err := json.Unmarshal(data, s); err != nil {
			return bad("%v", err)
		}
	}
	if s.Format > stateFormat {
		return nil, fmt.Errorf("%s: written by a newer smpatch (format %d)", path, s.Format)
	}
	if s.Format < 1 {
		return bad("format %d", s.Format)
	}
	seenEntry := map[string]bool{}
	nfiles := 0
	for _, e := range s.Patches {
		if e == nil || !catalog.ValidName(e.Name) || len(e.Name) > 200 {
			return bad("bad patch name in an entry")
		}
		if seenEntry[e.Name] {
			return bad("entry %s twice", e.Name)
		}
		seenEntry[e.Name] = true
		switch e.State {
		case StatePending, StateApplied, StateReverting:
		default:
			return bad("entry %s has unknown state %q", e.Name, e.State)
		}
		seen := map[string]bool{}
		for _, f := range e.Files {
			nfiles++
			if nfiles > maxJournalFiles {
				return bad("more than %d file records", maxJournalFiles)
			}
			if f == nil {
				return bad("empty file record in %s", e.Name)
			}
			c, err := source.CleanRel(f.Path)
			if err != nil {
				return bad("entry %s: %v", e.Name, err)
			}
			if c != f.Path {
				return bad("entry %s: path %q is not in clean form", e.Name, f.Path)
			}
			if why := reservedPath(f.Path); why != "" {
				return bad("entry %s: %q is %s; the journal never restores there", e.Name, f.Path, why)
			}
			if seen[f.Path] {
				return bad("entry %s: %q twice", e.Name, f.Path)
			}
			seen[f.Path] = true
			for _, h := range []string{f.Original, f.Patched, f.Target, f.Before} {
				if !validHash(h) {
					return bad("entry %s: %q: a hash that is not 64 hex digits", e.Name, f.Path)
				}
			}
			if f.Original == "" && f.Patched == "" {
				return bad("entry %s: %q has neither an original nor a patched hash", e.Name, f.Path)
			}
			if f.Target != "" && f.TargetDelete {
				return bad("entry %s: %q has a target both written and deleted", e.Name, f.Path)
			}
		}
		for _, d := range e.CreatedDirs {
			if _, err := source.CleanRel(d); err != nil || !dirOfAny(d, e.Files) || reservedPath(d) != "" {
				return bad("entry %s: created directory %q is not above one of its files", e.Name, d)
			}
		}
	}
	return s, nil
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
	return true, nil
}

// openInJournal opens the regular file rel (slash-separated) under the
// journal directory dir for reading, following no symlink on the way.
func openInJournal(dir, rel string) (fs.File, os.FileInfo, error) {
	parts := strings.Split(rel, "/")
	cur := dir
	for _, p := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, p)
		st, err := os.Lstat(cur)
		if err != nil {
			return nil, nil, err
		}
		if !st.IsDir() {
			return nil, nil, fmt.Errorf("%s: not a directory (a symlink?); refusing", cur)
		}
	}
	p := filepath.Join(cur, parts[len(parts)-1])
	f, err := source.OpenRead(p, syscall.O_NOFOLLOW|syscall.O_NONBLOCK)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, fmt.Errorf("%s: a symlink; refusing", p)
		}
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: not a regular file", p)
	}
	return f, st, nil
}

// isRealDir reports whether p is a directory and not a symlink.
func isRealDir(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.IsDir()
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
	// A small buffer: a copy's bytes are read into their own slice directly.
	tr := tar.NewReader(bufio.NewReaderSize(r, 4<<10))
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

// guardTreePath refuses a tree path that, with every symlink on it
// resolved, is inside .git or the journal directory of the tree's root.
func guardTreePath(t source.WritableTree, rel string) (string, error) {
	pc, err := guardTreeCheck(t, rel)
	return pc.Abs, err
}

// pathChecker is implemented by trees on disk: ResolvedPath, keeping what
// the check saw of the file and its directory (source.PathCheck).
type pathChecker interface {
	CheckPath(rel string) (source.PathCheck, error)
}

// guardTreeCheck is guardTreePath giving the whole source.PathCheck (only
// Abs is set for a tree that does not keep one).
func guardTreeCheck(t source.WritableTree, rel string) (source.PathCheck, error) {
	var pc source.PathCheck
	if c, ok := t.(pathChecker); ok {
		var err error
		if pc, err = c.CheckPath(rel); err != nil {
			return source.PathCheck{}, err
		}
	} else {
		p, resolved, err := guardPaths(t, rel)
		if err != nil {
			return source.PathCheck{}, err
		}
		pc = source.PathCheck{Abs: p, Resolved: resolved}
	}
	root := t.Root()
	for _, d := range []string{reservedGitDir, source.StateDirName} {
		r := filepath.Join(root, d)
		if pc.Resolved == r || strings.HasPrefix(pc.Resolved, r+string(filepath.Separator)) {
			return source.PathCheck{}, fmt.Errorf("%s: leads into %s; the journal never writes there", rel, d)
		}
	}
	return pc, nil
}

func guardPaths(t source.WritableTree, rel string) (p, resolved string, err error) {
	if rp, ok := t.(resolvedPather); ok {
		return rp.ResolvedPath(rel)
	}
	if p, err = diskPath(t, rel); err != nil {
		return "", "", err
	}
	return p, resolveExisting(p), nil
}

// resolveExisting is where p lands once created (source.ResolveExisting),
// or p itself when its existing prefix cannot be resolved.
// resolvedPather is implemented by trees on disk: AbsPath, and where the
// path lands with its symlinks resolved, from one look at the path.
type resolvedPather interface {
	ResolvedPath(rel string) (abs, resolved string, err error)
}

func resolveExisting(p string) string {
	resolved, err := source.ResolveExisting(p)
	if err != nil {
		return p
	}
	return resolved
}

// File names need not be UTF-8; JSON strings are. A path that is not valid
// UTF-8 is stored twice: "path" for people (invalid bytes as U+FFFD) and
// "path_b64", the exact bytes, which readers use. Journals without
// path_b64 read as before.

type fileRecordJSON struct {
	Path         string `json:"path"`
	PathB64      string `json:"path_b64,omitempty"`
	Original     string `json:"original_sha256,omitempty"`
	Patched      string `json:"patched_sha256,omitempty"`
	Target       string `json:"target_sha256,omitempty"`
	TargetDelete bool   `json:"target_delete,omitempty"`
	Before       string `json:"before_sha256,omitempty"`
}

// MarshalJSON stores the path losslessly.
func (f *FileRecord) MarshalJSON() ([]byte, error) {
	j := fileRecordJSON{Path: f.Path, Original: f.Original, Patched: f.Patched, Target: f.Target, TargetDelete: f.TargetDelete, Before: f.Before}
	if !utf8.ValidString(f.Path) {
		j.Path = strings.ToValidUTF8(f.Path, "\uFFFD")
		j.PathB64 = base64.StdEncoding.EncodeToString([]byte(f.Path))
	}
	return json.Marshal(&j)
}

// UnmarshalJSON reads path_b64 when present.
func (f *FileRecord) UnmarshalJSON(b []byte) error {
	var j fileRecordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*f = FileRecord{Path: j.Path, Original: j.Original, Patched: j.Patched, Target: j.Target, TargetDelete: j.TargetDelete, Before: j.Before}
	if j.PathB64 != "" {
		raw, err := base64.StdEncoding.DecodeString(j.PathB64)
		if err != nil {
			return fmt.Errorf("path_b64 of %q: %v", j.Path, err)
		}
		if strings.ToValidUTF8(string(raw), "\uFFFD") != j.Path {
			return fmt.Errorf("path_b64 of %q names another path", j.Path)
		}
		f.Path = string(raw)
	}
	return nil
}

// encodeDirs is CreatedDirs for JSON: the people's form and, when one of
// them is not UTF-8, the exact bytes of each.
func encodeDirs(dirs []string) (shown, b64 []string) {
	lossy := false
	for _, d := range dirs {
		if !utf8.ValidString(d) {
			lossy = true
		}
	}
	if !lossy {
		return dirs, nil
	}
	for _, d := range dirs {
		shown = append(shown, strings.ToValidUTF8(d, "\uFFFD"))
		b64 = append(b64, base64.StdEncoding.EncodeToString([]byte(d)))
	}
	return shown, b64
}

func decodeDirs(shown, b64 []string) ([]string, error) {
	if b64 == nil {
		return shown, nil
	}
	if len(b64) != len(shown) {
		return nil, errors.New("created_dirs_b64 and created_dirs differ in length")
	}
	out := make([]string, len(b64))
	for i, s := range b64 {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("created_dirs_b64: %v", err)
		}
		if strings.ToValidUTF8(string(raw), "\uFFFD") != shown[i] {
			return nil, fmt.Errorf("created_dirs_b64 names another directory than %q", shown[i])
		}
		out[i] = string(raw)
	}
	return out, nil
}

type entryAlias Entry

type entryJSON struct {
	*entryAlias
	CreatedDirs    []string `json:"created_dirs,omitempty"`
	CreatedDirsB64 []string `json:"created_dirs_b64,omitempty"`
}

// MarshalJSON stores the created directories losslessly.
func (e *Entry) MarshalJSON() ([]byte, error) {
	shown, b64 := encodeDirs(e.CreatedDirs)
	return json.Marshal(&entryJSON{entryAlias: (*entryAlias)(e), CreatedDirs: shown, CreatedDirsB64: b64})
}

// UnmarshalJSON reads created_dirs_b64 when present.
func (e *Entry) UnmarshalJSON(b []byte) error {
	j := entryJSON{entryAlias: (*entryAlias)(e)}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	dirs, err := decodeDirs(j.CreatedDirs, j.CreatedDirsB64)
	if err != nil {
		return err
	}
	e.CreatedDirs = dirs
	return nil
}

// DisplayPath is a journal path as it is safe to print on a terminal:
// control characters and bytes that are not UTF-8 escaped.
func DisplayPath(p string) string { return displayLine(p) }
