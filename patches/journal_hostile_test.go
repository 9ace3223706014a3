package patches

import (
	"github.com/smpatch/smpatch/patches/catalog"

	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/source"
)

// writeJournal writes state (signed with this user's key when signed is
// set) and one tar file of copies per kind into the journal of root.
func writeJournal(t testing.TB, root string, s *State, signed bool, copies map[string]map[string][]byte) {
	t.Helper()
	dir := filepath.Join(root, source.StateDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if signed {
		if err := sign(s); err != nil {
			t.Fatal(err)
		}
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for kind, set := range copies {
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		for name, data := range set {
			w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))})
			w.Write(data)
		}
		w.Close()
		if err := os.WriteFile(filepath.Join(dir, "demo."+kind+".tar"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func pendingState(files ...*FileRecord) *State {
	return &State{Format: stateFormat, Kind: "checkout", Patches: []*Entry{{Name: "demo", Project: "sglang", State: StatePending, Files: files}}}
}

// A journal copied from elsewhere (another user's key) or edited by hand
// is not acted on; adopted with TrustJournal it is.
func TestJournalOwnership(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	patched := snapshot(t, root)
	// The same journal under another user's key.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	var ue *UntrustedError
	_, err := Revert(ctx, tr, nil, nil, RevertOptions{})
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "no journal key") {
		t.Fatalf("revert under another key: %v", err)
	}
	if _, err := journalKey(true); err != nil {
		t.Fatal(err)
	}
	_, err = Status(ctx, tr, nil)
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "signature does not match") {
		t.Fatalf("status under another key: %v", err)
	}
	if !sameSnap(patched, snapshot(t, root)) {
		t.Fatal("tree changed")
	}
	// Another uid, signed: refused for the uid.
	sp := filepath.Join(root, source.StateDirName, "state.json")
	b, _ := os.ReadFile(sp)
	uid := fmt.Sprintf(`"uid": %d`, os.Getuid())
	os.WriteFile(sp, bytes.Replace(b, []byte(uid), []byte(`"uid": 4242`), 1), 0o644)
	if _, err := Status(ctx, tr, nil); !errors.As(err, &ue) || !strings.Contains(ue.Reason, "uid 4242") {
		t.Fatalf("other uid: %v", err)
	}
	res, err := TrustJournal(ctx, tr)
	if err != nil || len(res.Entries) != 1 || res.Already {
		t.Fatalf("trust: %+v %v", res, err)
	}
	if res, err := TrustJournal(ctx, tr); err != nil || !res.Already {
		t.Fatalf("trust again: %+v %v", res, err)
	}
	if _, err := Revert(ctx, tr, nil, nil, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A copy whose bytes are not the ones recorded is never written: revert
// and rollback refuse, naming the copy.
func TestJournalTamperedCopy(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	patched := snapshot(t, root)
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	evil := "import os\nos.system('id')\n"
	for _, rel := range []string{commPath, argsPath} {
		w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(evil))})
		w.Write([]byte(evil))
	}
	w.Close()
	os.WriteFile(filepath.Join(root, source.StateDirName, "demo.orig.tar"), b.Bytes(), 0o644)
	_, err := Revert(ctx, tr, nil, nil, RevertOptions{})
	var je *JournalError
	if !errors.As(err, &je) || !strings.Contains(err.Error(), "the journal recorded") {
		t.Fatalf("revert: %v", err)
	}
	if !sameSnap(patched, snapshot(t, root)) {
		t.Fatal("tree changed")
	}
	st, err := Status(ctx, tr, nil)
	if err != nil || st.Patches[0].Damaged == "" || st.Patches[0].Clean {
		t.Fatalf("status: %+v %v", st.Patches[0], err)
	}
}

// Even a journal this user signed never restores into .git or the journal,
// by name or through a symlink in the tree.
func TestJournalReservedPaths(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, path, link string }{
		{"git", ".git/config", ""},
		{"git-nested", "python/.git/config", ""},
		{"journal", ".smpatch/state.json", ""},
		{"case", ".GIT/config", ""},
		{"symlink-to-git", "python/evil/config", "python/evil"},
		{"symlink-to-journal", "python/evil/x.tar", "python/evil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, tr := engineTree(t)
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
			writeJournal(t, root, pendingState(&FileRecord{Path: tc.path, Original: sha256Hex(forged), Patched: sha256Hex(cfg)}), true,
				map[string]map[string][]byte{"orig": {tc.path: forged}})
			_, err := Recover(ctx, tr)
			if err == nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("recover: %v", err)
			}
			t.Log(err)
			if b, _ := os.ReadFile(filepath.Join(root, ".git", "config")); !bytes.Equal(b, cfg) {
				t.Fatalf(".git/config: %q", b)
			}
		})
	}
}

