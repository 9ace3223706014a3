package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A README command: one line of a fenced block that starts with smpatch,
// make, cd, go or mkdir, and the exit code its comment promises.
type readmeCommand struct {
	line int
	text string
	exit int
}

// A README block: the commands of one fenced block, or why it is skipped.
type readmeBlock struct {
	line     int
	commands []readmeCommand
	skip     string
}

// readmeDryMake are the make targets the walker checks with make -n.
var readmeDryMake = map[string]bool{
	"test": true, "test-crash": true, "test-hostile": true, "bench": true, "fuzz": true, "install": true,
}

var (
	readmeExitRe = regexp.MustCompile(`\bexit (\d+)\b`)
	readmeSkipRe = regexp.MustCompile(`^<!-- readme-test: skip (.+) -->$`)
)

// readmeBlocks reads the command blocks of a Markdown file: fenced blocks
// without a language whose lines start with a command (after an optional
// "$ "). Lines ending in a backslash continue on the next line. A block
// right after "<!-- readme-test: skip REASON -->" is skipped with REASON.
func readmeBlocks(path string) ([]readmeBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []readmeBlock
	var cur *readmeBlock
	skip := ""
	pending, pendingLine := "", 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur == nil {
			if m := readmeSkipRe.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				skip = m[1]
				continue
			}
			if line == "```" {
				cur = &readmeBlock{line: n, skip: skip}
				skip = ""
			} else if strings.HasPrefix(line, "```") {
				// A block with a language (toml, json, ...) is not commands;
				// read past it.
				for sc.Scan() {
					n++
					if sc.Text() == "```" {
						break
					}
				}
			} else if strings.TrimSpace(line) != "" {
				skip = ""
			}
			continue
		}
		if line == "```" {
			if len(cur.commands) > 0 {
				blocks = append(blocks, *cur)
			}
			cur = nil
			continue
		}
		if pending != "" {
			pending += " " + strings.TrimSpace(line)
		} else {
			text := strings.TrimPrefix(line, "$ ")
			first, _, _ := strings.Cut(text, " ")
			switch first {
			case "smpatch", "make", "cd", "go", "mkdir":
			default:
				continue
			}
			pending, pendingLine = text, n
		}
		if strings.HasSuffix(pending, "\\") {
			pending = strings.TrimSuffix(pending, "\\")
			continue
		}
		cmd, comment, _ := strings.Cut(pending, " #")
		c := readmeCommand{line: pendingLine, text: strings.TrimSpace(cmd)}
		if m := readmeExitRe.FindStringSubmatch(comment); m != nil {
			c.exit, _ = strconv.Atoi(m[1])
		}
		cur.commands = append(cur.commands, c)
		pending = ""
	}
	return blocks, sc.Err()
}

