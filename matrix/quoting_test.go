package matrix

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostileValue broke the $'...' quoting once written for words with
// control characters: under zh_TW.BIG5 the lead byte of U+4861's UTF-8
// form paired with the backslash of \', the quote ended early and the
// rest ran as a command.
const hostileValue = "\t\u4861'; touch PWNED; #"

// TestRenderedScriptUnderMultibyteLocales renders a matrix whose env
// preset and launch command carry hostileValue and runs the cell's run.sh
// under C, C.UTF-8 and, where localedef can build them, zh_TW.BIG5,
// zh_CN.GBK and ja_JP.SJIS: the command gets its arguments and
// environment byte for byte, and nothing else runs.
func TestRenderedScriptUnderMultibyteLocales(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	work := t.TempDir()
	dump := filepath.Join(work, "dump")
	os.WriteFile(dump, []byte("#!/bin/sh\nprintf '%s\\0' \"$@\" \"$V\" > \"$DUMP_TO\"\n"), 0o755)
	src := "name = \"q\"\n[axes]\nenv = [\"evil\"]\n[presets.env.evil]\nV = \"\\t\u4861'; touch PWNED; #\"\n" +
		"[launch]\ncommand = [\"" + dump + "\", \"\\t\u4861'; touch PWNED; #\", \"$(touch PWNED)\"]\n"
	m, err := Parse(filepath.Join(work, "m.toml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Expand(ExpandOptions{NoDefaultRules: true})
	if err != nil {
		t.Fatal(err)
	}
	files, err := Render(x, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(work, "out")
	if err := WriteRender(out, files); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(files["evil/run.sh"]), "$'") {
		t.Errorf("run.sh uses $'...':\n%s", files["evil/run.sh"])
	}
	locpath := t.TempDir()
	locales := []string{"C", "C.UTF-8"}
	if localedef, err := exec.LookPath("localedef"); err == nil {
		for _, l := range [][3]string{{"zh_TW.BIG5", "zh_TW", "BIG5"}, {"zh_CN.GBK", "zh_CN", "GBK"}, {"ja_JP.SJIS", "ja_JP", "SHIFT_JIS"}} {
			if exec.Command(localedef, "--no-warnings=ascii", "-i", l[1], "-f", l[2], filepath.Join(locpath, l[0])).Run() == nil {
				locales = append(locales, l[0])
			}
		}
	}
	if len(locales) == 2 {
		t.Log("no multi-byte locale could be built; internal/shell's model stands in")
	}
	for _, loc := range locales {
		got := filepath.Join(work, "got-"+loc)
		cmd := exec.Command(bash, filepath.Join(out, "evil", "run.sh"))
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=" + loc, "LOCPATH=" + locpath, "DUMP_TO=" + got}
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", loc, err, b)
			continue
		}
		if _, err := os.Stat(filepath.Join(work, "PWNED")); err == nil {
			t.Fatalf("%s: a value ran as a command", loc)
		}
		b, _ := os.ReadFile(got)
		want := hostileValue + "\x00$(touch PWNED)\x00" + hostileValue + "\x00"
		if string(b) != want {
			t.Errorf("%s: the command got %q, want %q", loc, b, want)
		}
	}
}