// Directories of older layouts that are symlinks are never followed:
// dropping the copies of a reverted entry deletes nothing outside.
func TestJournalSymlinkedLegacyDir(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	victim := t.TempDir()
	os.MkdirAll(filepath.Join(victim, "demo"), 0o755)
	os.WriteFile(filepath.Join(victim, "demo", "precious"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(victim, "demo.tar"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(victim, "other"), []byte("x"), 0o644)
	if err := os.Symlink(victim, filepath.Join(root, source.StateDirName, "orig")); err != nil {
		t.Fatal(err)
	}
	if _, err := Revert(ctx, tr, nil, nil, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"demo/precious", "demo.tar", "other"} {
		if _, err := os.Stat(filepath.Join(victim, f)); err != nil {
			t.Fatalf("%s removed outside the tree: %v", f, err)
		}
	}
}

// An interrupted revert is finished only over files it could have left:
// an edit made since makes it refuse with the revert exit code.
func TestFinishRevertRefusesEdit(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	testHook = func(s string) error {
		if s == "revert-write:1" {
			return errCrash
		}
		return nil
	}
	_, err := Revert(ctx, tr, nil, nil, RevertOptions{})
	testHook = nil
	if !errors.Is(err, errCrash) {
		t.Fatalf("hook: %v", err)
	}
	full := filepath.Join(root, argsPath)
	b, _ := os.ReadFile(full)
	edited := append([]byte("# edited after the crash\n"), b...)
	os.WriteFile(full, edited, 0o644)
	comm, _ := os.ReadFile(filepath.Join(root, commPath))
	_, err = Recover(ctx, tr)
	if exit.Code(err) != exit.RevertRefused || !strings.Contains(err.Error(), argsPath+" changed since the interrupted revert of demo") {
		t.Fatalf("recover: %v (exit %d)", err, exit.Code(err))
	}
	if got, _ := os.ReadFile(full); !bytes.Equal(got, edited) {
		t.Fatal("edit lost")
	}
	if got, _ := os.ReadFile(filepath.Join(root, commPath)); !bytes.Equal(got, comm) {
		t.Fatal("comm.py changed")
	}
	if _, err := ForgetEntry(ctx, tr, "demo"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(full); !bytes.Equal(got, edited) {
		t.Fatal("edit lost")
	}
}

// A file name that is not UTF-8 is journaled losslessly and reverts.
func TestJournalNonUTF8Name(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	name := "python/sglang/srt/caf\xe9.py"
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(name)), []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	diff := "diff --git a/" + name + " b/" + name + "\n--- a/" + name + "\n+++ b/" + name + "\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
	toml := strings.Replace(engineTOML, "[[verify]]\nfile = \"python/sglang/srt/layers/comm.py\"\ncontains = \"_is_sm120_supported\"\n", "", 1)
	ps, err := catalog.LoadFS(catFS(map[string]string{"demo.toml": toml, "demo/a.diff": diff}), "cat", "test")
	if err != nil {
		t.Fatal(err)
	}
	orig := snapshot(t, root)
	if _, err := apply(t, ps[0], tr); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, filepath.FromSlash(name))); string(b) != "x = 2\n" {
		t.Fatalf("not applied: %q", b)
	}
	sj, _ := os.ReadFile(filepath.Join(root, source.StateDirName, "state.json"))
	if !strings.Contains(string(sj), `"path_b64"`) {
		t.Fatalf("state.json: %s", sj)
	}
	st, err := Status(ctx, tr, nil)
	if err != nil || !st.Patches[0].Clean {
		t.Fatalf("status: %+v %v", st, err)
	}
	if _, err := Revert(ctx, tr, nil, nil, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if !sameSnap(orig, snapshot(t, root)) {
		t.Fatalf("not reverted: %s", diffSnap(orig, snapshot(t, root)))
	}
}

// The reader's bounds: a huge state.json and a tar header that claims
// gigabytes are refused as damaged, before they are read into memory.
func TestJournalBounds(t *testing.T) {
	ctx := context.Background()
	t.Run("state", func(t *testing.T) {
		root, tr := engineTree(t)
		dir := filepath.Join(root, source.StateDirName)
		os.MkdirAll(dir, 0o755)
		f, _ := os.Create(filepath.Join(dir, "state.json"))
		f.Truncate(maxStateBytes + 1)
		f.Close()
		var je *JournalError
		if _, err := ReadState(ctx, tr); !errors.As(err, &je) || !strings.Contains(err.Error(), "more than the") {
			t.Fatalf("huge state: %v", err)
		}
	})
	t.Run("tar", func(t *testing.T) {
		root, tr := engineTree(t)
		writeJournal(t, root, pendingState(&FileRecord{Path: commPath, Original: sha256Hex([]byte("x")), Patched: sha256Hex([]byte(commOrig))}), true, nil)
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: commPath, Mode: 0o644, Size: 4 << 30})
		w.Write(make([]byte, 512))
		os.WriteFile(filepath.Join(root, source.StateDirName, "demo.orig.tar"), b.Bytes()[:1024], 0o644)
		var je *JournalError
		if _, err := Recover(ctx, tr); !errors.As(err, &je) || !strings.Contains(err.Error(), "claims 4294967296 bytes") {
			t.Fatalf("tar bomb: %v", err)
		}
	})
}

