package cli

import (
	"bytes"
	"strings"
	"testing"
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
