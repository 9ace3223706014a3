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
	"sync"
	"syscall"
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
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s: journal not written by this user (%s); nothing done: read it, then run `smpatch journal trust --repo %s` to adopt it, or remove %s",
		e.Path, e.Reason, e.Tree, filepath.Dir(e.Path))
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
		return nil, fmt.Errorf("journal key %s: not a 32-byte regular file", p)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return nil, fmt.Errorf("journal key %s: owned by uid %d, not this user", p, sys.Uid)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("journal key %s: readable by others (mode %04o); chmod 600 it", p, st.Mode().Perm())
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
		return s, err.Error(), nil
	case !hmac.Equal([]byte(macOf(key, sf.State)), []byte(sf.MAC)):
		return s, "its signature does not match this user's key: copied from another user or machine, or edited by hand", nil
	}
	return s, "", nil
}
