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
		// unknown shorthand flag: 'x' in -x; a long flag with one dash
		// (-repo) is read as shorthands: say which long flag it was.
		if i := strings.Index(s, "'"); i >= 0 && len(s) > i+1 {
			letter := s[i+1]
			name = "-" + string(letter)
			s = "unknown flag " + name
			if _, word, ok := strings.Cut(err.Error(), " in -"); ok && len(word) > 1 && word[0] == letter {
				word, _, _ = strings.Cut(word, "=")
				s = "unknown flag -" + word
				name = "--" + word
			}
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
	type near struct {
		name   string
		prefix bool // the typed text starts the flag's name
		d      int
	}
	var found []near
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		d := textdist.Distance(typed, f.Name)
		prefix := len(typed) >= 3 && strings.HasPrefix(f.Name, typed)
		if d <= 2 || prefix {
			seen[f.Name] = true
			found = append(found, near{f.Name, prefix, d})
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	// The likeliest first: a flag the typed text begins, then the nearest.
	sort.Slice(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if a.prefix != b.prefix {
			return a.prefix
		}
		if a.d != b.d {
			return a.d < b.d
		}
		return a.name < b.name
	})
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = "--" + f.name
	}
	return out
}

func orList(s []string) string {
	q := s
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
