package catalog

import (
	"bytes"
	"fmt"
	"regexp"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// VerifyRule is a post-condition on a file a patch leaves: the file
// contains (or no longer contains) a text, or matches (or no longer
// matches) a regular expression. A rule with When applies only where the
// file matches When: the upstream code the rule is about is there. What
// says in words what the rule checks ("the fusion gate admits SM12x").
//
// A rule with a positive check (Contains or Regex) also recognises a
// change already made by other means: when a hunk's added lines satisfy
// the check and its removed lines do not, the rule proves that hunk, and a
// file that satisfies every rule proving a hunk already carries it (Proves,
// Carries).
type VerifyRule struct {
	File        string // repository-relative
	What        string
	When        string // a regular expression; "" applies everywhere the file is
	Contains    string
	NotContains string
	Regex       string
	NotRegex    string

	when, re, notRe *regexp.Regexp // compiled when the catalog loads
}

// compiled returns a rule's expression, compiling one a rule made by hand
// carries only as text (each time: rules are read from many goroutines);
// nil when there is none or it does not compile.
func compiled(re **regexp.Regexp, src string) *regexp.Regexp {
	if *re == nil && src != "" {
		c, _ := lazyre.Compile(src)
		return c
	}
	return *re
}

// Applies reports whether the rule is about file bytes b: b matches When,
// or the rule has no When.
func (r *VerifyRule) Applies(b []byte) bool {
	if r.When == "" {
		return true
	}
	re := compiled(&r.when, r.When)
	return re != nil && re.Match(b)
}

// Fails says how b breaks the rule ("" when it holds, or when the rule does
// not apply to b).
func (r *VerifyRule) Fails(b []byte) string {
	if !r.Applies(b) {
		return ""
	}
	switch {
	case r.Contains != "" && !bytes.Contains(b, []byte(r.Contains)):
		return fmt.Sprintf("does not contain %q", r.Contains)
	case r.NotContains != "" && bytes.Contains(b, []byte(r.NotContains)):
		return fmt.Sprintf("still contains %q", r.NotContains)
	case r.Regex != "" && !matches(compiled(&r.re, r.Regex), b):
		if r.What != "" {
			return "no match for its regex" // the words say it; the expression only obscures
		}
		return fmt.Sprintf("does not match %q", r.Regex)
	case r.NotRegex != "" && matches(compiled(&r.notRe, r.NotRegex), b):
		if r.What != "" {
			return "its not_regex still matches"
		}
		return fmt.Sprintf("still matches %q", r.NotRegex)
	}
	return ""
}

func matches(re *regexp.Regexp, b []byte) bool { return re != nil && re.Match(b) }

// positive reports whether the rule says what must be there (Contains or
// Regex), not only what must be gone.
func (r *VerifyRule) positive() bool { return r.Contains != "" || r.Regex != "" }

// satisfied reports whether b passes the rule's positive checks.
func (r *VerifyRule) satisfied(b []byte) bool {
	if r.Contains != "" && !bytes.Contains(b, []byte(r.Contains)) {
		return false
	}
	if r.Regex != "" && !matches(compiled(&r.re, r.Regex), b) {
		return false
	}
	return true
}

// Proves reports whether the rule is about the change from oldSide to
// newSide (a hunk's lines without and with its change): its positive check
// holds on the new side and not on the old one.
func (r *VerifyRule) Proves(oldSide, newSide []byte) bool {
	return r.positive() && r.satisfied(newSide) && !r.satisfied(oldSide)
}

// Carries reports whether b already has what the rule asks for, in its
// own right: the rule applies to b, its positive checks hold and its
// negative ones too. A rule without a positive check never carries
// anything: that a text is gone says nothing about what replaced it.
func (r *VerifyRule) Carries(b []byte) bool {
	return r.positive() && r.Applies(b) && r.Fails(b) == ""
}

// Where is the 1-based line of b where the rule's positive check is
// satisfied first (0 when it is not).
func (r *VerifyRule) Where(b []byte) int {
	i := -1
	if r.Contains != "" {
		i = bytes.Index(b, []byte(r.Contains))
	} else if re := compiled(&r.re, r.Regex); re != nil {
		if loc := re.FindIndex(b); loc != nil {
			i = loc[0]
		}
	}
	if i < 0 {
		return 0
	}
	return 1 + bytes.Count(b[:i], []byte("\n"))
}

// Title is the rule for people: What, else the file and its check.
func (r *VerifyRule) Title() string {
	if r.What != "" {
		return r.What
	}
	switch {
	case r.Contains != "":
		return fmt.Sprintf("%s contains %q", r.File, r.Contains)
	case r.NotContains != "":
		return fmt.Sprintf("%s does not contain %q", r.File, r.NotContains)
	case r.Regex != "":
		return fmt.Sprintf("%s matches %q", r.File, r.Regex)
	}
	return fmt.Sprintf("%s does not match %q", r.File, r.NotRegex)
}
