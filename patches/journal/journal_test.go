package journal

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smpatch/smpatch/source"
)

// An apply records a signed state and one tar file per kind, each copy
// under its repository path (a person can take the originals back by
// hand); a revert that leaves nothing applied removes the journal.
func TestCopiesAreTars(t *testing.T) {
	root, tr := testTree(t)
	orig := hashes(t, root, false)
	applyDemo(t, tr)
	dir := filepath.Join(root, source.StateDirName)
	o := tarFiles(t, filepath.Join(dir, "demo.orig.tar"))
	if o[commPath] != commOrig || o[argsPath] != argsOrig || len(o) != 2 {
		t.Fatalf("demo.orig.tar holds %q", o)
	}
	if p := tarFiles(t, filepath.Join(dir, "demo.patched.tar")); p[commPath] != commNew || p[argsPath] != argsNew {
		t.Fatalf("demo.patched.tar holds %q", p)
	}
	sj, _ := os.ReadFile(filepath.Join(dir, stateName))
	if !bytes.HasPrefix(sj, []byte("{\n  \"mac\": \"")) || !bytes.Contains(sj, []byte(`"state": {`)) {
		t.Fatalf("state.json:\n%s", sj)
	}
	if err := revertAll(t, tr); err != nil {
		t.Fatal(err)
	}
	if !sameHashes(orig, hashes(t, root, false)) {
		t.Fatalf("not reverted: %s", diffHashes(orig, hashes(t, root, false)))
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("journal left after the last revert: %v", err)
	}
}

// A journal is acted on only when its MAC checks with this user's key:
// another user's (another key), one edited by hand and a bare state are
// refused, nothing written; Trust adopts one after its checks.
func TestOwnership(t *testing.T) {
	ctx := context.Background()
	root, tr := testTree(t)
	applyDemo(t, tr)
	patched := hashes(t, root, true)
	var ue *UntrustedError
	// Another user: another key directory.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	if _, err := recoverTree(tr); !errors.As(err, &ue) || !strings.Contains(ue.Reason, "no journal key") {
		t.Fatalf("another user without a key: %v", err)
	}
	if _, err := journalKey(true); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(ctx, tr, Options{}); !errors.As(err, &ue) || !strings.Contains(ue.Reason, "signature does not match") {
		t.Fatalf("another user's key: %v", err)
	}
	if !sameHashes(patched, hashes(t, root, true)) {
		t.Fatal("a refused journal was changed")
	}
	res, err := Trust(ctx, tr, TrustOptions{})
	if err != nil || len(res.Entries) != 1 || res.Already {
		t.Fatalf("trust: %+v %v", res, err)
	}
	if res, err := Trust(ctx, tr, TrustOptions{}); err != nil || !res.Already {
		t.Fatalf("trust again: %+v %v", res, err)
	}
	// Edited by hand: one byte of the signed state.
	sp := filepath.Join(root, source.StateDirName, stateName)
	b, _ := os.ReadFile(sp)
	os.WriteFile(sp, bytes.Replace(b, []byte(`"variant": "v1"`), []byte(`"variant": "v2"`), 1), 0o644)
	if _, err := recoverTree(tr); !errors.As(err, &ue) || !strings.Contains(ue.Reason, "edited by hand") {
		t.Fatalf("edited: %v", err)
	}
	// A bare state: no signature at all.
	s, _, err := decodeState(sp, b)
	if err != nil {
		t.Fatal(err)
	}
	writeJournal(t, root, s, false, nil)
	if _, err := recoverTree(tr); !errors.As(err, &ue) || !strings.Contains(ue.Reason, "no signature") {
		t.Fatalf("bare: %v", err)
	}
	if _, err := Trust(ctx, tr, TrustOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := revertAll(t, tr); err != nil {
		t.Fatal(err)
	}
}

