package tomlfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestDecodeBounds(t *testing.T) {
	deep := func(open, close string, n int) string {
		return "x = " + strings.Repeat(open, n) + "1" + strings.Repeat(close, n) + "\n"
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"inline tables", "a = 1\n" + strings.Replace(deep("{a = ", "}", 50000), "x = ", "x = ", 1), "f.toml:2: nested more than 64 levels deep: not read"},
		{"arrays", deep("[", "]", 65), "f.toml:1: nested more than 64 levels deep: not read"},
		{"dotted key", strings.Repeat("a.", 70) + "a = 1\n", "f.toml:1: a key of more than 64 dotted parts: not read"},
		{"dotted header", "[" + strings.Repeat("a.", 70) + "a]\n", "f.toml:1: a key of more than 64 dotted parts: not read"},
		{"size", "x = \"" + strings.Repeat("a", MaxSize) + "\"\n", "f.toml: 4194311 bytes, more than the 4 MiB a TOML file may have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v map[string]any
			_, err := Decode("f.toml", []byte(tc.src), &v)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
		})
	}
}

func TestDecodeAllowed(t *testing.T) {
	src := `# a comment with [[ { brackets
name = "x" # { not a table
s = '''
[[[[ not nested
'''
t = """ { "\"" """
arr = [[1, 2], [3, [4]]]
inline = {a = {b = {c = 1.5}}}
[a.b.c]
d = 1
[[e]]
f = "]"
`
	src += deepOK(MaxDepth)
	var v map[string]any
	if _, err := Decode("f.toml", []byte(src), &v); err != nil {
		t.Fatal(err)
	}
}

func deepOK(n int) string {
	return "deep = " + strings.Repeat("[", n) + "1" + strings.Repeat("]", n) + "\n"
}

func TestDecodeErrorsHaveLines(t *testing.T) {
	var v struct {
		N int `toml:"n"`
	}
	for src, want := range map[string]string{
		"a = 1\nb = = 2\n":   "f.toml:2: ",
		"\n\nn = \"text\"\n": "f.toml:3: ",
		"a = [1,\n":          "f.toml:",
	} {
		_, err := Decode("f.toml", []byte(src), &v)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want prefix %q on one line", src, err, want)
		}
	}
}

func TestUnknownEarliestLine(t *testing.T) {
	var v struct {
		A int `toml:"a"`
	}
	md, err := Decode("f.toml", []byte("a = 1\nzz = 2\nbb = 3\n"), &v)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{"zz": 2, "bb": 3}
	err = UnknownError("f.toml", md, nil, func(k toml.Key) int { return lines[k[0]] })
	if err == nil || err.Error() != `f.toml:2: unknown key "zz"` {
		t.Fatalf("got %v", err)
	}
}

func TestReadFileBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.toml")
	if err := os.WriteFile(p, make([]byte, MaxSize+10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(nil, p); err == nil || !strings.Contains(err.Error(), "larger than 4 MiB") {
		t.Fatalf("got %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("a = {b = [1, {c = 2}]}\n[t.u]\nv = '''x'''\n"))
	f.Add([]byte(strings.Repeat("[", 100)))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v map[string]any
		_, err := Decode("f.toml", data, &v)
		if err != nil && (!strings.HasPrefix(err.Error(), "f.toml") || strings.Contains(err.Error(), "\n")) {
			t.Fatalf("error not one line with the file: %q", err)
		}
	})
}

// A named pipe nobody writes to once hung every TOML read for good (matrix,
// rules, signatures, catalog); a device never ends. Both are refused.
func TestReadFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "m.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	for _, tt := range []struct {
		fsys fs.FS
		path string
		want string
	}{
		{nil, fifo, "m.toml: not a regular file (a named pipe): not read"},
		{os.DirFS(dir), "m.toml", "m.toml: not a regular file (a named pipe): not read"},
		{nil, "/dev/zero", "/dev/zero: not a regular file (a character device): not read"},
		{nil, dir, "not a regular file (a directory): not read"},
	} {
		_, err := ReadFile(tt.fsys, tt.path)
		if err == nil || !strings.HasSuffix(err.Error(), tt.want) {
			t.Errorf("ReadFile(%s): got %v, want ...%s", tt.path, err, tt.want)
		}
	}
}
