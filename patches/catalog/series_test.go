package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseSeries(t *testing.T) {
	es, err := ParseSeries("s", []byte("# my stack\n\nfirst\n  second   # the fix\r\nthird\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(es)
	if want := "[{first 3} {second 4} {third 5}]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	for _, tt := range []struct{ in, want string }{
		{"a\na\n", "s:2: a is already in the series (line 1)"},
		{"a -p1\n", "s:1: one patch name a line"},
		{"A\n", `s:1: "A" is not a patch name`},
		{"../x\n", `s:1: "../x" is not a patch name`},
		{"a\nb\x1b[2J\n", "s:2: control character U+001B"},
		{"a\x00\n", "s:1: control character U+0000"},
		{"\xff\n", "s:1: control character U+FFFD"},
		{strings.Repeat("x", MaxSeriesSize+1), "s: larger than 64 KiB"},
		{seriesOf(MaxPatches + 1), fmt.Sprintf("s:%d: more than %d patches", MaxPatches+1, MaxPatches)},
	} {
		_, err := ParseSeries("s", []byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: err = %v, want one line containing %q", tt.in, err, tt.want)
		}
	}
}

func seriesOf(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "p%d\n", i)
	}
	return b.String()
}

// FuzzParseSeries: any bytes give names that are patch names, each once,
// at increasing lines, or one error line naming the file.
func FuzzParseSeries(f *testing.F) {
	f.Add([]byte("a\nb # c\n\n#x\n"))
	f.Add([]byte("a\r\nb\r\n"))
	f.Add([]byte("a b\n"))
	f.Add([]byte("\x1b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := ParseSeries("s", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "s:") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: not one line naming the file", err)
			}
			return
		}
		seen, last := map[string]bool{}, 0
		for _, e := range es {
			if !ValidName(e.Name) || seen[e.Name] || e.Line <= last {
				t.Fatalf("entry %+v (after line %d)", e, last)
			}
			seen[e.Name], last = true, e.Line
		}
	})
}

// writeCat writes a catalog directory: files by slash path.
func writeCat(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cat")
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func entry(name, extra string) string {
	return fmt.Sprintf("name = %q\nproject = \"sglang\"\n%s\n[[variant]]\ndiffs = [\"d/%s.diff\"]\n", name, extra, name)
}

func TestSeries(t *testing.T) {
	dir := writeCat(t, map[string]string{
		"a.toml": entry("a", ""), "d/a.diff": testDiff,
		"b.toml": entry("b", `needs = ["c"]`), "d/b.diff": testDiff,
		"c.toml": entry("c", ""), "d/c.diff": testDiff,
		"series": "# applied in this order\nb\na\n",
	})
	c, err := New(nil, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	ss := c.Series()
	if len(ss) != 1 || ss[0].File != dir+"/series" || len(ss[0].Patches) != 2 {
		t.Fatalf("series %+v", ss)
	}
	set, needed, err := c.SeriesSet()
	if err != nil {
		t.Fatal(err)
	}
	if got := names(set); got != "c b a" {
		t.Fatalf("set %s, want c b a (c is needed by b)", got)
	}
	if got := names(needed); got != "c" {
		t.Fatalf("needed %s", got)
	}

	// Order keys, when the directory has no series file.
	dir2 := writeCat(t, map[string]string{
		"x.toml": entry("x", "order = 20"), "d/x.diff": testDiff,
		"y.toml": entry("y", "order = 10"), "d/y.diff": testDiff,
		"z.toml": entry("z", ""), "d/z.diff": testDiff,
	})
	c, err = New(nil, []string{dir2, dir})
	if err != nil {
		t.Fatal(err)
	}
	set, _, err = c.SeriesSet()
	if err != nil {
		t.Fatal(err)
	}
	if got := names(set); got != "c y x b a" {
		t.Fatalf("set %s, want c y x b a (what they need first, then the directories in order)", got)
	}

	// No series anywhere: the error lists the names.
	c, err = New(nil, []string{writeCat(t, map[string]string{"a.toml": entry("a", ""), "d/a.diff": testDiff})})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.SeriesSet(); err == nil || !strings.Contains(err.Error(), "name one or more of: a") {
		t.Fatalf("err = %v", err)
	}
}

func names(ps []*Patch) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return strings.Join(out, " ")
}

func TestSeriesErrors(t *testing.T) {
	base := map[string]string{"a.toml": entry("a", ""), "d/a.diff": testDiff}
	with := func(more map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range more {
			m[k] = v
		}
		return m
	}
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"unknown name", with(map[string]string{"series": "a\nsm120-fusion\n"}), "/cat/series:2: sm120-fusion is not a patch of "},
		{"series and order", with(map[string]string{"b.toml": entry("b", "order = 3"), "d/b.diff": testDiff, "series": "a\n"}), "/cat/b.toml:3: order = 3, but "},
		{"same order", with(map[string]string{"a.toml": entry("a", "order = 1"), "b.toml": entry("b", "order = 1"), "d/b.diff": testDiff}), "/cat/b.toml:3: order = 1 is also a's ("},
		{"empty series", with(map[string]string{"series": "# nothing\n"}), "/cat/series: names no patch"},
		{"series is a directory", with(map[string]string{"series/x": "a"}), "/cat/series: not a regular file (a directory): not read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(nil, []string{writeCat(t, tt.files)})
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line containing %q", err, tt.want)
			}
		})
	}
}