// The MAC is over state.json's bytes as written: a state whose text is
// not UTF-8 (a tree whose path is not) verifies, and a path that is not
// UTF-8 round-trips exactly.
func TestSignedBytesAsWritten(t *testing.T) {
	root, tr := testTree(t)
	s := &State{Format: stateFormat, Tree: "/tmp/caf\xe9", Kind: "checkout", Patches: []*Entry{{
		Name: "demo", State: Applied, Notes: []string{"\xff note"},
		Files: []*FileRecord{{Path: "python/sglang/caf\xe9.py", Original: Hash([]byte("a")), Patched: Hash([]byte("b"))}},
	}}}
	writeJournal(t, root, s, true, nil)
	j, err := Read(context.Background(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if got := j.State().Patches[0].Files[0].Path; got != "python/sglang/caf\xe9.py" {
		t.Fatalf("path read back as %q", got)
	}
}

// A copy whose bytes are not the ones recorded is never written: a
// rollback refuses, naming the copy, and Damage says what is wrong.
func TestTamperedCopy(t *testing.T) {
	root, tr := testTree(t)
	evil := []byte("import os\nos.system('id')\n")
	writeJournal(t, root, pendingState(&FileRecord{Path: commPath, Original: Hash([]byte(commOrig)), Patched: Hash([]byte(commOrig + "x"))}), true,
		map[string]map[string][]byte{kindOrig: {commPath: evil}})
	os.WriteFile(filepath.Join(root, commPath), []byte(commOrig+"x"), 0o644)
	before := hashes(t, root, false)
	_, err := recoverTree(tr)
	var je *JournalError
	if !errors.As(err, &je) || !strings.Contains(err.Error(), "the journal recorded") {
		t.Fatalf("recover: %v", err)
	}
	if !sameHashes(before, hashes(t, root, false)) {
		t.Fatal("tree changed")
	}
	j, err := Read(context.Background(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if d := j.Damage(j.State().Patches[0]); !strings.Contains(d, "the journal recorded") {
		t.Fatalf("damage: %q", d)
	}
}

// Even a journal this user signed never restores into .git or the
// journal, by name or through a symlink in the tree.
func TestReservedPaths(t *testing.T) {
	for _, tc := range []struct{ name, path, link string }{
		{"git", ".git/config", ""},
		{"git-nested", "python/.git/config", ""},
		{"journal", ".smpatch/state.json", ""},
		{"case", ".GIT/config", ""},
		{"symlink-to-git", "python/evil/config", "python/evil"},
		{"symlink-to-journal", "python/evil/x.tar", "python/evil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, tr := testTree(t)
			os.MkdirAll(filepath.Join(root, ".git"), 0o755)
			cfg := []byte("[core]\n\tbare = false\n")
			os.WriteFile(filepath.Join(root, ".git", "config"), cfg, 0o644)
			if tc.link != "" {
				target := "../.git"
				if strings.HasSuffix(tc.name, "journal") {
					target = "../" + source.StateDirName
				}
				if err := os.Symlink(target, filepath.Join(root, tc.link)); err != nil {
					t.Fatal(err)
				}
			}
			forged := []byte("[core]\n\tfsmonitor = \"id\"\n")
			s := pendingState(&FileRecord{Path: tc.path, Original: Hash(forged), Patched: Hash(cfg)})
			dir := filepath.Join(root, source.StateDirName)
			os.MkdirAll(dir, 0o755)
			data, err := encodeState(s)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, stateName), data, 0o644)
			os.WriteFile(filepath.Join(dir, "demo.orig.tar"), tarOf(map[string][]byte{tc.path: forged}), 0o644)
			_, err = recoverTree(tr)
			if err == nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("recover: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(root, ".git", "config")); !bytes.Equal(b, cfg) {
				t.Fatalf(".git/config: %q", b)
			}
		})
	}
}

// A copy's name planted in the journal directory (a symlink to a file
// outside) is removed itself, never followed: the copy is then created
// exclusively in its place.
func TestPlantedCopyName(t *testing.T) {
	root, tr := testTree(t)
	outside := filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, []byte("keep"), 0o644)
	dir := filepath.Join(root, source.StateDirName)
	os.MkdirAll(dir, 0o755)
	if err := os.Symlink(outside, filepath.Join(dir, "demo.orig.tar")); err != nil {
		t.Fatal(err)
	}
	applyDemo(t, tr)
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Fatalf("followed the planted symlink: %q", b)
	}
	if st, err := os.Lstat(filepath.Join(dir, "demo.orig.tar")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("copy: %v %v", st, err)
	}
}

