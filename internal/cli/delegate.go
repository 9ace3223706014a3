package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/exit"
)

// The hand-over from smpatch to smpatch-full. smpatch links only what
// patching and inspecting a tree needs, so it starts in about the time of
// a bare Go program; the commands that need go-git's transports,
// Kubernetes, a registry client or the matrix runner live in
// smpatch-full. smpatch lists them (same name, same one-line help) and,
// when one is asked for, replaces itself with smpatch-full, the command
// line unchanged: exit code, signals and standard streams are
// smpatch-full's own.

// Delegated are the commands smpatch hands to smpatch-full, with the one
// line of help both programs list for them.
var Delegated = []struct{ Name, Short string }{
	{"check", "Check that every patch still applies upstream (read-only, for CI)"},
	{"checkout", "Fetch an upstream revision into the cache and write its work tree into DIR"},
	{"image", "Build images: a base image plus one reproducible patch layer (no Docker daemon)"},
	{"matrix", "Expand, render, build and run a TOML matrix of environment variants"},
	{"triage", "Name why an sglang server died: the first fatal known line of each log, its meaning and what to try"},
}

// Short is the one line of help of the delegated command name.
func Short(name string) string {
	for _, d := range Delegated {
		if d.Name == name {
			return d.Short
		}
	}
	panic("cli.Short: " + name + " is not a delegated command")
}

// delegatedFlags are flags that make a command of smpatch need
// smpatch-full: probe --image reads an image through the registry client.
var delegatedFlags = map[string]string{"probe": "image"}

// InvokedAsEnv names the environment variable smpatch sets for
// smpatch-full: the name its usage lines and messages go by.
const InvokedAsEnv = "SMPATCH_INVOKED_AS"

// fullAnnotation marks smpatch's stand-ins for the delegated commands.
const fullAnnotation = "smpatch-full"

// delegatedStubs are smpatch's stand-ins for the Delegated commands: listed
// in help and completion like the real ones, run by smpatch-full.
func delegatedStubs(g *Globals) []*cobra.Command {
	var out []*cobra.Command
	for _, d := range Delegated {
		out = append(out, &cobra.Command{
			Use:                d.Name,
			Short:              d.Short,
			Annotations:        map[string]string{fullAnnotation: "yes"},
			DisableFlagParsing: true,
			RunE:               func(c *cobra.Command, _ []string) error { return g.delegate(cmdName(c)) },
		})
	}
	return out
}

// handsOver is the command args name when smpatch hands it to
// smpatch-full: the command itself, its help (help CMD) or its shell
// completion (__complete CMD ...), global flags anywhere before it; ""
// when it runs here.
func handsOver(root *cobra.Command, args []string) string {
	a := args
	if len(a) > 0 {
		switch a[0] {
		case "help", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
			a = a[1:]
		}
	}
	c, _, err := root.Find(a)
	if err != nil {
		return ""
	}
	for ; c != nil; c = c.Parent() {
		if c.Annotations[fullAnnotation] != "" {
			return cmdName(c)
		}
	}
	return ""
}

// handOverFlag is delegate for a command given a flag that needs
// smpatch-full (probe --image); nil when c runs here.
func (g *Globals) handOverFlag(c *cobra.Command) func() error {
	if g.prog.Commands != nil {
		return nil
	}
	if f, ok := delegatedFlags[cmdName(c)]; ok && c.Flags().Changed(f) {
		return func() error { return g.delegate(cmdName(c) + " --" + f) }
	}
	return nil
}

// delegate replaces the process with smpatch-full, given the command line
// unchanged, for the command what; it returns only when smpatch-full
// cannot be started.
func (g *Globals) delegate(what string) error {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	if _, ok := os.LookupEnv(InvokedAsEnv); ok {
		// Handed over already: what ran as smpatch-full is this program,
		// and handing over again would never end.
		return exit.With(exit.Failure, fmt.Errorf("%s is run by smpatch-full, and %s, started as smpatch-full, is smpatch: install smpatch-full with `make install`, or `go install github.com/smpatch/smpatch/cmd/smpatch-full@latest`", what, self))
	}
	path, err := FindFull(self)
	if err != nil {
		return exit.With(exit.Failure, fmt.Errorf("%s is run by smpatch-full, and %w", what, err))
	}
	env := append(withoutEnv(os.Environ(), InvokedAsEnv), InvokedAsEnv+"="+g.prog.Name)
	err = syscall.Exec(path, append([]string{path}, g.args...), env)
	return exit.With(exit.Failure, fmt.Errorf("cannot run %s: %w", path, err))
}

// FullName is the name of smpatch-full beside an executable named base:
// "-full" after its "smpatch" prefix (smpatch-linux-amd64 has
// smpatch-full-linux-amd64 beside it); "" for another name.
func FullName(base string) string {
	rest, ok := strings.CutPrefix(base, "smpatch")
	if !ok {
		return ""
	}
	return "smpatch-full" + rest
}

// FindFull is smpatch-full for the smpatch at self: beside self's target
// (links resolved), else smpatch-full on PATH. Missing, the error is one
// line naming both places and how to install it.
func FindFull(self string) (string, error) {
	var beside string
	if real, err := filepath.EvalSymlinks(self); err == nil {
		self = real
	}
	if n := FullName(filepath.Base(self)); n != "" {
		beside = filepath.Join(filepath.Dir(self), n)
		if isExecutable(beside) {
			return beside, nil
		}
	}
	if p, err := exec.LookPath("smpatch-full"); err == nil {
		return filepath.Abs(p)
	}
	where := "smpatch-full on PATH"
	if beside != "" {
		where = beside + " or " + where
	}
	return "", errors.New("there is no " + where +
		": install both programs with `make install`, or `go install github.com/smpatch/smpatch/cmd/smpatch-full@latest`")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// withoutEnv is env without the variable name.
func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// InvokedAs is the name smpatch-full goes by: the one smpatch gave it in
// InvokedAsEnv (removed, so it passes to no command it runs), else def.
func InvokedAs(def string) string {
	n, ok := os.LookupEnv(InvokedAsEnv)
	if !ok {
		return def
	}
	os.Unsetenv(InvokedAsEnv)
	n = filepath.Base(strings.TrimSpace(n))
	if n == "" || n == "." || n == "/" || strings.ContainsFunc(n, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return def
	}
	return n
}
