package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/internal/textdist"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Usage errors in one line: what was wrong, the command it was given to,
// what was probably meant, and where the help is. Exit 2.

// GroupArgs is the Args of a command that only groups others (smpatch,
// matrix, image): an argument is a misspelt subcommand.
func GroupArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + orList(s) + "?"
	}
	return withCode(exitUsage, fmt.Errorf("%s (run '%s --help')", msg, c.CommandPath()))
}

// argsError rewords cobra's argument-count errors.
func argsError(c *cobra.Command, args []string, err error) error {
	if codeOf(err) == exitUsage {
		return err // already ours (GroupArgs)
	}
	s := err.Error()
	want := strings.TrimSpace(strings.TrimPrefix(c.Use, c.Name()))
	var n, got int
	var msg string
	switch {
	case strings.HasPrefix(s, "unknown command"):
		msg = fmt.Sprintf("takes no arguments (got %q)", args[0])
	case strings.Contains(s, "only received") || strings.HasSuffix(s, "received 0"):
		msg = "missing argument: usage: " + c.CommandPath() + " " + want
	case sscanf(s, "accepts %d arg(s), received %d", &n, &got) && got > n:
		msg = fmt.Sprintf("too many arguments (%d given, %d wanted): usage: %s %s", got, n, c.CommandPath(), want)
	default:
		msg = s
	}
	return withCode(exitUsage, fmt.Errorf("%s: %s (run '%s --help')", cmdName(c), msg, c.CommandPath()))
}

func sscanf(s, format string, args ...any) bool {
	k, err := fmt.Sscanf(s, format, args...)
	return err == nil && k == len(args)
}

// flagError rewords pflag's errors: the command, the flag, the nearest
// flag the command has, and the help.
func flagError(c *cobra.Command, err error) error {
	s := err.Error()
	name := ""
	switch {
	case strings.HasPrefix(s, "unknown flag: "):
		name = strings.TrimPrefix(s, "unknown flag: ")
		s = "unknown flag " + name
	case strings.HasPrefix(s, "unknown shorthand flag: "):
		// unknown shorthand flag: 'x' in -x
		if i := strings.Index(s, "'"); i >= 0 && len(s) > i+1 {
			name = "-" + s[i+1:i+2]
			s = "unknown flag " + name
		}
	case strings.HasPrefix(s, "flag needs an argument: "):
		rest := strings.TrimPrefix(s, "flag needs an argument: ")
		if strings.HasPrefix(rest, "'") && len(rest) > 1 {
			rest = "-" + rest[1:2]
		}
		s = "flag " + rest + " needs a value"
	}
	if name != "" {
		if near := nearestFlags(c, name); len(near) > 0 {
			s += "; did you mean " + orList(near) + "?"
		}
	}
	where := cmdName(c)
	if c == c.Root() {
		return withCode(exitUsage, fmt.Errorf("%s (run '%s --help')", s, c.CommandPath()))
	}
	return withCode(exitUsage, fmt.Errorf("%s: %s (run '%s --help')", where, s, c.CommandPath()))
}

// nearestFlags are the command's flags within edit distance 2 of name
// (or with it as a prefix).
func nearestFlags(c *cobra.Command, name string) []string {
	typed := strings.TrimLeft(name, "-")
	if typed == "" || strings.HasPrefix(name, "-") && !strings.HasPrefix(name, "--") {
		return nil
	}
	if i := strings.IndexByte(typed, '='); i >= 0 {
		typed = typed[:i]
	}
	var out []string
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		if d := textdist.Distance(typed, f.Name); d <= 2 || (len(typed) >= 3 && strings.HasPrefix(f.Name, typed)) {
			seen[f.Name] = true
			out = append(out, "--"+f.Name)
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	sort.Strings(out)
	return out
}

func orList(s []string) string {
	q := s
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
