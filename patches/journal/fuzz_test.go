package journal

import (
	"github.com/smpatch/smpatch/patches/catalog"

	"archive/tar"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/source"
)

// FuzzJournal feeds the journal reader a state.json, an orig tar file
// and a patched one: the reader alone, then the state signed with this
// user's key (so every check past the signature's is reached), and checks what it accepts, not only that it does not panic:
// an accepted state names only clean paths inside the tree, outside .git
// and the journal, each with a well-formed hash, and survives a write and
// a read unchanged; the copies read are only the names asked for, within
// the bounds; and a recovery changes no file outside the tree, nothing in
// .git, and every tree file it changes it changes from bytes the entry
// recorded to the original bytes the entry recorded; a patched copy read
// has the hash the entry recorded.
func FuzzJournal(f *testing.F) {
	seedTar := func(files map[string]string) []byte {
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		for n, c := range files {
			w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(c))})
			w.Write([]byte(c))
		}
		w.Close()
		return b.Bytes()
	}
	rec := func(path, o, p string) string {
		return `{"format":1,"patches":[{"name":"demo","state":"pending","files":[{"path":"` + path + `","original_sha256":"` + o + `","patched_sha256":"` + p + `"}]}]}`
	}
	h := func(s string) string { return Hash([]byte(s)) }
	f.Add([]byte(rec(commPath, h("orig\n"), h(commOrig))), seedTar(map[string]string{commPath: "orig\n"}), []byte{})
	f.Add([]byte(rec(".git/config", h("evil"), h("cfg"))), seedTar(map[string]string{".git/config": "evil"}), []byte{})
	f.Add([]byte(rec("python/../../x", h("evil"), h("cfg"))), seedTar(map[string]string{"python/../../x": "evil"}), []byte{})
	f.Add([]byte(rec("python/evil/config", h("evil"), h("cfg"))), seedTar(map[string]string{"python/evil/config": "evil"}), []byte{})
	f.Add([]byte(rec(commPath, h("other"), h(commOrig))), seedTar(map[string]string{commPath: "tampered"}), []byte{})
	f.Add([]byte(strings.Replace(rec(commPath, h("orig\n"), ""), `"state":"pending"`, `"state":"reverting"`, 1)), seedTar(map[string]string{commPath: "orig\n"}), []byte{})
	f.Add([]byte(`{"format":1,"patches":[{"name":"demo","state":"pending","files":[{"path":"a\ufffd","path_b64":"YdA=","patched_sha256":"`+h("x")+`"}]}]}`), []byte{}, []byte{})
	f.Add([]byte(`{"format":1,"patches":[{"name":"demo","state":"applied","files":[],"created_dirs":["python"]}]}`), []byte{}, []byte{})
	// A patched copy: right, and with other bytes.
	applied := strings.Replace(rec(commPath, h(commOrig), h(commNew)), `"state":"pending"`, `"state":"applied"`, 1)
	origTar := seedTar(map[string]string{commPath: commOrig})
	f.Add([]byte(applied), origTar, seedTar(map[string]string{commPath: commNew}))
	f.Add([]byte(applied), origTar, seedTar(map[string]string{commPath: commNew + "x"}))
	// The signed form, as smpatch writes it.
	f.Add([]byte(`{"mac":"00","state":`+rec(commPath, h(commOrig), h(commNew))+`}`), origTar, []byte{})
	f.Fuzz(func(t *testing.T, stateJSON, tarData, patchedTar []byte) {
		// The reader on its own: the signed form or a bare state.
		s, _, err := decodeState("state.json", stateJSON)
		if err != nil {
			return
		}
		checkAccepted(t, s)
		again, err := encodeState(s)
		if err != nil {
			t.Fatalf("accepted state does not encode: %v", err)
		}
		s2, why, err := decodeState("state.json", again)
		if why != "" {
			t.Fatalf("the state just signed is not trusted: %s", why)
		}
		if err != nil {
			t.Fatalf("accepted state does not read back: %v\n%s", err, again)
		}
		for i, e := range s.Patches {
			for k, fr := range e.Files {
				if s2.Patches[i].Files[k].Path != fr.Path {
					t.Fatalf("path %q read back as %q", fr.Path, s2.Patches[i].Files[k].Path)
				}
			}
		}
		// The tar reader on its own.
		want := map[string]bool{}
		for _, e := range s.Patches {
			for _, fr := range e.Files {
				want[fr.Path] = true
			}
		}
		if set, err := readCopies("t.tar", bytes.NewReader(tarData), int64(len(tarData)), want, len(want)/2); err == nil {
			for n, b := range set {
				if !want[n] || len(b) > maxCopyBytes || len(b) > len(tarData) {
					t.Fatalf("copy %q (%d bytes) accepted", n, len(b))
				}
			}
		}
		// A recovery on a real tree, with .git and a directory outside.
		base := t.TempDir()
		root := filepath.Join(base, "tree")
		for rel, c := range map[string]string{
			"tree/python/sglang/__init__.py": "", "tree/python/sglang/version.py": "__version__ = \"0.5.6\"\n",
			"tree/" + commPath: commOrig, "tree/.git/config": "[core]\n", "outside/keep": "x",
		} {
			p := filepath.Join(base, filepath.FromSlash(rel))
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(c), 0o644)
		}
		os.Symlink("../.git", filepath.Join(root, "python", "evil"))
		os.Symlink("../../outside", filepath.Join(root, "python", "out"))
		tr, err := source.OpenCheckout(root)
		if err != nil {
			t.Fatal(err)
		}
		data, err := encodeState(s)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(root, source.StateDirName), 0o755)
		os.WriteFile(filepath.Join(root, source.StateDirName, "state.json"), data, 0o644)
		os.WriteFile(filepath.Join(root, source.StateDirName, "demo.orig.tar"), tarData, 0o644)
		os.WriteFile(filepath.Join(root, source.StateDirName, "demo.patched.tar"), patchedTar, 0o644)
		if j, err := Read(context.Background(), tr, Options{}); err == nil {
			for _, e := range j.State().Patches {
				for _, fr := range e.Files {
					if b, err := j.Patched(e, fr); err == nil && Hash(b) != fr.Patched {
						t.Fatalf("patched copy of %s read with sha256 %.12s, recorded %.12s", fr.Path, Hash(b), fr.Patched)
					}
				}
			}
			j.Close()
		}
		before := treeHashes(t, base)
		_, rerr := recoverTree(tr)
		after := treeHashes(t, base)
		for p, hb := range before {
			ha, ok := after[p]
			if ok && ha == hb {
				continue
			}
			if !strings.HasPrefix(p, "tree/") || strings.HasPrefix(p, "tree/.git/") {
				t.Fatalf("%s changed (recover: %v)", p, rerr)
			}
			if !changedAsRecorded(s, strings.TrimPrefix(p, "tree/"), hb, ha) {
				t.Fatalf("%s changed from %.12s to %.12s, not as the journal recorded", p, hb, ha)
			}
		}
		for p, ha := range after {
			if _, ok := before[p]; !ok {
				if !strings.HasPrefix(p, "tree/") || strings.HasPrefix(p, "tree/.git/") || !changedAsRecorded(s, strings.TrimPrefix(p, "tree/"), "", ha) {
					t.Fatalf("%s created (recover: %v)", p, rerr)
				}
			}
		}
	})
}

