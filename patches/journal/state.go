package journal

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
)

// stateFormat is the version of the state's layout: 3 is the state signed
// beside it in state.json ({"mac": ..., "state": ...}); formats 1 and 2 (a
// bare state) are read, and adopted with `smpatch journal trust`.
const stateFormat = 3

// What the reader accepts (docs/security.md, "Journals"): a journal is
// input like any other file, read with bounds, and every path in it is
// checked before it becomes a file name.
const (
	maxStateBytes   = 16 << 20 // state.json
	maxJournalFiles = 100_000  // file records, all entries together
	maxCopyBytes    = 64 << 20 // one journal copy
	// maxBytecodePerFile bounds the .pyc records of one file (one per
	// interpreter tag and optimisation level).
	maxBytecodePerFile = 64
	maxTarBytesKept    = 512 << 20 // the copies kept from one tar file
	maxTarHeaders      = 200_000   // headers read from one tar file
)

// EntryState is where a journal entry stands.
type EntryState string

const (
	Pending   EntryState = "pending"   // apply in flight: roll back
	Applied   EntryState = "applied"   // done
	Reverting EntryState = "reverting" // revert in flight: finish
)

// State is the journal's content: the entries of the patches applied to
// the tree, and those in flight.
type State struct {
	Format  int      `json:"format"`
	Tree    string   `json:"tree"`
	Kind    string   `json:"kind"`
	Patches []*Entry `json:"patches"`
}

// Entry is one applied patch (or one in flight).
type Entry struct {
	Name          string        `json:"name"`
	Project       string        `json:"project"`
	State         EntryState    `json:"state"`
	Variant       string        `json:"variant"`
	VariantReason string        `json:"variant_reason,omitempty"`
	Version       string        `json:"version,omitempty"`
	VersionFrom   string        `json:"version_from,omitempty"`
	Origin        string        `json:"origin"`
	PatchDigest   string        `json:"patch_digest"`
	CatalogDigest string        `json:"catalog_digest,omitempty"`
	ToolVersion   string        `json:"tool_version"`
	AppliedAt     time.Time     `json:"applied_at"`
	Notes         []string      `json:"notes,omitempty"`
	Files         []*FileRecord `json:"files"`
	// CreatedDirs are the directories (repository-relative) apply made
	// for the files the patch created, deepest first: a revert or a
	// rollback removes those that are empty again.
	CreatedDirs []string `json:"created_dirs,omitempty"`
}

// FileRecord is one file an entry changed.
type FileRecord struct {
	Path     string // repository-relative
	Original string // sha256 of the bytes before; "" when the patch created the file
	Patched  string // sha256 of the bytes written; "" when the patch deleted it
	// Target is the hash of the bytes a forced revert writes (TargetDelete:
	// it removes the file), and Before the hash of the file before that
	// revert: an interrupted forced revert is finished only on files that
	// have one of the hashes it recorded.
	Target       string
	TargetDelete bool
	Before       string
	// Bytecode is the cached bytecode of the file that apply removed
	// (__pycache__/STEM.TAG.pyc): revert and a rollback put it back beside
	// the original bytes.
	Bytecode []Bytecode
}

// Bytecode is one .pyc file apply removed: its repository path (in the
// __pycache__ beside its source) and the sha256 of its copy.
type Bytecode struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Get returns the entry called name, or nil.
func (s *State) Get(name string) *Entry {
	for _, e := range s.Patches {
		if e.Name == name {
			return e
		}
	}
	return nil
}

func (s *State) remove(name string) {
	out := s.Patches[:0]
	for _, e := range s.Patches {
		if e.Name != name {
			out = append(out, e)
		}
	}
	s.Patches = out
}

// file returns e's record of path, or nil.
func (e *Entry) file(path string) *FileRecord {
	for _, f := range e.Files {
		if f.Path == path {
			return f
		}
	}
	return nil
}

