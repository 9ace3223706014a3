package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/smpatch/smpatch/source"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild"
)

func TestRevisionTree(t *testing.T) {
	ctx := context.Background()
	b, hs := upstreamRepo(t)
	tr, err := OpenRevision(b.Repo, hs["second"], source.SGLang, b.URL())
	if err != nil {
		t.Fatal(err)
	}
	if tr.Kind() != source.KindRevision || tr.Project() != source.SGLang || tr.Root() != b.URL()+"@"+hs["second"].String() {
		t.Fatalf("kind %s project %s root %s", tr.Kind(), tr.Project(), tr.Root())
	}
	data, err := tr.ReadFile("python/sglang/srt/layers/communicator.py")
	if err != nil || string(data) != "import torch\n\n_is_sm90_supported = True\n" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	for _, bad := range []string{"nope.py", "python/sglang/nope/x.py", "python/sglang", "../x", "/README.md", "python//sglang/version.py"} {
		if _, err := tr.ReadFile(bad); err == nil {
			t.Errorf("ReadFile(%q) succeeded", bad)
		}
	}
	if err := tr.CheckProject(); err != nil {
		t.Errorf("CheckProject: %v", err)
	}
	wrong, _ := OpenRevision(b.Repo, hs["second"], source.FlashInfer, b.URL())
	if err := wrong.CheckProject(); err == nil || !strings.Contains(err.Error(), "is not flashinfer: it has no flashinfer/") {
		t.Errorf("CheckProject on the wrong project: %v", err)
	}
	if _, err := tr.ReadFile("missing.py"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	all, err := tr.ListFiles("")
	want := []string{"README.md", "python/sglang/srt/layers/communicator.py", "python/sglang/version.py"}
	if err != nil || !reflect.DeepEqual(all, want) {
		t.Fatalf("ListFiles = %v, %v", all, err)
	}
	sub, err := tr.ListFiles("python/sglang/srt")
	if err != nil || !reflect.DeepEqual(sub, want[1:2]) {
		t.Fatalf("ListFiles(srt) = %v, %v", sub, err)
	}
	if _, err := tr.ListFiles("docs"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ListFiles(docs): %v", err)
	}

	for _, tc := range []struct{ commit, version, from string }{
		{"first", "0.5.6.post2", "python/sglang/version.py:1"},
		{"second", "0.5.6.post2", "python/sglang/version.py:1"},
		{"third", "0.5.7rc1", "tag v0.5.7rc1"},
		{"fourth", "0.5.7rc1", "tag v0.5.7rc1 (+1 commits)"},
	} {
		tr, err := OpenRevision(b.Repo, hs[tc.commit], source.SGLang, b.URL())
		if err != nil {
			t.Fatal(err)
		}
		v, from, err := tr.Version(ctx)
		if err != nil || v == nil {
			t.Fatalf("%s: Version = %v %q %v", tc.commit, v, from, err)
		}
		want, _ := source.ParseVersion(tc.version)
		if !v.Equal(want) || from != tc.from {
			t.Errorf("%s: Version = %s from %q, want %s from %q", tc.commit, v, from, tc.version, tc.from)
		}
	}
}

func TestRevisionVersionFlashInferAndUnknown(t *testing.T) {
	ctx := context.Background()
	b, err := gitbuild.New(filepath.Join(t.TempDir(), "fi.git"))
	if err != nil {
		t.Fatal(err)
	}
	// flashinfer keeps its version in version.txt at the top; version.py
	// carries only a fallback for builds without metadata.
	noVersion, err := b.Commit("init", map[string][]byte{
		"flashinfer/version.py": []byte("try:\n    from ._build_meta import __version__\nexcept ModuleNotFoundError:\n    __version__ = \"0.0.0+unknown\"\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	withTxt, err := b.Commit("release", map[string][]byte{"version.txt": []byte("0.6.18rc7\n")})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := OpenRevision(b.Repo, noVersion, source.FlashInfer, "")
	v, from, err := tr.Version(ctx)
	if err != nil || v != nil || from == "" {
		t.Fatalf("no version: %v %q %v", v, from, err)
	}
	tr, _ = OpenRevision(b.Repo, withTxt, source.FlashInfer, "")
	v, from, err = tr.Version(ctx)
	if err != nil || v == nil || from != "version.txt:1" {
		t.Fatalf("version.txt: %v %q %v", v, from, err)
	}
}

func TestVersionLiteral(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
		line             int
	}{
		{"version.txt", "0.6.0\n", "0.6.0", 1},
		{"version.txt", "", "", 0},
		{"version.txt", "not a version\n", "", 0},
		{"version.py", "# c\n__version__ = \"0.5.6.post2\"\n", "0.5.6.post2", 2},
		{"version.py", "__version__: str = '0.5.3rc2'\n", "0.5.3rc2", 1},
		{"version.py", "__version__ = \"0.0.0+unknown\"\n", "", 0},
		{"version.py", "version = \"1.0\"\n", "", 0},
	} {
		got, line, ok := source.RevisionVersionLiteral(tc.name, []byte(tc.data))
		if got != tc.want || line != tc.line || ok != (tc.want != "") {
			t.Errorf("source.RevisionVersionLiteral(%s, %q) = %q %d %v, want %q %d", tc.name, tc.data, got, line, ok, tc.want, tc.line)
		}
	}
}

func FuzzVersionLiteral(f *testing.F) {
	for _, s := range []string{"0.6.0\n", "__version__ = \"0.5.6.post2\"\n", "__version__: str = '1'\n", "x\n__version__ = \"0.0.0+unknown\"\n__version__ = \"1.2\"\n"} {
		f.Add("version.py", s)
		f.Add("version.txt", s)
	}
	f.Fuzz(func(t *testing.T, name, data string) {
		s, line, ok := source.RevisionVersionLiteral(name, []byte(data))
		if ok != (s != "") || (ok && (line < 1 || line > 1+strings.Count(data, "\n"))) {
			t.Fatalf("source.RevisionVersionLiteral(%q, %q) = %q %d %v", name, data, s, line, ok)
		}
	})
}

// A shared RevisionCache changes nothing a tree answers: listings, bytes
// and blob hashes are those read without it, commit after commit.
func TestRevisionCacheSameAnswers(t *testing.T) {
	b, hs := upstreamRepo(t)
	c := NewRevisionCache(1 << 20)
	for _, name := range []string{"first", "second", "third", "fourth", "first"} {
		plain, err := OpenRevision(b.Repo, hs[name], source.SGLang, "")
		if err != nil {
			t.Fatal(err)
		}
		cached, _ := OpenRevision(b.Repo, hs[name], source.SGLang, "")
		cached.SetCache(c)
		for _, dir := range []string{"", "python/sglang", "python/sglang/srt/layers"} {
			want, err1 := plain.ListFiles(dir)
			got, err2 := cached.ListFiles(dir)
			if fmt.Sprint(want, err1) != fmt.Sprint(got, err2) {
				t.Fatalf("%s: ListFiles(%q) = %v %v, want %v %v", name, dir, got, err2, want, err1)
			}
			for _, f := range want {
				w, _ := plain.ReadFile(f)
				g, err := cached.ReadFile(f)
				if err != nil || !bytes.Equal(w, g) {
					t.Fatalf("%s: ReadFile(%q) = %q %v, want %q", name, f, g, err, w)
				}
				e, _ := plain.tree.FindEntry(f)
				if h, ok := cached.FileHash(f); !ok || h != e.Hash {
					t.Fatalf("%s: FileHash(%q) = %s %v, want %s", name, f, h, ok, e.Hash)
				}
			}
		}
		if _, err := cached.ReadFile("python/sglang/nope.py"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("missing file: %v", err)
		}
	}
}

// A revision more than MaxTagDistance commits past its nearest version tag
// has no version from the tag; within the threshold the distance is given.
func TestRevisionTagTooFarBehind(t *testing.T) {
	ctx := context.Background()
	b, err := gitbuild.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	commit := func(msg, file, data string) plumbing.Hash {
		h, err := b.Commit(msg, map[string][]byte{file: []byte(data)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	commit("one", "python/sglang/__init__.py", "")
	if err := b.Tag("v0.5.6.post2", false); err != nil {
		t.Fatal(err)
	}
	var near plumbing.Hash
	for i := 0; i < source.MaxTagDistance; i++ {
		near = commit(fmt.Sprintf("c%d", i), "README.md", fmt.Sprint(i))
	}
	far := commit("far", "README.md", "far")
	rt, _ := OpenRevision(b.Repo, near, source.SGLang, "")
	if v, from, _ := rt.Version(ctx); v == nil || from != fmt.Sprintf("tag v0.5.6.post2 (+%d commits)", source.MaxTagDistance) {
		t.Fatalf("revision at the threshold: %v %q", v, from)
	}
	rt, _ = OpenRevision(b.Repo, far, source.SGLang, "")
	if v, from, _ := rt.Version(ctx); v != nil || !strings.Contains(from, fmt.Sprintf("no version tag within %d commits", source.MaxTagDistance)) {
		t.Fatalf("revision past the threshold: %v %q", v, from)
	}
}
