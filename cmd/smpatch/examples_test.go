package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