// Hash is the hex sha256 of b, "" for nil (an absent file).
func Hash(b []byte) string {
	if b == nil {
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// JournalError is a journal that cannot be read as smpatch writes them:
// damaged, truncated, over a bound, or naming a path it must not touch.
type JournalError struct {
	Path string
	Msg  string
}

func (e *JournalError) Error() string { return fmt.Sprintf("%s: journal damaged: %s", e.Path, e.Msg) }

// parseState decodes a state (the bare document, or the "state" of
// state.json) and checks it; path names the file in errors. Everything the
// journal later turns into a file name or writes back is checked here:
// names, states, clean paths outside .git and the journal, hashes, bounds.
func parseState(path string, data []byte) (*State, error) {
	bad := func(f string, a ...any) (*State, error) {
		return nil, &JournalError{Path: path, Msg: fmt.Sprintf(f, a...)}
	}
	s := new(State)
	if err := json.Unmarshal(data, s); err != nil {
		return bad("%v", err)
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
		case Pending, Applied, Reverting:
		default:
			return bad("entry %s has unknown state %q", e.Name, e.State)
		}
		nfiles += len(e.Files)
		if nfiles > maxJournalFiles {
			return bad("more than %d file records", maxJournalFiles)
		}
		if msg := checkFiles(e); msg != "" {
			return bad("entry %s: %s", e.Name, msg)
		}
	}
	return s, nil
}

// checkFiles says what is wrong with e's file records and created
// directories, or "".
func checkFiles(e *Entry) string {
	seen := map[string]bool{}
	for _, f := range e.Files {
		if f == nil {
			return "empty file record"
		}
		c, err := source.CleanRel(f.Path)
		if err != nil {
			return err.Error()
		}
		if c != f.Path {
			return fmt.Sprintf("path %q is not in clean form", f.Path)
		}
		if why := source.ReservedPath(f.Path); why != "" {
			return fmt.Sprintf("%q is %s; the journal never restores there", f.Path, why)
		}
		if seen[f.Path] {
			return fmt.Sprintf("%q twice", f.Path)
		}
		seen[f.Path] = true
		for _, h := range []string{f.Original, f.Patched, f.Target, f.Before} {
			if !validHash(h) {
				return fmt.Sprintf("%q: a hash that is not 64 hex digits", f.Path)
			}
		}
		if f.Original == "" && f.Patched == "" {
			return fmt.Sprintf("%q has neither an original nor a patched hash", f.Path)
		}
		if f.Target != "" && f.TargetDelete {
			return fmt.Sprintf("%q has a target both written and deleted", f.Path)
		}
		if len(f.Bytecode) > maxBytecodePerFile {
			return fmt.Sprintf("%q: more than %d bytecode records", f.Path, maxBytecodePerFile)
		}
		for _, b := range f.Bytecode {
			if !IsBytecodeOf(b.Path, f.Path) || b.SHA256 == "" || !validHash(b.SHA256) {
				return fmt.Sprintf("%q: bytecode record %q is not a hashed .pyc in the __pycache__ beside it", f.Path, b.Path)
			}
		}
	}
	for _, d := range e.CreatedDirs {
		if _, err := source.CleanRel(d); err != nil || !dirOfAny(d, e.Files) || source.ReservedPath(d) != "" {
			return fmt.Sprintf("created directory %q is not above one of its files", d)
		}
	}
	return ""
}

func validHash(h string) bool {
	if h == "" {
		return true
	}
	if len(h) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// dirOfAny reports whether d is a directory above one of files.
func dirOfAny(d string, files []*FileRecord) bool {
	for _, f := range files {
		if strings.HasPrefix(f.Path, d+"/") {
			return true
		}
	}
	return false
}

// File names need not be UTF-8; JSON strings are. A path that is not valid
// UTF-8 is stored twice: "path" for people (invalid bytes as U+FFFD) and
// "path_b64", the exact bytes, which readers use.

type fileRecordJSON struct {
	Path         string     `json:"path"`
	PathB64      string     `json:"path_b64,omitempty"`
	Original     string     `json:"original_sha256,omitempty"`
	Patched      string     `json:"patched_sha256,omitempty"`
	Target       string     `json:"target_sha256,omitempty"`
	TargetDelete bool       `json:"target_delete,omitempty"`
	Before       string     `json:"before_sha256,omitempty"`
	Bytecode     []Bytecode `json:"bytecode,omitempty"`
}

// MarshalJSON stores the path losslessly.
func (f *FileRecord) MarshalJSON() ([]byte, error) {
	j := fileRecordJSON{Path: f.Path, Original: f.Original, Patched: f.Patched, Target: f.Target, TargetDelete: f.TargetDelete, Before: f.Before, Bytecode: f.Bytecode}
	j.Path, j.PathB64 = lossless(f.Path)
	return json.Marshal(&j)
}

// UnmarshalJSON reads path_b64 when present.
func (f *FileRecord) UnmarshalJSON(b []byte) error {
	var j fileRecordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	p, err := exact(j.Path, j.PathB64)
	if err != nil {
		return fmt.Errorf("path_b64 of %q: %v", j.Path, err)
	}
	*f = FileRecord{Path: p, Original: j.Original, Patched: j.Patched, Target: j.Target, TargetDelete: j.TargetDelete, Before: j.Before, Bytecode: j.Bytecode}
	return nil
}

type entryAlias Entry

type entryJSON struct {
	*entryAlias
	CreatedDirs    []string `json:"created_dirs,omitempty"`
	CreatedDirsB64 []string `json:"created_dirs_b64,omitempty"`
}

// MarshalJSON stores the created directories losslessly.
func (e *Entry) MarshalJSON() ([]byte, error) {
	j := entryJSON{entryAlias: (*entryAlias)(e)}
	lossy := false
	for _, d := range e.CreatedDirs {
		shown, b64 := lossless(d)
		j.CreatedDirs = append(j.CreatedDirs, shown)
		j.CreatedDirsB64 = append(j.CreatedDirsB64, b64)
		lossy = lossy || b64 != ""
	}
	if !lossy {
		j.CreatedDirsB64 = nil
	}
	return json.Marshal(&j)
}

// UnmarshalJSON reads created_dirs_b64 when present.
func (e *Entry) UnmarshalJSON(b []byte) error {
	j := entryJSON{entryAlias: (*entryAlias)(e)}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	e.CreatedDirs = j.CreatedDirs
	if j.CreatedDirsB64 == nil {
		return nil
	}
	if len(j.CreatedDirsB64) != len(j.CreatedDirs) {
		return errors.New("created_dirs_b64 and created_dirs differ in length")
	}
	for i, b64 := range j.CreatedDirsB64 {
		d, err := exact(j.CreatedDirs[i], b64)
		if err != nil {
			return fmt.Errorf("created_dirs_b64 of %q: %v", j.CreatedDirs[i], err)
		}
		e.CreatedDirs[i] = d
	}
	return nil
}

// lossless is s for people (bytes that are not UTF-8 as U+FFFD) and, when
// that loses bytes, s exactly in base64 ("" otherwise).
func lossless(s string) (shown, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return strings.ToValidUTF8(s, "\uFFFD"), base64.StdEncoding.EncodeToString([]byte(s))
}

// exact is the string lossless stored as shown and b64.
func exact(shown, b64 string) (string, error) {
	if b64 == "" {
		return shown, nil
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", err
	}
	if strings.ToValidUTF8(string(raw), "\uFFFD") != shown {
		return "", errors.New("names another path")
	}
	return string(raw), nil
}
