package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestExamples: every command has an Examples section, and each of its
// command lines names that command (or one under it), parses with its
// flags and arguments, and names only example files that exist.
func TestExamples(t *testing.T) {
	root := newRootCmd(&Globals{}, io.Discard, io.Discard)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Hidden || c == root || c.Name() == "help" || c.Name() == "completion" || c.HasParent() && c.Parent().Name() == "completion" {
			return
		}
		lines := exampleLines(c.Example)
		if len(lines) == 0 {
			t.Errorf("%s: no Examples", c.CommandPath())
		}
		for _, l := range lines {
			checkExample(t, c, l)
		}
	}
	walk(root)
	if !strings.Contains(root.Long, "docs/") || !strings.Contains(root.Long, "smpatch help COMMAND") {
		t.Errorf("root help does not point to the docs and smpatch help COMMAND:\n%s", root.Long)
	}
}

func checkExample(t *testing.T, c *cobra.Command, line string) {
	t.Helper()
	args := strings.Fields(line)[1:]
	// Each example gets a fresh tree: flags keep values between parses.
	root := newRootCmd(&Globals{}, io.Discard, io.Discard)
	found, rest, err := root.Find(args)
	if err != nil {
		t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
		return
	}
	if !strings.HasPrefix(found.CommandPath(), c.CommandPath()) {
		t.Errorf("%s: example %q runs %s", c.CommandPath(), line, found.CommandPath())
	}
	if err := found.ParseFlags(rest); err != nil {
		t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
		return
	}
	if found.Args != nil {
		if err := found.Args(found, found.Flags().Args()); err != nil {
			t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
		}
	}
	paths := found.Flags().Args()
	found.Flags().Visit(func(f *pflag.Flag) { paths = append(paths, f.Value.String()) })
	for _, a := range paths {
		if strings.HasPrefix(a, "examples/") {
			if _, err := os.Stat(filepath.Join("..", "..", a)); err != nil {
				t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
			}
		}
	}
}

// exampleLines are the command lines of an Example, comments removed.
func exampleLines(ex string) []string {
	var out []string
	for _, l := range strings.Split(ex, "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, "  #"); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		if strings.HasPrefix(l, "smpatch ") {
			out = append(out, l)
		}
	}
	return out
}

// An example line: the command and its comment.
type exampleLine struct {
	cmd, comment string
}

var (
	exampleAfterRe = regexp.MustCompile(`\bafter make (demo-image|demo-matrix)\b`)
	exampleAfterGo = regexp.MustCompile(`\bafter (go run \./examples/[a-z-]+ [~/a-z-]+)`)
	exampleNeedsRe = regexp.MustCompile(`\bneeds (.+)$`)
	exampleExitRe  = regexp.MustCompile(`\bexit (\d+)\b`)
)

func exampleLinesWithComments(ex string) []exampleLine {
	var out []exampleLine
	for _, l := range strings.Split(ex, "\n") {
		l = strings.TrimSpace(l)
		cmd, comment, _ := strings.Cut(l, "  #")
		if cmd = strings.TrimSpace(cmd); strings.HasPrefix(cmd, "smpatch ") {
			out = append(out, exampleLine{cmd, strings.TrimSpace(comment)})
		}
	}
	return out
}

// TestExamplesRun runs every --help example verbatim, in exampleOrder, as a
// new user would from the root of a fresh clone (a copy of this one, with
// an empty HOME): first exampleSetup, then each example that needs nothing
// a fresh clone lacks, after the demo its comment names; each must end
// with the exit code its comment gives (0 when none). The clone must be
// unchanged at the end, out/ aside.
func TestExamplesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every help example: slow")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("SKIP (no bash): the examples are shell lines")
	}
	for name := range examples {
		if !slices.Contains(exampleOrder, name) {
			t.Fatalf("examples[%q] is not in exampleOrder", name)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	repo := filepath.Join(work, "repo")
	if err := copyTree(root, repo); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(work, "home")
	bin := filepath.Join(work, "bin")
	for _, d := range []string{home, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	smpatch := filepath.Join(bin, "smpatch")
	// A script, not a link: the demos resolve their smpatch with realpath,
	// and this binary is smpatch only under that name.
	wrapper := "#!/usr/bin/env bash\nexec -a smpatch " + strconv.Quote(self) + " \"$@\"\n"
	if err := os.WriteFile(smpatch, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	env := walkEnv(work, home, bin)
	before, err := outsideOutSums(repo)
	if err != nil {
		t.Fatal(err)
	}
	sh := func(line string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Dir, cmd.Env, cmd.WaitDelay = repo, env, 5*time.Second
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &ee) && ctx.Err() == nil:
			return string(out), ee.ExitCode()
		default:
			return fmt.Sprintf("%s\n%v", out, err), -1
		}
	}
	if out, rc := sh(exampleSetup); rc != 0 {
		t.Fatalf("%s: exit %d:\n%s", exampleSetup, rc, out)
	}
	demos := map[string]bool{}
	ran, skipped := 0, 0
	for _, name := range exampleOrder {
		for _, ex := range exampleLinesWithComments(examples[name]) {
			if m := exampleNeedsRe.FindStringSubmatch(ex.comment); m != nil {
				t.Logf("%s: %q: not run: needs %s", name, ex.cmd, m[1])
				skipped++
				continue
			}
			if m := exampleAfterRe.FindStringSubmatch(ex.comment); m != nil && !demos[m[1]] {
				demos[m[1]] = true
				if out, rc := sh("examples/" + m[1] + ".sh " + smpatch); rc != 0 {
					t.Fatalf("make %s, for %q: exit %d:\n%s", m[1], ex.cmd, rc, tail(out, 40))
				}
			}
			if m := exampleAfterGo.FindStringSubmatch(ex.comment); m != nil && !demos[m[1]] {
				demos[m[1]] = true
				if out, rc := sh(m[1]); rc != 0 {
					t.Fatalf("%s, for %q: exit %d:\n%s", m[1], ex.cmd, rc, tail(out, 40))
				}
			}
			want := 0
			if m := exampleExitRe.FindStringSubmatch(ex.comment); m != nil {
				want, _ = strconv.Atoi(m[1])
			}
			out, rc := sh(ex.cmd)
			if rc != want {
				t.Errorf("smpatch %s --help: %q: exit %d, the example promises %d:\n%s", name, ex.cmd, rc, want, tail(out, 30))
			}
			ran++
		}
	}
	after, err := outsideOutSums(repo)
	if err != nil {
		t.Fatal(err)
	}
	for p, sum := range after {
		if before[p] != sum {
			t.Errorf("the examples changed the clone: %s", p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("the examples removed %s from the clone", p)
		}
	}
	t.Logf("%d help examples ran, %d need what a fresh clone lacks", ran, skipped)
	if ran < 30 {
		t.Errorf("only %d examples ran", ran)
	}
}

// outsideOutSums is the sha256 of every file under dir, out/ and bin/
// left out: where examples and make targets may write (both ignored by git).
func outsideOutSums(dir string) (map[string]string, error) {
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && (rel == "out" || rel == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil && d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		h := sha256.Sum256(b)
		sums[rel] = hex.EncodeToString(h[:]) + d.Type().String()
		return nil
	})
	return sums, err
}