// checkAccepted checks the invariants of a state the reader accepted.
func checkAccepted(t *testing.T, s *State) {
	t.Helper()
	for _, e := range s.Patches {
		if !catalog.ValidName(e.Name) {
			t.Fatalf("entry name %q accepted", e.Name)
		}
		for _, fr := range e.Files {
			c, err := source.CleanRel(fr.Path)
			if err != nil || c != fr.Path || source.ReservedPath(fr.Path) != "" {
				t.Fatalf("path %q accepted", fr.Path)
			}
			if fr.Original == "" && fr.Patched == "" {
				t.Fatalf("%q accepted without hashes", fr.Path)
			}
			for _, h := range []string{fr.Original, fr.Patched, fr.Target, fr.Before} {
				if h != "" && len(h) != 64 {
					t.Fatalf("hash %q accepted", h)
				}
			}
		}
		for _, d := range e.CreatedDirs {
			if source.ReservedPath(d) != "" || !dirOfAny(d, e.Files) {
				t.Fatalf("created dir %q accepted", d)
			}
		}
	}
}

// changedAsRecorded reports whether a tree file went from hash before to
// hash after ("" absent) as a recovery of s may change it.
func changedAsRecorded(s *State, rel, before, after string) bool {
	for _, e := range s.Patches {
		for _, fr := range e.Files {
			if fr.Path != rel {
				continue
			}
			from := before == fr.Original || before == fr.Patched || (before != "" && (before == fr.Target || before == fr.Before))
			to := after == fr.Original || (e.State == Reverting && (after == fr.Target || (fr.TargetDelete && after == "")))
			if from && to {
				return true
			}
		}
	}
	return false
}

// treeHashes hashes every regular file under base (not following
// symlinks), except the journal and temporary files of writes.
func treeHashes(t *testing.T, base string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == source.StateDirName {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(base, p)
		b, _ := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = Hash(b)
		return nil
	})
	return out
}