// TestHostileDirectory: a catalog directory's files are regular files
// inside it; a symlink, a named pipe, a directory in place of a file and a
// directory of too many entries are refused in one line, quickly.
func TestHostileDirectory(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.diff"), []byte(testDiff), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "b.toml"), []byte(entry("b", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		setup func(dir string) error
		want  string
	}{
		{"toml symlink out", func(dir string) error {
			return os.Symlink(filepath.Join(outside, "b.toml"), filepath.Join(dir, "b.toml"))
		}, "/cat/b.toml: a symbolic link: not read"},
		{"toml symlink in", func(dir string) error { return os.Symlink("a.toml", filepath.Join(dir, "b.toml")) }, "/cat/b.toml: a symbolic link: not read"},
		{"diff symlink out", func(dir string) error {
			if err := os.Remove(filepath.Join(dir, "d/a.diff")); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(outside, "secret.diff"), filepath.Join(dir, "d/a.diff"))
		}, "/cat/a.toml:5: variant \"any\": diff "},
		{"diff directory symlink out", func(dir string) error {
			if err := os.RemoveAll(filepath.Join(dir, "d")); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(outside, "a.diff"), []byte(testDiff), 0o644); err != nil {
				return err
			}
			return os.Symlink(outside, filepath.Join(dir, "d"))
		}, "/cat/d/a.diff: d is a symbolic link: not read"},
		{"toml fifo", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "b.toml"), 0o644) }, "/cat/b.toml: not a regular file (a named pipe): not read"},
		{"series fifo", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "series"), 0o644) }, "/cat/series: not a regular file (a named pipe): not read"},
		{"toml directory", func(dir string) error { return os.Mkdir(filepath.Join(dir, "b.toml"), 0o755) }, "/cat/b.toml: not a regular file (a directory): not read"},
		{"series symlink", func(dir string) error { return os.Symlink("/dev/zero", filepath.Join(dir, "series")) }, "/cat/series: a symbolic link: not read"},
		{"too many entries", func(dir string) error {
			for i := range MaxDirEntries + 1 {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
					return err
				}
			}
			return nil
		}, fmt.Sprintf("more than %d entries: not a catalog directory", MaxDirEntries)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeCat(t, map[string]string{"a.toml": entry("a", ""), "d/a.diff": testDiff})
			if err := tt.setup(dir); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err := New(nil, []string{dir})
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line containing %q", err, tt.want)
			}
			t.Log(err)
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

// TestCatalogBudget: the files of one directory add up to at most
// MaxCatalogBytes.
func TestCatalogBudget(t *testing.T) {
	big := testDiff + strings.Repeat(" _is_sm90_supported = is_sm90()\n", 0)
	files := map[string]string{}
	// Each diff just under MaxDiffSize, enough of them to pass the budget.
	pad := strings.Repeat("x", MaxDiffSize-len(big)-100)
	n := MaxCatalogBytes/MaxDiffSize + 1
	for i := range n {
		name := fmt.Sprintf("p%d", i)
		files[name+".toml"] = entry(name, "")
		files["d/"+name+".diff"] = "# " + pad + "\n" + big
	}
	_, err := New(nil, []string{writeCat(t, files)})
	if err == nil || !strings.Contains(err.Error(), "holds more than 64 MiB of patch files") {
		t.Fatalf("err = %v", err)
	}
}

// TestNameClash: two directories with one name say both files, with lines.
func TestNameClash(t *testing.T) {
	a := writeCat(t, map[string]string{"a.toml": entry("a", ""), "d/a.diff": testDiff})
	b := writeCat(t, map[string]string{"a.toml": "# the other one\n" + entry("a", ""), "d/a.diff": testDiff})
	_, err := New(nil, []string{a, b})
	want := fmt.Sprintf("%s/a.toml:2: patch \"a\" is also defined in %s/a.toml:1", b, a)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}
