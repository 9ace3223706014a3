package journal

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/smpatch/smpatch/internal/words"
)

// Whose journal it is (docs/security.md, "Journals"). state.json holds the
// state as written and, beside it, an HMAC-SHA256 of those very bytes made
// with a key that lives outside every tree, in the user's state directory
// ($XDG_STATE_HOME/smpatch/journal.key, else ~/.local/state/...):
//
//	{
//	  "mac": "HEX",
//	  "state": {...}
//	}
//
// A journal committed into a repository, copied from another user or
// machine, or edited by hand fails the check: smpatch then refuses to act
// on it, with one line saying why and how to adopt it (smpatch journal
// trust) after reading it.

// macDomain starts every MAC's message, so that no other HMAC made with
// the key could pass for a journal's.
const macDomain = "smpatch journal 3\n"

// UntrustedError is a journal smpatch cannot prove this user wrote: it is
// not acted on.
type UntrustedError struct {
	Path   string // state.json
	Tree   string
	Reason string
	// Entries is how many entries the journal records.
	Entries int
}

func (e *UntrustedError) Error() string {
	if e.Entries == 0 {
		return fmt.Sprintf("%s: journal not written by this user (%s); nothing done: read it, then run `smpatch journal trust --repo %s` to adopt it, or remove %s (it records no patch)",
			e.Path, e.Reason, e.Tree, filepath.Dir(e.Path))
	}
	// Never "remove it": its copies may be the only original bytes of
	// files a patch changed.
	return fmt.Sprintf("%s: journal not written by this user (%s); nothing done: read it, then run `smpatch journal trust --repo %s` to adopt it (it records %d %s: their original bytes may be kept only there)",
		e.Path, e.Reason, e.Tree, e.Entries, words.Plural(e.Entries, "entry", "entries"))
}

// KeyError is a journal key (or its directory) smpatch will not use: not
// a regular file, another user's, open to others. No journal is read or
// written with it; Fix says what makes it usable, keeping every journal.
type KeyError struct {
	Path string
	Msg  string
	Fix  string
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("journal key %s: %s; nothing done (every journal is kept as it is): %s", e.Path, e.Msg, e.Fix)
}

// openTo says what the bits of perm let others than the owner do with a
// file ("writable by its group; readable by others"), or "".
func openTo(perm fs.FileMode) string {
	var parts []string
	for _, c := range []struct {
		who  string
		bits fs.FileMode
	}{{"its group", perm >> 3 & 7}, {"others", perm & 7}} {
		var can []string
		if c.bits&4 != 0 {
			can = append(can, "readable")
		}
		if c.bits&2 != 0 {
			can = append(can, "writable")
		}
		if c.bits&1 != 0 {
			can = append(can, "executable")
		}
		if len(can) > 0 {
			parts = append(parts, strings.Join(can, " and ")+" by "+c.who)
		}
	}
	return strings.Join(parts, "; ")
}

// checkKeyDir refuses a key directory another user could write: one not
// owned by this user, or writable by its group or others (they could
// remove the key, or put another in its place), or inside a directory
// anyone may rename it out of (world-writable without the sticky bit).
func checkKeyDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return &KeyError{Path: dir, Msg: "not a directory", Fix: "remove it, or set $XDG_STATE_HOME to a directory of your own"}
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return &KeyError{Path: dir, Msg: fmt.Sprintf("the directory is owned by uid %d, not this user", sys.Uid), Fix: "set $XDG_STATE_HOME to a directory of your own"}
	}
	if st.Mode().Perm()&0o022 != 0 {
		return &KeyError{Path: dir, Msg: fmt.Sprintf("the directory is writable by others (mode %04o)", st.Mode().Perm()), Fix: "chmod 700 " + dir}
	}
	parent := filepath.Dir(dir)
	if pst, err := os.Stat(parent); err == nil && pst.Mode().Perm()&0o002 != 0 && pst.Mode()&fs.ModeSticky == 0 {
		return &KeyError{Path: dir, Msg: fmt.Sprintf("%s is writable by anyone without the sticky bit (mode %04o)", parent, pst.Mode().Perm()), Fix: "set $XDG_STATE_HOME to a directory of your own"}
	}
	return nil
}

const keyFileName = "journal.key"

