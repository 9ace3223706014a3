package patches

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/smpatch/smpatch/source"
)

// Journal ownership (docs/security.md, "Journals"). A journal is acted on
// only when this user wrote it on this machine: state.json carries an owner
// record (uid, a machine identity) and an HMAC-SHA256 of its content made
// with a key that lives outside every tree, in the user's state directory
// ($XDG_STATE_HOME/smpatch/journal.key, else ~/.local/state/...). A journal
// committed into a repository, copied from another machine or edited by
// hand fails the check: smpatch then refuses to act on it, with one line
// saying why and how to adopt it (smpatch journal trust) after reading it.

// Owner says who wrote a journal.
type Owner struct {
	UID     int    `json:"uid"`
	Machine string `json:"machine"` // a hash of the machine id, never the id itself
	MAC     string `json:"mac"`     // HMAC-SHA256 of state.json with mac "", hex
}

// UntrustedError is a journal smpatch did not write (or cannot prove it
// wrote): it is not acted on.
type UntrustedError struct {
	Path   string // state.json
	Tree   string
	Reason string
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s: journal not written by this user on this machine (%s); nothing done: read it, then run `smpatch journal trust --repo %s` to adopt it, or remove %s",
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

// journalKey reads the user's journal key, making it when create is set
// and there is none. A key that is not a regular file of 32 bytes, owned
// by this user and private to them, is an error.
//
// A key read (or made) is remembered for the rest of the process, by its
// path: one command signs and checks state.json several times.
func journalKey(create bool) ([]byte, error) {
	dir, err := stateHome()
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, keyFileName)
	keyMemo.Lock()
	key, ok := keyMemo.m[p]
	keyMemo.Unlock()
	if ok {
		return key, nil
	}
	key, err = journalKeyAt(dir, p, create)
	if err == nil {
		keyMemo.Lock()
		if keyMemo.m == nil {
			keyMemo.m = map[string][]byte{}
		}
		keyMemo.m[p] = key
		keyMemo.Unlock()
	}
	return key, err
}

// keyMemo holds the keys this process read, by path.
var keyMemo struct {
	sync.Mutex
	m map[string][]byte
}

