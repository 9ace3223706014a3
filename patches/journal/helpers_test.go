package journal

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/internal/testkit/treetest"
	"github.com/smpatch/smpatch/source"
)

// TestMain keeps the journal key of the tests in a directory of their
// own, never the user's.
func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "smpatch-journal-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", d)
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// The fixture: a tiny sglang checkout of two files, and what a patch
// writes to them (synthetic text, not upstream's).
const (
	commPath = "python/sglang/srt/layers/comm.py"
	argsPath = "python/sglang/srt/server_args.py"
	commOrig = "_is_sm90_supported = is_sm90()\ndef gate():\n    return _is_sm90_supported\n"
	commNew  = "_is_sm90_supported = is_sm90()\n_is_sm120_supported = is_sm120()\ndef gate():\n    return _is_sm90_supported or _is_sm120_supported\n"
	argsOrig = "def adjust(self):\n    if is_sm90_supported():\n        self.enable_fusion = True\n"
	argsNew  = "def adjust(self):\n    if is_sm90_supported() or is_sm120_supported():\n        self.enable_fusion = True\n"
)

func testTree(t testing.TB) (string, source.WritableTree) {
	t.Helper()
	root := t.TempDir()
	treetest.Write(t, root, map[string]string{
		"python/sglang/__init__.py": "",
		"python/sglang/version.py":  "__version__ = \"0.5.6\"\n",
		commPath:                    commOrig,
		argsPath:                    argsOrig,
	})
	tr, err := source.OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, tr
}

// demoItem is the transaction that patches both files as entry demo.
func demoItem() *Item {
	return &Item{Entry: &Entry{Name: "demo", Project: "sglang", Variant: "v1", Origin: "test"}, Writes: []Write{
		{Path: argsPath, Old: []byte(argsOrig), New: []byte(argsNew)},
		{Path: commPath, Old: []byte(commOrig), New: []byte(commNew)},
	}}
}

// applyDemo applies demoItem to tr under its journal.
func applyDemo(t testing.TB, tr source.WritableTree) {
	t.Helper()
	j, err := Open(context.Background(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Apply(context.Background(), []*Item{demoItem()}, nil); err != nil {
		t.Fatal(err)
	}
}

// revertAll reverts every applied entry of tr to its original bytes.
func revertAll(t testing.TB, tr source.WritableTree) error {
	t.Helper()
	j, err := Open(context.Background(), tr, Options{})
	if err != nil {
		return err
	}
	defer j.Close()
	if _, err := j.Recover(); err != nil {
		return err
	}
	var steps []*RevertStep
	for _, e := range j.State().Patches {
		st := &RevertStep{Entry: e}
		for _, f := range e.Files {
			orig, err := j.Original(e, f)
			if err != nil {
				return err
			}
			cur, err := ReadCurrent(tr, f.Path)
			if err != nil {
				return err
			}
			st.Writes = append(st.Writes, Write{Path: f.Path, Old: cur, New: orig})
		}
		steps = append(steps, st)
	}
	return j.Revert(context.Background(), steps)
}

// recoverTree opens the journal of tr and recovers it, as a writing
// command does first.
func recoverTree(tr source.WritableTree) ([]string, error) {
	j, err := Open(context.Background(), tr, Options{})
	if err != nil {
		return nil, err
	}
	defer j.Close()
	return j.Recover()
}

// writeJournal writes state (signed with this user's key when signed is
// set; a bare state otherwise) and one tar file of copies per kind for the
// entry demo into the journal of root.
func writeJournal(t testing.TB, root string, s *State, signed bool, copies map[string]map[string][]byte) {
	t.Helper()
	dir := filepath.Join(root, source.StateDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var data []byte
	var err error
	if signed {
		data, err = encodeState(s)
	} else {
		data, err = json.MarshalIndent(s, "", "  ")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for kind, set := range copies {
		if err := os.WriteFile(filepath.Join(dir, "demo."+kind+".tar"), tarOf(set), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tarOf is a tar file holding set.
func tarOf(set map[string][]byte) []byte {
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for name, data := range set {
		w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))})
		w.Write(data)
	}
	w.Close()
	return b.Bytes()
}

// tarFiles reads the tar file p: each entry's name and content.
func tarFiles(t *testing.T, p string) map[string]string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	r := tar.NewReader(f)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(b)
	}
}

func pendingState(files ...*FileRecord) *State {
	return &State{Format: stateFormat, Kind: "checkout", Patches: []*Entry{{Name: "demo", Project: "sglang", State: Pending, Files: files}}}
}

// hashes is the sha256 of every regular file under base, not following
// symlinks; the journal's files only with journal set.
func hashes(t testing.TB, base string, journal bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == source.StateDirName && !journal {
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

func sameHashes(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func diffHashes(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k+" (new)")
		}
	}
	return strings.Join(out, ", ")
}