// An interrupted revert is finished only over files it could have left:
// an edit made since makes it refuse (EditedError), nothing written, and
// Forget drops the entry keeping the edit.
func TestFinishRevertRefusesEdit(t *testing.T) {
	root, tr := testTree(t)
	applyDemo(t, tr)
	Hook = func(s string) error {
		if s == "revert-write:1" {
			return ErrCrash
		}
		return nil
	}
	err := revertAll(t, tr)
	Hook = nil
	if !errors.Is(err, ErrCrash) {
		t.Fatalf("hook: %v", err)
	}
	full := filepath.Join(root, commPath)
	b, _ := os.ReadFile(full)
	edited := append([]byte("# edited after the crash\n"), b...)
	os.WriteFile(full, edited, 0o644)
	args, _ := os.ReadFile(filepath.Join(root, argsPath))
	_, err = recoverTree(tr)
	var ee *EditedError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), commPath+" changed since the interrupted revert of demo") {
		t.Fatalf("recover: %v", err)
	}
	if got, _ := os.ReadFile(full); !bytes.Equal(got, edited) {
		t.Fatal("edit lost")
	}
	if got, _ := os.ReadFile(filepath.Join(root, argsPath)); !bytes.Equal(got, args) {
		t.Fatal("server_args.py changed")
	}
	if _, err := Forget(context.Background(), tr, "demo", Options{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(full); !bytes.Equal(got, edited) {
		t.Fatal("edit lost")
	}
}

// Read writes nothing, even over a journal a killed apply left: no byte
// of the tree or the journal changes, and Interrupted says how far the
// apply got and what finishes it; the next writing command rolls it back.
func TestReadWritesNothing(t *testing.T) {
	root, tr := testTree(t)
	orig := hashes(t, root, false)
	j, err := Open(context.Background(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	Hook = func(s string) error {
		if s == "write:1" {
			return ErrCrash
		}
		return nil
	}
	err = j.Apply(context.Background(), []*Item{demoItem()}, nil)
	Hook = nil
	j.Close()
	if !errors.Is(err, ErrCrash) {
		t.Fatalf("hook: %v", err)
	}
	before := hashes(t, root, true)
	r, err := Read(context.Background(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := r.Interrupted()
	r.Close()
	if err != nil || len(ins) != 1 {
		t.Fatalf("interrupted: %v %v", ins, err)
	}
	if got := ins[0].String(); got != "interrupted apply of demo (1 of 2 files written): `smpatch revert` rolls it back (so does the next apply, before it writes)" {
		t.Fatalf("report: %s", got)
	}
	if !sameHashes(before, hashes(t, root, true)) {
		t.Fatalf("Read changed %s", diffHashes(before, hashes(t, root, true)))
	}
	notes, err := recoverTree(tr)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "rolled back an interrupted apply of demo") {
		t.Fatalf("recover: %q %v", notes, err)
	}
	if !sameHashes(orig, hashes(t, root, false)) {
		t.Fatalf("not rolled back: %s", diffHashes(orig, hashes(t, root, false)))
	}
}

// A stop by the context during an apply rolls back what was written and
// says so; before anything was written it says nothing was changed.
func TestApplyStopped(t *testing.T) {
	for _, at := range []string{"before-pending", "write:0", "write:1"} {
		t.Run(at, func(t *testing.T) {
			root, tr := testTree(t)
			orig := hashes(t, root, false)
			ctx, cancel := context.WithCancel(context.Background())
			Hook = func(s string) error {
				if s == at {
					cancel()
				}
				return nil
			}
			j, err := Open(ctx, tr, Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = j.Apply(ctx, []*Item{demoItem()}, nil)
			Hook = nil
			j.Close()
			var se *StoppedError
			if !errors.As(err, &se) || !errors.Is(err, context.Canceled) {
				t.Fatalf("apply: %v", err)
			}
			want := "stopped before writing: nothing was changed"
			if at == "write:1" {
				want = "stopped: the 1 file written so far was restored; nothing changed"
			}
			if se.What != want {
				t.Fatalf("%q, want %q", se.What, want)
			}
			if !sameHashes(orig, hashes(t, root, false)) {
				t.Fatalf("not rolled back: %s", diffHashes(orig, hashes(t, root, false)))
			}
			if _, err := os.Lstat(filepath.Join(root, source.StateDirName, stateName)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("journal kept an entry: %v", err)
			}
		})
	}
}

// Waiting for a lock another command holds says so once, after a moment,
// and ends with the context: a stop with nothing written.
func TestLockWait(t *testing.T) {
	_, tr := testTree(t)
	held, err := Open(context.Background(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var mu sync.Mutex
	var lines []string
	ctx, cancel := context.WithTimeout(context.Background(), waitNotice+300*time.Millisecond)
	defer cancel()
	_, err = Open(ctx, tr, Options{Waiting: func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }})
	var se *StoppedError
	if !errors.As(err, &se) || !strings.HasPrefix(se.What, "stopped before writing: nothing was changed") {
		t.Fatalf("open: %v", err)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "waiting for the journal lock of "+tr.Root()+", held by another smpatch (pid ") {
		t.Fatalf("waiting lines: %q", lines)
	}
}

// A reader waiting for the lock ends with the context as a writer does
// (a stop, not the context's bare error), and every wait ends at its
// timeout with a line naming the holder.
func TestLockWaitBounded(t *testing.T) {
	_, tr := testTree(t)
	applyDemo(t, tr)
	held, err := Open(context.Background(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = Read(ctx, tr, Options{})
	var se *StoppedError
	if !errors.As(err, &se) || !strings.HasPrefix(se.What, "stopped before writing: nothing was changed") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read stopped: %v", err)
	}
	for name, open := range map[string]func(context.Context, source.WritableTree, Options) (*Journal, error){"Open": Open, "Read": Read} {
		start := time.Now()
		var lines []string
		_, err := open(context.Background(), tr, Options{LockTimeout: waitNotice + 200*time.Millisecond, Waiting: func(l string) { lines = append(lines, l) }})
		var le *LockTimeoutError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), "is locked by another smpatch (pid ") || !strings.Contains(err.Error(), "nothing was changed") {
			t.Fatalf("%s: %v", name, err)
		}
		if d := time.Since(start); d < waitNotice || d > 5*time.Second {
			t.Fatalf("%s: gave up after %s", name, d)
		}
		if len(lines) != 1 || !strings.Contains(lines[0], "giving up after 700ms") {
			t.Fatalf("%s: waiting lines %q", name, lines)
		}
	}
}

// The reader's bounds: a huge state.json and a tar header that claims
// gigabytes are refused as damaged, before they are read into memory.
func TestBounds(t *testing.T) {
	t.Run("state", func(t *testing.T) {
		root, tr := testTree(t)
		dir := filepath.Join(root, source.StateDirName)
		os.MkdirAll(dir, 0o755)
		f, _ := os.Create(filepath.Join(dir, stateName))
		f.Truncate(maxStateBytes + 1)
		f.Close()
		var je *JournalError
		if _, err := Read(context.Background(), tr, Options{}); !errors.As(err, &je) || !strings.Contains(err.Error(), "more than the") {
			t.Fatalf("huge state: %v", err)
		}
	})
	t.Run("tar", func(t *testing.T) {
		root, tr := testTree(t)
		os.WriteFile(filepath.Join(root, commPath), []byte("x"), 0o644)
		writeJournal(t, root, pendingState(&FileRecord{Path: commPath, Original: Hash([]byte(commOrig)), Patched: Hash([]byte("x"))}), true, nil)
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: commPath, Mode: 0o644, Size: 4 << 30})
		w.Write(make([]byte, 512))
		os.WriteFile(filepath.Join(root, source.StateDirName, "demo.orig.tar"), b.Bytes()[:1024], 0o644)
		var je *JournalError
		if _, err := recoverTree(tr); !errors.As(err, &je) || !strings.Contains(err.Error(), "claims 4294967296 bytes") {
			t.Fatalf("tar bomb: %v", err)
		}
	})
}

// A bytecode record outside the __pycache__ beside its file (here: the
// git config) is a damaged journal: nothing is written there.
func TestBytecodeRecordOutsideCache(t *testing.T) {
	root, tr := testTree(t)
	os.MkdirAll(filepath.Join(root, ".git"), 0o755)
	cfg := []byte("[core]\n\tbare = false\n")
	os.WriteFile(filepath.Join(root, ".git", "config"), cfg, 0o644)
	forged := []byte("[core]\n\tfsmonitor = \"id\"\n")
	orig := []byte("x = 1\n")
	rel := "python/sglang/x.py"
	os.MkdirAll(filepath.Join(root, "python", "sglang"), 0o755)
	os.WriteFile(filepath.Join(root, filepath.FromSlash(rel)), orig, 0o644)
	s := pendingState(&FileRecord{Path: rel, Original: Hash(orig), Patched: Hash(orig),
		Bytecode: []Bytecode{{Path: ".git/config", SHA256: Hash(forged)}}})
	dir := filepath.Join(root, source.StateDirName)
	os.MkdirAll(dir, 0o755)
	data, err := encodeState(s)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, stateName), data, 0o644)
	os.WriteFile(filepath.Join(dir, "demo.orig.tar"), tarOf(map[string][]byte{rel: orig}), 0o644)
	os.WriteFile(filepath.Join(dir, "demo.bytecode.tar"), tarOf(map[string][]byte{".git/config": forged}), 0o644)
	_, err = recoverTree(tr)
	if err == nil || !strings.Contains(err.Error(), "journal damaged") || !strings.Contains(err.Error(), "bytecode record") {
		t.Fatalf("recover: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, ".git", "config")); !bytes.Equal(b, cfg) {
		t.Fatalf(".git/config: %q", b)
	}
}

// A lock file that is a named pipe (or any file but a regular one) is
// refused in one line by every command; opening it once blocked in
// open(2) for good, deaf to signals.
func TestLockNotRegular(t *testing.T) {
	for _, kind := range []string{"fifo", "directory"} {
		t.Run(kind, func(t *testing.T) {
			root, tr := testTree(t)
			applyDemo(t, tr)
			lock := filepath.Join(root, source.StateDirName, lockName)
			os.Remove(lock)
			var err error
			if kind == "fifo" {
				err = syscall.Mkfifo(lock, 0o644)
			} else {
				err = os.Mkdir(lock, 0o755)
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, open := range map[string]func(context.Context, source.WritableTree, Options) (*Journal, error){"Open": Open, "Read": Read} {
				done := make(chan error, 1)
				go func() {
					j, err := open(context.Background(), tr, Options{})
					if err == nil {
						j.Close()
					}
					done <- err
				}()
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), "not a regular file: "+kind+"; refusing (remove it)") {
						t.Fatalf("%s: %v", name, err)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: still opening the lock after 5s", name)
				}
			}
		})
	}
}

// A key open to others is refused with the advice that mends it (chmod
// 600 the key), never one that would delete the journal and its original
// bytes; a key directory or journal directory other users may write is
// refused before anything is read in it; a journal this user did not sign
// that records patches is never to be removed.
func TestKeyAndDirectoryAdvice(t *testing.T) {
	root, tr := testTree(t)
	applyDemo(t, tr)
	dir, err := stateHome()
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, keyFileName)
	forgetKeys := func() { keys.Lock(); keys.m = nil; keys.Unlock() }
	defer forgetKeys()
	try := func(what string, want ...string) {
		t.Helper()
		forgetKeys()
		for name, open := range map[string]func(context.Context, source.WritableTree, Options) (*Journal, error){"Open": Open, "Read": Read} {
			j, err := open(context.Background(), tr, Options{})
			if err == nil {
				j.Close()
				t.Fatalf("%s: %s: accepted", what, name)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("%s: %s: %v, want %q", what, name, err, w)
				}
			}
			if strings.Contains(err.Error(), "remove "+filepath.Join(root, source.StateDirName)) || strings.Contains(err.Error(), "or remove") {
				t.Fatalf("%s: %s: advice that deletes the journal: %v", what, name, err)
			}
		}
	}
	os.Chmod(key, 0o620)
	try("key 0620", "writable by its group (mode 0620)", "chmod 600 "+key)
	os.Chmod(key, 0o600)
	os.Chmod(dir, 0o777)
	try("key directory 0777", "the directory is writable by others (mode 0777)", "chmod 700 "+dir)
	os.Chmod(dir, 0o700)
	sd := filepath.Join(root, source.StateDirName)
	os.Chmod(sd, 0o777)
	try("journal directory 0777", "writable by every user (mode 0777)", "chmod go-w "+sd)
	os.Chmod(sd, 0o755)
	// Signed with another key: untrusted, and never "remove it".
	os.Remove(key)
	forgetKeys()
	if _, err := journalKey(true); err != nil {
		t.Fatal(err)
	}
	try("another key", "journal not written by this user", "their original bytes may be kept only there")
}