// stateHome is the directory of smpatch's per-user state:
// $XDG_STATE_HOME/smpatch, else $HOME/.local/state/smpatch.
func stateHome() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "smpatch"), nil
	}
	home := os.Getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return "", errors.New("journal key: neither $XDG_STATE_HOME nor $HOME is set to an absolute directory")
	}
	return filepath.Join(home, ".local", "state", "smpatch"), nil
}

// keys holds the keys this process read, by path: one command signs and
// checks state.json several times.
var keys struct {
	sync.Mutex
	m map[string][]byte
}

// journalKey reads the user's journal key, making it when create is set
// and there is none. A key that is not a regular file of 32 bytes, owned
// by this user and private to them, is an error.
func journalKey(create bool) ([]byte, error) {
	dir, err := stateHome()
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, keyFileName)
	keys.Lock()
	defer keys.Unlock()
	if key, ok := keys.m[p]; ok {
		return key, nil
	}
	if err := checkKeyDir(dir); err != nil && !(errors.Is(err, fs.ErrNotExist) && create) {
		return nil, err
	}
	key, err := readKey(p)
	if errors.Is(err, fs.ErrNotExist) && create {
		key, err = makeKey(dir, p)
	}
	if err != nil {
		return nil, err
	}
	if keys.m == nil {
		keys.m = map[string][]byte{}
	}
	keys.m[p] = key
	return key, nil
}

// makeKey makes the key at p: written beside, then linked into place, so
// that two first runs at once agree on one key (the second's link fails;
// it reads the first's).
func makeKey(dir, p string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	if err := checkKeyDir(dir); err != nil {
		return nil, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".journal.key*")
	if err != nil {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	if err := os.Link(tmp.Name(), p); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	return readKey(p)
}

func readKey(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("journal key %s: a symlink; refusing", p)
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() != 32 {
		return nil, &KeyError{Path: p, Msg: "not a 32-byte regular file", Fix: "put the key back from a backup; without it every journal of this user must be adopted again (`smpatch journal trust`)"}
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return nil, &KeyError{Path: p, Msg: fmt.Sprintf("owned by uid %d, not this user", sys.Uid), Fix: "run smpatch as the user who owns it, or set $XDG_STATE_HOME to a directory of your own"}
	}
	if who := openTo(st.Mode().Perm()); who != "" {
		return nil, &KeyError{Path: p, Msg: fmt.Sprintf("%s (mode %04o)", who, st.Mode().Perm()), Fix: "chmod 600 " + p}
	}
	b := make([]byte, 32)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("journal key %s: %w", p, err)
	}
	return b, nil
}

func macOf(key, state []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(macDomain))
	m.Write(state)
	return hex.EncodeToString(m.Sum(nil))
}

// encodeState is state.json for s: s as encoding/json writes it, and the
// MAC of those bytes made with this user's key (made when there is none).
func encodeState(s *State) ([]byte, error) {
	key, err := journalKey(true)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // ">= 0.5.8" as written
	enc.SetIndent("  ", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	out := fmt.Appendf(nil, "{\n  \"mac\": %q,\n  \"state\": ", macOf(key, data))
	out = append(out, data...)
	return append(out, "\n}\n"...), nil
}

// signedFile is state.json's outer document. State holds the signed
// bytes exactly as they are in the file.
type signedFile struct {
	MAC   string          `json:"mac"`
	State json.RawMessage `json:"state"`
}

// decodeState reads state.json's bytes: the state, checked (parseState),
// and why it is not this user's ("" when its MAC checks with this user's
// key). path names the file in errors.
func decodeState(path string, data []byte) (s *State, untrusted string, err error) {
	var sf signedFile
	if err := json.Unmarshal(data, &sf); err != nil {
		return nil, "", &JournalError{Path: path, Msg: err.Error()}
	}
	if sf.State == nil {
		// A bare state: an older smpatch's, or written by hand.
		s, err := parseState(path, data)
		return s, "it carries no signature: written by an older smpatch, by hand, or not by smpatch", err
	}
	if s, err = parseState(path, sf.State); err != nil {
		return nil, "", err
	}
	key, err := journalKey(false)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, "this user has no journal key yet", nil
	case err != nil:
		// The key, not the journal, is at fault: say how to mend the
		// key, never to remove the journal.
		return nil, "", err
	case !hmac.Equal([]byte(macOf(key, sf.State)), []byte(sf.MAC)):
		return s, "its signature does not match this user's key: copied from another user or machine, or edited by hand", nil
	}
	return s, "", nil
}