func journalKeyAt(dir, p string, create bool) ([]byte, error) {
	key, err := readKey(p)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !create {
		return key, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	// Written beside, then linked into place: two first runs at once
	// agree on one key (the link of the second fails; it reads the first).
	tmp, err := os.CreateTemp(dir, ".journal.key*")
	if err != nil {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("journal key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("journal key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	if err := os.Link(tmp.Name(), p); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	_ = source.SyncDir(dir)
	return readKey(p)
}

func readKey(p string) ([]byte, error) {
	f, err := source.OpenRead(p, syscall.O_NOFOLLOW|syscall.O_NONBLOCK)
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

// machineID is a hash of this machine's identity: /etc/machine-id (or
// D-Bus's copy), else the host name. Only the hash is stored. It is worked
// out once per process.
var machineID = sync.OnceValue(readMachineID)

func readMachineID() string {
	id := ""
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := readSmall(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			id = "machine-id:" + strings.TrimSpace(string(b))
			break
		}
	}
	if id == "" {
		h, _ := os.Hostname()
		id = "hostname:" + h
	}
	sum := sha256.Sum256([]byte("smpatch journal machine\n" + id))
	return hex.EncodeToString(sum[:16])
}

// stateMAC is the HMAC of s's content with the owner's mac left out: of
// json.MarshalIndent(s, "", "  ") with the mac "", as encodeState writes
// it.
func stateMAC(key []byte, s *State) (string, error) {
	o := *s.Owner
	o.MAC = ""
	c := *s
	c.Owner = &o
	data, err := encodeState(&c)
	if err != nil {
		return "", err
	}
	return macOf(key, data), nil
}

func macOf(key, unsigned []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("smpatch journal v2\n"))
	m.Write(unsigned)
	return hex.EncodeToString(m.Sum(nil))
}

// sign sets s's owner to this user and machine, and its MAC, making the
// user's key when there is none.
func sign(s *State) error {
	_, err := signedState(s)
	return err
}

// macKey is the owner's mac as json.MarshalIndent writes it while unset:
// a key no other record of state.json has, and a JSON string never holds
// an unescaped quote, so its last occurrence is the owner's.
var macKey = []byte(`"mac": ""`)

// signedState signs s (as sign) and returns state.json's bytes: s as
// json.MarshalIndent writes it (encodeState), and a newline. The state is
// encoded once: the MAC is made over the encoding with the mac empty, then
// written into it.
func signedState(s *State) ([]byte, error) {
	key, err := journalKey(true)
	if err != nil {
		return nil, err
	}
	s.Owner = &Owner{UID: os.Getuid(), Machine: machineID()}
	unsigned, err := encodeState(s)
	if err != nil {
		return nil, err
	}
	mac := macOf(key, unsigned)
	s.Owner.MAC = mac
	i := bytes.LastIndex(unsigned, macKey)
	if i < 0 {
		return nil, errors.New("journal: no owner record in the encoded state")
	}
	at := i + len(macKey) - 1 // between the two quotes
	out := make([]byte, 0, len(unsigned)+len(mac)+1)
	out = append(out, unsigned[:at]...)
	out = append(out, mac...)
	out = append(out, unsigned[at:]...)
	return append(out, '\n'), nil
}

// checkOwner says why s is not a journal this user wrote on this machine,
// or "".
func checkOwner(s *State) string {
	o := s.Owner
	switch {
	case o == nil:
		return "it has no owner record: written by an older smpatch, or not by smpatch"
	case o.UID != os.Getuid():
		return fmt.Sprintf("it names uid %d, this is uid %d", o.UID, os.Getuid())
	case o.Machine != machineID():
		return "it was written on another machine"
	}
	key, err := journalKey(false)
	if errors.Is(err, fs.ErrNotExist) {
		return "this user has no journal key yet"
	}
	if err != nil {
		return err.Error()
	}
	mac, err := stateMAC(key, s)
	if err != nil {
		return err.Error()
	}
	if !hmac.Equal([]byte(mac), []byte(o.MAC)) {
		return "its signature does not match this user's key: copied from elsewhere or edited by hand"
	}
	return ""
}

// TrustResult is what TrustJournal adopted.
type TrustResult struct {
	Tree    string   `json:"tree"`
	Path    string   `json:"path"`
	Entries []*Entry `json:"entries"`
	// Already is set when the journal was this user's already.
	Already bool `json:"already"`
}

// TrustJournal adopts the journal of t as this user's: after the same
// checks every load makes (paths inside the tree and outside .git and the
// journal, hashes well formed, sizes bounded) and after checking every
// journal copy against the hash recorded for it, it signs state.json.
// Nothing in the tree is written and no entry in flight is finished: the
// next command does that, with its own checks.
func TrustJournal(ctx context.Context, t source.WritableTree) (*TrustResult, error) {
	res := &TrustResult{Tree: t.Root(), Path: filepath.Join(t.StateDir(), "state.json"), Entries: []*Entry{}}
	if _, err := lstatStateDir(t.StateDir()); err != nil {
		return res, err
	}
	if _, err := os.Lstat(res.Path); errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("%s: no journal to trust", res.Path)
	}
	j, err := openJournalMode(ctx, t, true)
	if err != nil {
		return res, err
	}
	defer j.close()
	res.Entries = append(res.Entries, j.state.Patches...)
	if checkOwner(j.state) == "" {
		res.Already = true
		return res, nil
	}
	for _, e := range j.state.Patches {
		for _, f := range e.Files {
			if _, err := guardTreePath(t, f.Path); err != nil {
				return res, fmt.Errorf("%s: entry %s: %w", res.Path, e.Name, err)
			}
		}
		if err := j.checkCopies(e); err != nil {
			return res, err
		}
	}
	if j.state.Format < stateFormat {
		j.state.Format = stateFormat
	}
	if err := j.save(); err != nil {
		return res, fmt.Errorf("journal: %w", err)
	}
	return res, nil
}

// checkCopies reads every journal copy e needs and checks it against the
// hash recorded for it.
func (j *journal) checkCopies(e *Entry) error {
	for _, f := range e.Files {
		if f.Original != "" {
			if _, err := j.wanted(e, f, false); err != nil {
				return err
			}
		}
		if f.Target != "" {
			if _, err := j.wanted(e, f, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// ForgetEntry drops the journal entry called name and its copies, writing
// no tree file: the files stay as they are now. It is the way out when an
// entry cannot be rolled back or reverted (the files were edited since, or
// the copies are lost) and the user keeps the tree as it is.
func ForgetEntry(ctx context.Context, t source.WritableTree, name string) (*Entry, error) {
	if _, err := lstatStateDir(t.StateDir()); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(t.StateDir(), "state.json")); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no journal", t.StateDir())
	}
	j, err := openJournal(ctx, t)
	if err != nil {
		return nil, err
	}
	defer j.close()
	e := j.state.Get(name)
	if e == nil {
		return nil, fmt.Errorf("%s: no entry %s in the journal", j.statePath(), name)
	}
	j.state.remove(name)
	if len(j.state.Patches) == 0 {
		if err := os.Remove(j.statePath()); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		if err := source.SyncDir(j.dir); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	} else if err := j.save(); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	j.dropBlobs(name)
	return e, nil
}

// readSmall is os.ReadFile of a small file on its bare descriptor
// (source.OpenRead): os.ReadFile costs four fcntl calls and an epoll_ctl
// more.
func readSmall(p string) ([]byte, error) {
	f, err := source.OpenRead(p, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