// The temporary files of state.json a killed command left are removed by
// the next command that writes (trust among them), once the journal is
// proved this user's; only regular files of that name pattern, only in the
// journal directory.
func TestStaleStateTemps(t *testing.T) {
	root, tr := testTree(t)
	applyDemo(t, tr)
	dir := filepath.Join(root, source.StateDirName)
	stale := []string{".state.json123", ".state.json8675309"}
	kept := []string{".state.jsonx1", "state.json.bak", ".state.json"}
	for _, n := range append(append([]string{}, stale...), kept...) {
		os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644)
	}
	os.Symlink("../python/sglang/version.py", filepath.Join(dir, ".state.json42"))
	os.Mkdir(filepath.Join(dir, ".state.json43"), 0o755)
	os.WriteFile(filepath.Join(root, ".state.json44"), []byte("{}"), 0o644)
	kept = append(kept, ".state.json42", ".state.json43", "../.state.json44")
	// A journal from elsewhere: trust removes them once it has signed it.
	forgetKey(t)
	if _, err := Read(context.Background(), tr, Options{}); err == nil {
		t.Fatal("journal still trusted")
	}
	for _, n := range stale {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			t.Fatalf("%s removed before the journal was adopted", n)
		}
	}
	if _, err := Trust(context.Background(), tr, TrustOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range stale {
		if _, err := os.Lstat(filepath.Join(dir, n)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s kept: %v", n, err)
		}
	}
	for _, n := range kept {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			t.Fatalf("%s removed: %v", n, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "python/sglang/version.py")); err != nil || len(b) == 0 {
		t.Fatal("the symlink's target touched")
	}
}