// TestReadme runs every command block of README.md as written, from a copy
// of the repository, with this test binary as smpatch on PATH and the
// bundled sample tree as ~/src/sglang, and checks each command's exit code
// against the one its comment promises (0 when it promises none).
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("walks the README: slow")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("SKIP (no bash): the README's commands are shell lines")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmeBlocks(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) < 3 {
		t.Fatalf("README.md: %d command blocks found; the walker reads none of them?", len(blocks))
	}
	work := t.TempDir()
	repo := filepath.Join(work, "repo")
	if err := copyTree(root, repo); err != nil {
		t.Fatal(err)
	}
	// An empty HOME: the README's own commands make ~/src/sglang.
	home := filepath.Join(work, "home")
	bin := filepath.Join(work, "bin")
	for _, d := range []string{home, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	before, err := outsideOutSums(repo)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, "smpatch")); err != nil {
		t.Fatal(err)
	}
	env := walkEnv(work, home, bin)
	ran := 0
	for _, b := range blocks {
		if b.skip != "" {
			t.Logf("README.md:%d: skipped: %s", b.line, b.skip)
			continue
		}
		// One shell per block, so that cd carries to the next line.
		var script strings.Builder
		script.WriteString("cd " + strconv.Quote(repo) + " || exit 99\n")
		for _, c := range b.commands {
			cmd := c.text
			if f := strings.Fields(cmd); len(f) >= 2 && f[0] == "make" && readmeDryMake[f[1]] {
				// The suite itself, the benchmarks, the fuzzers and an
				// install into the user's GOPATH are not run from a test:
				// make -n checks the target exists and would run.
				cmd = "make -n " + strings.Join(f[1:], " ") + " >/dev/null"
			}
			fmt.Fprintf(&script, "echo '### README.md:%d: %s'\n%s\nrc=$?\nif [ $rc != %d ]; then echo \"### README.md:%d: exit $rc, the README promises %d\"; exit 98; fi\n",
				c.line, strings.ReplaceAll(c.text, "'", `'\''`), cmd, c.exit, c.line, c.exit)
			ran++
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
		cmd.WaitDelay = 5 * time.Second
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("README.md:%d: block failed (%v):\n%s", b.line, err, tail(string(out), 60))
		}
	}
	after, err := outsideOutSums(repo)
	if err != nil {
		t.Fatal(err)
	}
	for p, sum := range after {
		if before[p] != sum {
			t.Errorf("the README's commands changed the clone: %s", p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("the README's commands removed %s from the clone", p)
		}
	}
	t.Logf("%d README commands ran", ran)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// copyTree copies the regular files, directories and symlinks under src to
// dst, leaving out .git, bin and out.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() && (rel == ".git" || rel == "bin" || rel == "out" || rel == ".smpatch") {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, info.Mode().Perm())
		}
		return nil
	})
}

// TestReadmeCommandsTable checks the README's table of commands against the
// binary: every command it names exists, and every --flag a row shows is a
// flag of that command.
func TestReadmeCommandsTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	root := newRootCmd(&Globals{}, io.Discard, io.Discard)
	flagRe := regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	rows := 0
	for n, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `smpatch ") {
			continue
		}
		cells := strings.Split(line, "|")
		for _, usage := range regexp.MustCompile("`(smpatch [^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			rows++
			words := strings.Fields(usage[1])[1:]
			var path []string
			for _, w := range words {
				if w == strings.ToLower(w) && regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(w) {
					path = append(path, w)
					continue
				}
				break
			}
			c, rest, err := root.Find(path)
			if err != nil || len(rest) > 0 || c == root {
				t.Errorf("README.md:%d: %q names no command (%v)", n+1, usage[1], err)
				continue
			}
			for _, f := range flagRe.FindAllString(usage[1], -1) {
				name := strings.TrimPrefix(f, "--")
				if c.Flags().Lookup(name) == nil && c.InheritedFlags().Lookup(name) == nil && c.PersistentFlags().Lookup(name) == nil {
					t.Errorf("README.md:%d: %s has no flag %s", n+1, c.CommandPath(), f)
				}
			}
		}
	}
	if rows < 10 {
		t.Fatalf("README.md: %d command rows found; is the table still there?", rows)
	}
}

// walkEnv is the environment of a walk through the README or the help
// examples: HOME, caches and configuration of its own, bin first on PATH.
func walkEnv(work, home, bin string) []string {
	env := append(os.Environ(),
		"HOME="+home,
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SMPATCH_CATALOG=", "SMPATCH_REPO=",
		"XDG_CACHE_HOME="+filepath.Join(work, "cache"),
		"XDG_CONFIG_HOME="+filepath.Join(work, "config"),
		"XDG_STATE_HOME="+filepath.Join(work, "state"),
		"GORACE=atexit_sleep_ms=0",
		"NO_COLOR=1",
	)
	for _, v := range []string{"GOCACHE", "GOMODCACHE"} {
		if gc, err := exec.Command("go", "env", v).Output(); err == nil {
			env = append(env, v+"="+strings.TrimSpace(string(gc)))
		}
	}
	return env
}