// TestJournalConcurrentChild is a process of TestJournalConcurrent: it
// applies or reverts the fixture patch, rounds times, and exits non-zero
// on the first error.
func TestJournalConcurrentChild(t *testing.T) {
	root, catDir := os.Getenv("SMPATCH_CONC_TREE"), os.Getenv("SMPATCH_CONC_CATALOG")
	if root == "" {
		t.Skip("run by TestJournalConcurrent")
	}
	ctx := context.Background()
	cat, err := loadCatalog(nil, []string{catDir})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cat.Get("demo")
	rounds, _ := strconv.Atoi(os.Getenv("SMPATCH_CONC_ROUNDS"))
	for i := 0; i < rounds; i++ {
		tr, err := source.OpenCheckout(root)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			pl, err := NewPlan(ctx, p, tr, PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pl.Outcome() == OutcomeApplies || pl.Outcome() == OutcomeAlreadyApplied {
				if _, err := Apply(ctx, tr, &Set{Tree: tr, Plans: []*Plan{pl}}, ApplyOptions{}); err != nil {
					t.Fatalf("apply: %v", err)
				}
			}
		} else if _, err := Revert(ctx, tr, cat, nil, RevertOptions{}); err != nil {
			t.Fatalf("revert: %v", err)
		}
	}
}

// Many processes apply and revert on one tree at once: none fails (a
// revert that removes the journal never pulls the lock from under a
// waiting process), and the tree ends original or patched, as the journal
// says.
func TestJournalConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	root, tr := engineTree(t)
	catDir := t.TempDir()
	writeCatalog(t, catDir, map[string]string{"demo.toml": engineTOML, "demo/a.diff": engineDiff})
	orig := snapshot(t, root)
	const procs, rounds = 16, 6
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		c := exec.Command(os.Args[0], "-test.run=^TestJournalConcurrentChild$", "-test.count=1")
		c.Env = append(os.Environ(), "SMPATCH_CONC_TREE="+root, "SMPATCH_CONC_CATALOG="+catDir, "SMPATCH_CONC_ROUNDS="+strconv.Itoa(rounds), "GORACE=atexit_sleep_ms=0")
		outs[i] = &bytes.Buffer{}
		c.Stdout, c.Stderr = outs[i], outs[i]
		cmds[i] = c
	}
	t0 := time.Now()
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	failed := 0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			failed++
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	t.Logf("%d processes x %d rounds in %v", procs, rounds, time.Since(t0))
	if failed > 0 {
		return
	}
	st, err := ReadState(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Patches) == 0 && !sameSnap(orig, snapshot(t, root)) {
		t.Fatalf("journal empty but tree not original: %s", diffSnap(orig, snapshot(t, root)))
	}
	if len(st.Patches) == 1 {
		if _, err := Revert(context.Background(), tr, nil, nil, RevertOptions{}); err != nil {
			t.Fatal(err)
		}
		if !sameSnap(orig, snapshot(t, root)) {
			t.Fatal("revert after the storm did not restore the original")
		}
	}
	if _, err := os.Lstat(filepath.Join(root, source.StateDirName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("journal left after the last revert: %v", err)
	}
}

// The state directory listed under the lock tells which journal copies
// are not there: they are created without clearing the name first. A name
// planted meanwhile is then refused by the exclusive, no-follow create,
// never followed nor removed; a name the listing saw is cleared first, as
// always.
func TestJournalListingPlantedName(t *testing.T) {
	ctx := context.Background()
	_, tr := engineTree(t)
	j, err := openJournal(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	old := filepath.Join(j.dir, "seen.orig.tar")
	if err := os.WriteFile(old, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := j.recover(); err != nil {
		t.Fatal(err)
	}
	if j.names == nil {
		t.Fatal("no listing kept after recovery")
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("orphan copy not dropped: %v", err)
	}
	// Listed (as an orphan, now gone) and planted again after the listing:
	// absent says so, and the create refuses.
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(j.dir, "late.orig.tar")); err != nil {
		t.Fatal(err)
	}
	if !j.absent("late.orig.tar") {
		t.Fatal("a name planted after the listing is not taken as absent: the test proves nothing")
	}
	bw := j.newBlobWriter()
	err = bw.write("orig", "late", "a.py", []byte("x"), true)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create over a planted symlink: %v", err)
	}
	_ = bw.close()
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Fatalf("followed the planted symlink: %q", b)
	}
	// A name this command wrote is known to be there: writing it again
	// clears it first.
	bw = j.newBlobWriter()
	if err := bw.write("orig", "mine", "a.py", []byte("1"), true); err != nil {
		t.Fatal(err)
	}
	_ = bw.close()
	if j.absent("mine.orig.tar") {
		t.Fatal("a copy just written is taken as absent")
	}
	bw = j.newBlobWriter()
	if err := bw.write("orig", "mine", "a.py", []byte("2"), true); err != nil {
		t.Fatalf("second write of a name written: %v", err)
	}
	_ = bw.close()
	j.dropBlobs("mine")
	if !j.absent("mine.orig.tar") {
		t.Fatal("a dropped copy is not taken as absent")
	}
	if _, err := os.Lstat(filepath.Join(j.dir, "mine.orig.tar")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("dropped copy still there: %v", err)
	}
}