// forgetKey makes this user's key another one, as on another machine.
func forgetKey(t *testing.T) {
	t.Helper()
	dir, err := stateHome()
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, keyFileName))
	keys.Lock()
	keys.m = nil
	keys.Unlock()
	if _, err := journalKey(true); err != nil {
		t.Fatal(err)
	}
}

// Adopting a journal drops its bytecode records: a .pyc is code Python runs
// without its source (an unchecked-hash one always), and a journal from
// elsewhere could carry any. The entry is adopted; its rollback writes
// the original source and no .pyc.
func TestTrustDropsBytecode(t *testing.T) {
	root, tr := testTree(t)
	patched := []byte("x = 2\n")
	orig := []byte("x = 1\n")
	rel := "python/sglang/x.py"
	pyc := "python/sglang/__pycache__/x.cpython-312.pyc"
	evil := []byte("\xcb\x0d\x0d\x0a\x03\x00\x00\x00 not the module's code")
	os.WriteFile(filepath.Join(root, filepath.FromSlash(rel)), patched, 0o644)
	s := pendingState(&FileRecord{Path: rel, Original: Hash(orig), Patched: Hash(patched), Bytecode: []Bytecode{{Path: pyc, SHA256: Hash(evil)}}})
	writeJournal(t, root, s, false, map[string]map[string][]byte{kindOrig: {rel: orig}, kindBytecode: {pyc: evil}})
	res, err := Trust(context.Background(), tr, TrustOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.BytecodeDropped != 1 || len(res.Writes) != 1 || res.Writes[0].Path != rel {
		t.Fatalf("result %+v", res)
	}
	if _, err := recoverTree(tr); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel))); !bytes.Equal(b, orig) {
		t.Fatalf("not rolled back: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(pyc))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the journal's .pyc was put back: %v", err)
	}
}
