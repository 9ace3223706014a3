package image

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func keepAll(string, byte) bool { return true }

func TestFSWhiteouts(t *testing.T) {
	img := testImage(t,
		[]tent{
			{Name: "usr/", Dir: true},
			{Name: "usr/lib/a.txt", Body: "a"},
			{Name: "sp/sglang/x.py", Body: "old x"},
			{Name: "sp/sglang/gone.py", Body: "gone"},
			{Name: "sp/old/f.py", Body: "old"},
			{Name: "opt/opq/f1", Body: "f1"},
			{Name: "opt/file-then-dir", Body: "f"},
			{Name: "opt/dir-then-file/inner", Body: "i"},
			{Name: "hl/target", Body: "shared"},
			{Name: "hl/link", Hard: "hl/target"},
		},
		[]tent{
			{Name: "sp/sglang/.wh.gone.py"},
			{Name: "sp/.wh.old"},
			{Name: "./sp/sglang/x.py", Body: "new x"},
			{Name: "opt/opq/.wh..wh..opq"},
			{Name: "opt/opq/f2", Body: "f2"},
			{Name: "opt/dir-then-file", Body: "now a file"},
			{Name: "lnk", Link: "sp/sglang"},
			{Name: "abs", Link: "/usr/lib"},
		},
		[]tent{
			// The same layer may hold an entry and a later whiteout for a
			// lower one; the whiteout only applies below.
			{Name: "sp/sglang/y.py", Body: "y"},
			{Name: "sp/sglang/.wh.y.py"},
		},
	)
	f, err := NewFS(context.Background(), img, FSOptions{Keep: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]string{
		"sp/sglang/x.py":    "new x",
		"sp/sglang/y.py":    "y",
		"usr/lib/a.txt":     "a",
		"opt/opq/f2":        "f2",
		"lnk/x.py":          "new x",
		"abs/a.txt":         "a",
		"hl/link":           "shared",
		"opt/dir-then-file": "now a file",
	}
	for name, want := range read {
		b, err := f.ReadFile(name)
		if err != nil || string(b) != want {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", name, b, err, want)
		}
	}
	for _, name := range []string{"sp/sglang/gone.py", "sp/old/f.py", "sp/old", "opt/opq/f1", "opt/dir-then-file/inner", "nope"} {
		if _, err := f.ReadFile(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadFile(%s) error = %v, want not exist", name, err)
		}
	}
	if err := fstest.TestFS(f, "sp/sglang/x.py", "sp/sglang/y.py", "usr/lib/a.txt", "opt/opq/f2", "hl/target", "hl/link"); err != nil {
		t.Fatal(err)
	}
	ents, err := fs.ReadDir(f, "sp/sglang")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := join(names); got != "x.py,y.py" {
		t.Errorf("ReadDir(sp/sglang) = %s", got)
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// TestFSReadAround checks that reading one file of a package keeps its
// small neighbours, so a project costs one pass over its layer.
func TestFSReadAround(t *testing.T) {
	img := testImage(t,
		[]tent{{Name: "big/blob", Body: "x"}},
		[]tent{
			{Name: "usr/lib/python3/site-packages/sglang/a.py", Body: "a"},
			{Name: "usr/lib/python3/site-packages/sglang/b.py", Body: "b"},
			{Name: "usr/lib/python3/site-packages/sglang/srt/c.py", Body: "c"},
			{Name: "usr/lib/python3/site-packages/other/d.py", Body: "d"},
		},
	)
	f, err := NewFS(context.Background(), img, FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Exists("big/blob") {
		t.Error("DefaultKeep indexed a file outside site-packages")
	}
	for _, n := range []string{"a.py", "b.py", "srt/c.py"} {
		if _, err := f.ReadFile("usr/lib/python3/site-packages/sglang/" + n); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.LayerPasses(); n[0] != 0 || n[1] != 1 {
		t.Errorf("layer passes = %v, want [0 1]", n)
	}
	if _, err := f.ReadFile("usr/lib/python3/site-packages/other/d.py"); err != nil {
		t.Fatal(err)
	}
	if n := f.LayerPasses(); n[0] != 0 || n[1] != 2 {
		t.Errorf("layer passes = %v, want [0 2]", n)
	}
	if got := f.SitePackages(); len(got) != 1 || got[0] != "usr/lib/python3/site-packages" {
		t.Errorf("SitePackages = %v", got)
	}
}

// TestFSBigFileStreams checks that a file over the read-around limit is
// opened as a stream with the right bytes.
func TestFSBigFileStreams(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", (maxCachedFile/16)+100)
	img := testImage(t, []tent{{Name: "sp/torch/lib/libtorch_cuda.so", Body: big}, {Name: "sp/torch/__init__.py", Body: ""}})
	f, err := NewFS(context.Background(), img, FSOptions{Keep: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	fl, err := f.Open("sp/torch/lib/libtorch_cuda.so")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fl.(*streamFile); !ok {
		t.Errorf("big file opened as %T", fl)
	}
	st, _ := fl.Stat()
	b, err := io.ReadAll(fl)
	fl.Close()
	if err != nil || string(b) != big || st.Size() != int64(len(big)) {
		t.Errorf("read %d bytes (stat %d), %v", len(b), st.Size(), err)
	}
	if err := fstest.TestFS(f, "sp/torch/lib/libtorch_cuda.so", "sp/torch/__init__.py"); err != nil {
		t.Fatal(err)
	}
}

// TestFSIndexCache checks that a layer's entry list is kept by diff id
// and used instead of streaming the layer again.
func TestFSIndexCache(t *testing.T) {
	img := testImage(t, []tent{{Name: "sp/sglang/a.py", Body: "a"}}, []tent{{Name: "sp/sglang/b.py", Body: "b"}})
	dir := t.TempDir()
	if _, err := NewFS(context.Background(), img, FSOptions{IndexCache: dir}); err != nil {
		t.Fatal(err)
	}
	ls, _ := img.Layers()
	d, _ := ls[0].Digest()
	file := filepath.Join(dir, "sha256-"+d.Hex+".json")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no cache entry: %v", err)
	}
	// A list that differs from the layer shows the cache is what is read.
	b = []byte(strings.Replace(string(b), `"sp/sglang/a.py"`, `"sp/sglang/cached.py"`, 1))
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := NewFS(context.Background(), img, FSOptions{IndexCache: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Exists("sp/sglang/cached.py") || f.Exists("sp/sglang/a.py") || !f.Exists("sp/sglang/b.py") {
		t.Error("index cache not used")
	}
	// Another Keep does not use the cache.
	f, err = NewFS(context.Background(), img, FSOptions{IndexCache: dir, Keep: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Exists("sp/sglang/a.py") {
		t.Error("custom Keep read the cache")
	}
}

// FuzzFS feeds arbitrary bytes as a layer's tar (above a fixed lower
// layer): indexing must fail cleanly or give a consistent view. Every
// regular file the filesystem lists reads back with the size it lists,
// and no whiteout entry is ever visible.
func FuzzFS(f *testing.F) {
	f.Add(tarBytes(f, []tent{{Name: "sp/.wh.x"}, {Name: "sp/y", Body: "y"}}))
	f.Add(tarBytes(f, []tent{{Name: "sp/.wh..wh..opq"}, {Name: "l", Link: "../../sp"}, {Name: "h", Hard: "sp/x"}}))
	f.Add(tarBytes(f, []tent{{Name: "sp", Body: "file over a dir"}, {Name: "a/b/c/", Dir: true}}))
	f.Add(tarBytes(f, []tent{{Name: "sp/n", Body: "first"}, {Name: "sp/h", Hard: "sp/n"}, {Name: "sp/n", Body: "second, longer"}}))
	f.Add(tarBytes(f, []tent{{Name: "sp/d/.wh.z"}, {Name: "h2", Hard: "sp/d/z"}, {Name: "h3", Hard: "sp/x"}}))
	f.Add([]byte("not a tar"))
	lower := static.NewLayer(tarBytes(f, []tent{{Name: "sp/x", Body: "x"}, {Name: "sp/d/z", Body: "z"}}), types.OCIUncompressedLayer)
	f.Fuzz(func(t *testing.T, upper []byte) {
		layers := []v1.Layer{lower, static.NewLayer(upper, types.OCIUncompressedLayer)}
		fsys, err := newFS(context.Background(), layers, nil, nil, FSOptions{Keep: keepAll})
		if err != nil {
			return
		}
		checkFSInvariants(t, fsys)
	})
}

func checkFSInvariants(t *testing.T, fsys *FS) {
	t.Helper()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Errorf("walk %s: %v", p, err)
			return nil
		}
		if strings.HasPrefix(d.Name(), ".wh.") {
			t.Errorf("whiteout entry %s is visible", p)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			t.Errorf("listed %s: %v", p, err)
			return nil
		}
		b, err := fsys.ReadFile(p)
		if err != nil {
			t.Errorf("listed %s does not read back: %v", p, err)
		} else if int64(len(b)) != info.Size() {
			t.Errorf("listed %s is %d bytes, reads %d", p, info.Size(), len(b))
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// TestFSBadWhiteouts checks that whiteouts which would hide a directory
// or its parent instead of one entry are refused.
func TestFSBadWhiteouts(t *testing.T) {
	for _, name := range []string{"usr/lib/.wh.", "usr/lib/.wh..", "usr/lib/.wh...", ".wh..", "usr/.wh.x/y"} {
		img := testImage(t, []tent{{Name: "usr/lib/a", Body: "a"}, {Name: "usr/b", Body: "b"}}, []tent{{Name: name}})
		_, err := NewFS(context.Background(), img, FSOptions{Keep: keepAll})
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "layer sha256:") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestFSHardLinks checks hard links against their layer: to a file of the
// same layer (also one an upper layer whites out), to a lower file, into a
// directory the link's own layer made opaque (gone), and a name given
// twice in one layer (the last entry counts; a link made in between keeps
// the first).
func TestFSHardLinks(t *testing.T) {
	img := testImage(t,
		[]tent{{Name: "sp/x", Body: "lower x"}, {Name: "opq/y", Body: "y"}},
		[]tent{
			{Name: "opq/.wh..wh..opq"},
			{Name: "into-opaque", Hard: "opq/y"},
			{Name: "to-lower", Hard: "sp/x"},
			{Name: "n", Body: "first"},
			{Name: "to-first", Hard: "n"},
			{Name: "n", Body: "second, longer"},
			{Name: "w", Body: "whited out above"},
			{Name: "to-w", Hard: "w"},
		},
		[]tent{{Name: ".wh.w"}},
	)
	f, err := NewFS(context.Background(), img, FSOptions{Keep: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"to-lower": "lower x", "n": "second, longer", "to-first": "first", "to-w": "whited out above"}
	for n, w := range want {
		if b, err := f.ReadFile(n); err != nil || string(b) != w {
			t.Errorf("%s = %q, %v; want %q", n, b, err, w)
		}
	}
	for _, n := range []string{"into-opaque", "w", "opq/y"} {
		if f.Exists(n) {
			t.Errorf("%s is listed", n)
		}
	}
	checkFSInvariants(t, f)
}

func TestFSHardLinkCycle(t *testing.T) {
	img := testImage(t, []tent{{Name: "a", Hard: "b"}, {Name: "b", Hard: "a"}, {Name: "c", Link: "d"}, {Name: "d", Link: "c"}})
	f, err := NewFS(context.Background(), img, FSOptions{Keep: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if _, err := f.ReadFile(n); err == nil {
			t.Errorf("ReadFile(%s) of a link cycle succeeded", n)
		}
	}
}
