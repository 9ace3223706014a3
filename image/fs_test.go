package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
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
	f.Add(tarBytes(f, []tent{{Name: "sp/.wh..wh..opq"}, {Name: "sp/n", Body: "n"}, {Name: "l", Link: "sp"}}))
	f.Add(tarBytes(f, []tent{{Name: "sp/d", Body: "a file over a directory"}, {Name: "sp/.wh.x"}, {Name: "sp/x/", Dir: true}}))
	f.Add([]byte("not a tar"))
	lowerTar := tarBytes(f, []tent{{Name: "sp/x", Body: "x"}, {Name: "sp/d/z", Body: "z"}})
	lower := static.NewLayer(lowerTar, types.OCIUncompressedLayer)
	f.Fuzz(func(t *testing.T, upper []byte) {
		layers := []v1.Layer{lower, static.NewLayer(upper, types.OCIUncompressedLayer)}
		fsys, err := newFS(context.Background(), layers, nil, nil, FSOptions{Keep: keepAll})
		if err != nil {
			return
		}
		checkFSInvariants(t, fsys)
		checkAgainstExtract(t, fsys, layers, [][]byte{lowerTar, upper})
	})
}

// checkAgainstExtract compares fsys with go-containerregistry's flattening
// of the same layers (mutate.Extract) on the inputs where both mean the
// same: every regular file, directory and symlink Extract writes is in
// fsys, of the same type, with the same bytes or target, and every regular
// file and symlink of fsys is in Extract's. Left out, where FS follows what
// a container runtime does and Extract does not: hard links (FS gives a
// link the bytes its target had in the link's layer, also when an upper
// layer removes the target), a name given twice in one layer (the last
// entry counts), a whiteout and an entry of one name in one layer (the
// whiteout hides only lower layers), devices and FIFOs (FS drops them),
// names or symlinks Extract refuses or drops (outside the root), and a
// directory or symlink entry with a size (Extract ends its stream there
// as if the image ended).
func checkAgainstExtract(t *testing.T, fsys *FS, layers []v1.Layer, tars [][]byte) {
	t.Helper()
	for _, b := range tars {
		if !extractComparable(b) {
			return
		}
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	theirs := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return // Extract refuses the input
		}
		name := cleanName(h.Name)
		if name == "" {
			continue
		}
		theirs[name] = true
		fi, err := fs.Stat(fsys, name)
		if h.Typeflag == tar.TypeSymlink {
			fi, err = lstat(fsys, name)
		}
		if err != nil {
			t.Errorf("mutate.Extract has %s (type %c), FS: %v", name, h.Typeflag, err)
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if !fi.IsDir() {
				t.Errorf("%s: a directory in mutate.Extract, %s in FS", name, fi.Mode())
			}
		case tar.TypeSymlink:
			if fi.Mode()&fs.ModeSymlink == 0 || fsys.entries[name].link != h.Linkname {
				t.Errorf("%s: a symlink to %s in mutate.Extract, %s in FS", name, h.Linkname, fi.Mode())
			}
		case tar.TypeReg:
			want, _ := io.ReadAll(tr)
			got, err := fsys.ReadFile(name)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: %q in mutate.Extract, %q, %v in FS", name, want, got, err)
			}
		}
	}
	for name, e := range fsys.entries {
		if !e.isDir() && !theirs[name] {
			t.Errorf("FS has %s (type %c), mutate.Extract does not", name, e.typ)
		}
	}
}

// lstat is Stat without following a final symlink.
func lstat(f *FS, name string) (fs.FileInfo, error) {
	_, e, err := f.resolve(name, false)
	if err != nil {
		return nil, err
	}
	return &fileInfo{name: path.Base(name), e: e, size: e.size}, nil
}

// extractComparable reports whether a layer's tar holds none of what FS
// and mutate.Extract read differently (see checkAgainstExtract).
func extractComparable(b []byte) bool {
	tr := tar.NewReader(bytes.NewReader(b))
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
		raw := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if !fs.ValidPath(raw) || raw == "." || strings.ContainsAny(h.Name, "\\:") || cleanName(h.Name) != raw {
			return false
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeRegA:
		case tar.TypeDir:
			if h.Size != 0 {
				return false // Extract copies its "data", gets EOF and ends its stream there, silently
			}
		case tar.TypeSymlink:
			if h.Size != 0 {
				return false
			}
			l := h.Linkname
			if !path.IsAbs(l) && strings.HasPrefix(path.Clean(path.Join(path.Dir(raw), l)), "..") {
				return false
			}
		default:
			return false
		}
		name := raw
		if dir, base := path.Split(raw); strings.HasPrefix(base, ".wh.") && base != opaqueWhiteout {
			name = dir + strings.TrimPrefix(base, ".wh.")
		}
		if seen[name] {
			return false
		}
		seen[name] = true
	}
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

// FuzzIndexCache feeds arbitrary bytes as a layer's cached entry list: it
// is refused, or it is a list scanLayer could have written, which merges
// into a consistent filesystem.
func FuzzIndexCache(f *testing.F) {
	key := "sha256-" + strings.Repeat("0", 64)
	f.Add([]byte(`{"version":"3","layer":"` + key + `","entries":[{"n":"sp","t":53},{"n":"sp/x","t":48,"s":1,"m":420}]}`))
	f.Add([]byte(`{"version":"3","layer":"` + key + `","entries":[{"n":"sp/.wh.x","t":48},{"n":"h","t":49,"l":"sp/x","sm":true}]}`))
	f.Add([]byte(`{"version":"3","layer":"` + key + `","entries":[{"n":"../x","t":48}]}`))
	f.Add([]byte(`{"version":"2"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		list, ok := parseIndexCache(b, key)
		if !ok {
			return
		}
		for _, e := range list {
			if e.Name == "" || cleanName(e.Name) != e.Name {
				t.Fatalf("accepted entry name %q", e.Name)
			}
		}
		fsys := &FS{entries: map[string]*entry{}, cache: fileCache{m: map[string][]byte{}, max: defaultCacheBytes}}
		if err := fsys.merge([][]rawEntry{list}); err != nil {
			return
		}
		for name, e := range fsys.entries {
			if strings.HasPrefix(path.Base(name), ".wh.") {
				t.Errorf("whiteout %s is visible", name)
			}
			if e.typ == tar.TypeLink && e.srcLayer != 0 {
				t.Errorf("hard link %s resolves to layer %d", name, e.srcLayer)
			}
		}
	})
}
