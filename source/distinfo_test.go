package source

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestNormalizeDistName(t *testing.T) {
	for in, want := range map[string]string{
		"flashinfer-python": "flashinfer-python",
		"flashinfer_python": "flashinfer-python",
		"FlashInfer.Python": "flashinfer-python",
		"sgl__kernel":       "sgl-kernel",
		"nvidia-nccl-cu13":  "nvidia-nccl-cu13",
		"torch":             "torch",
		" Torch ":           "torch",
		"a-_.b":             "a-b",
		"":                  "",
		"-leading":          "leading",
	} {
		if got := NormalizeDistName(in); got != want {
			t.Errorf("NormalizeDistName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseMetadata(t *testing.T) {
	md := ParseMetadata([]byte("Metadata-Version: 2.1\r\nName: flashinfer-python\nVersion: 0.6.17\nRequires-Dist: torch\nRequires-Dist: numpy\nLicense: Apache\n  2.0 text\n\nName: body-is-not-a-header\n"))
	want := map[string][]string{
		"Metadata-Version": {"2.1"},
		"Name":             {"flashinfer-python"},
		"Version":          {"0.6.17"},
		"Requires-Dist":    {"torch", "numpy"},
		"License":          {"Apache\n2.0 text"},
	}
	if !reflect.DeepEqual(md, want) {
		t.Fatalf("got %q", md)
	}
}

func writeDist(t *testing.T, sp, dir, metadata string) {
	t.Helper()
	d := filepath.Join(sp, dir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	file := "METADATA"
	if strings.HasSuffix(dir, ".egg-info") {
		file = "PKG-INFO"
	}
	if metadata != "" {
		if err := os.WriteFile(filepath.Join(d, file), []byte(metadata), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindDist(t *testing.T) {
	root := t.TempDir()
	sp1 := filepath.Join(root, "a", "site-packages")
	sp2 := filepath.Join(root, "b", "site-packages")
	writeDist(t, sp1, "flashinfer_python-0.6.17.dist-info", "Name: flashinfer-python\nVersion: 0.6.17\n")
	writeDist(t, sp2, "flashinfer_python-0.6.16.dist-info", "Name: flashinfer-python\nVersion: 0.6.16\n")
	writeDist(t, sp2, "torch-2.11.0+cu130.dist-info", "Name: torch\nVersion: 2.11.0+cu130\n")
	writeDist(t, sp1, "torch-2.0.0.dist-info", "") // leftover, no METADATA
	writeDist(t, sp2, "sglang.egg-info", "Name: sglang\nVersion: 0.5.6.post2\n")
	writeDist(t, sp1, "sgl_kernel-0.3.dist-info", "Name: sgl-kernel\n")

	tests := []struct {
		name, want, loc string
	}{
		{"flashinfer-python", "0.6.17", sp1},
		{"FlashInfer_Python", "0.6.17", sp1},
		{"torch", "2.11.0+cu130", sp2},
		{"sglang", "0.5.6.post2", sp2},
	}
	for _, tt := range tests {
		d, err := FindDist([]string{filepath.Join(root, "missing"), sp1, sp2}, tt.name)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if d.Version != tt.want || d.Location != tt.loc {
			t.Errorf("%s: got %s at %s, want %s at %s", tt.name, d.Version, d.Location, tt.want, tt.loc)
		}
		if !strings.HasPrefix(d.DistInfo, d.Location) {
			t.Errorf("%s: dist-info %s outside %s", tt.name, d.DistInfo, d.Location)
		}
	}
	_, err := FindDist([]string{sp1, sp2}, "nvidia-nccl-cu13")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("absent dist: %v, want fs.ErrNotExist", err)
	}
	_, err = FindDist([]string{sp1}, "sgl-kernel")
	if err == nil || !strings.Contains(err.Error(), "METADATA: no Version") {
		t.Fatalf("no version: %v", err)
	}
}

func TestFindDistFS(t *testing.T) {
	fsys := fstest.MapFS{
		"usr/local/lib/python3.12/dist-packages/flashinfer_jit_cache-0.6.17+cu130.dist-info/METADATA": {Data: []byte("Name: flashinfer-jit-cache\nVersion: 0.6.17+cu130\n")},
		"usr/local/lib/python3.12/dist-packages/nvidia_nccl_cu12-2.27.3.dist-info/METADATA":           {Data: []byte("Name: nvidia-nccl-cu12\nVersion: 2.27.3\n")},
	}
	sp := []string{"/usr/lib/python3/dist-packages", "/usr/local/lib/python3.12/dist-packages"}
	d, err := FindDistFS(fsys, sp, "flashinfer_jit_cache")
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != "0.6.17+cu130" || d.Location != sp[1] || d.DistInfo != "/usr/local/lib/python3.12/dist-packages/flashinfer_jit_cache-0.6.17+cu130.dist-info" {
		t.Fatalf("got %+v", d)
	}
	if _, err := FindDistFS(fsys, sp, "torch"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("absent: %v", err)
	}
}

func TestEditableDir(t *testing.T) {
	for _, tc := range []struct {
		json string
		dir  string
		ok   bool
	}{
		{`{"url": "file:///home/me/src/sglang/python", "dir_info": {"editable": true}}`, "/home/me/src/sglang/python", true},
		{`{"url": "file:///home/me/src/fi/", "dir_info": {"editable": true}}`, "/home/me/src/fi", true},
		{`{"url": "file:///home/me/src/fi", "dir_info": {}}`, "", false},
		{`{"url": "https://example.com/x.whl", "dir_info": {"editable": true}}`, "", false},
		{`not json`, "", false},
	} {
		dir, ok := EditableDir([]byte(tc.json))
		if dir != tc.dir || ok != tc.ok {
			t.Errorf("EditableDir(%s) = %q, %v; want %q, %v", tc.json, dir, ok, tc.dir, tc.ok)
		}
	}
}
