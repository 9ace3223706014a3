package image

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"
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
	if n := f.LayerPasses(); n != 1 {
		t.Errorf("layer passes = %d, want 1", n)
	}
	if _, err := f.ReadFile("usr/lib/python3/site-packages/other/d.py"); err != nil {
		t.Fatal(err)
	}
	if n := f.LayerPasses(); n != 2 {
		t.Errorf("layer passes = %d, want 2", n)
	}
	if got := f.SitePackages(); len(got) != 1 || got[0] != "usr/lib/python3/site-packages" {
		t.Errorf("SitePackages = %v", got)
	}
}
