package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// cobra's completion command is built for the command lines that list or
// run it, and left out when another command runs.
func TestSkipDefaultCompletion(t *testing.T) {
	for _, c := range []struct {
		args []string
		skip bool
	}{
		{nil, false},
		{[]string{"--help"}, false},
		{[]string{"--version"}, false},
		{[]string{"help"}, false},
		{[]string{"help", "apply"}, false},
		{[]string{"completion", "bash"}, false},
		{[]string{"__complete", "completion", ""}, false},
		{[]string{"__complete", "ap"}, false},
		{[]string{"nosuchcommand"}, false},
		{[]string{"apply", "sm120-fusion", "--repo", "x"}, true},
		{[]string{"--catalog", "d", "revert"}, true},
		{[]string{"journal", "trust"}, true},
	} {
		root := Lean.NewRoot(&Globals{}, &bytes.Buffer{}, &bytes.Buffer{})
		skipDefaultCompletion(root, c.args)
		if got := root.CompletionOptions.DisableDefaultCmd; got != c.skip {
			t.Errorf("%q: completion command left out = %v, want %v", c.args, got, c.skip)
		}
	}
}

// The commands smpatch links catch signals after SignalDelay; the ones
// smpatch-full adds (here: the stubs that hand them over) from their start.
func TestDeferredSignals(t *testing.T) {
	root := Lean.NewRoot(&Globals{}, &bytes.Buffer{}, &bytes.Buffer{})
	deferred := map[string]bool{}
	for _, c := range root.Commands() {
		deferred[c.Name()] = c.Annotations[deferredSignals] != ""
		for _, sub := range c.Commands() {
			if sub.Annotations[deferredSignals] != "" != deferred[c.Name()] {
				t.Errorf("%s %s: deferred %v, its parent %v", c.Name(), sub.Name(), !deferred[c.Name()], deferred[c.Name()])
			}
		}
	}
	for _, n := range strings.Fields("list show apply revert status probe journal version") {
		if !deferred[n] {
			t.Errorf("%s catches signals at once, want after %v", n, SignalDelay)
		}
	}
	for _, d := range Delegated {
		if deferred[d.Name] {
			t.Errorf("%s (smpatch-full's) catches signals after a delay", d.Name)
		}
	}
}

// A command line whose first word is a command of this package builds
// that command alone; its help and usage errors read as with the whole
// tree.
func TestOnlyCommandTree(t *testing.T) {
	if got := Lean.onlyCommand([]string{"apply", "x"}); got != "apply" {
		t.Errorf("onlyCommand(apply x) = %q", got)
	}
	for _, args := range [][]string{nil, {"--catalog", "d", "apply"}, {"help", "apply"}, {"check"}, {"__complete", "apply", ""}, {"completion", "bash"}} {
		if got := Lean.onlyCommand(args); got != "" {
			t.Errorf("onlyCommand(%q) = %q, want the whole tree", args, got)
		}
	}
	full := Program{Name: "smpatch", Commands: func(*Globals) []*cobra.Command { return nil }}
	if got := full.onlyCommand([]string{"apply"}); got != "" {
		t.Errorf("smpatch-full builds one command: %q", got)
	}
	for _, lc := range leanCommands {
		for _, args := range [][]string{{lc.name, "--help"}, {lc.name, "--no-such-flag"}} {
			var outs [2]string
			for i, only := range []string{"", lc.name} {
				var stdout, stderr bytes.Buffer
				root := Lean.newRoot(&Globals{args: args}, &stdout, &stderr, only)
				root.SetArgs(args)
				err := root.Execute()
				outs[i] = fmt.Sprintf("%s\n--\n%s\n--\n%v", stdout.String(), stderr.String(), err)
			}
			if outs[0] != outs[1] {
				t.Errorf("%q: the command alone reads\n%s\nthe whole tree\n%s", args, outs[1], outs[0])
			}
		}
	}
}
