package author

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/smpatch/smpatch/source"
)

// verRange is the version a change was made on and the range its variant
// gets.
type verRange struct {
	Ver  string // the version, PEP 440 text; "" when unknown
	From string // where it was read ("python/sglang/version.py:3", "tag v0.5.14 (+3 commits)"), or why it is unknown
	// Name is the variant's name, Range its versions ("" for any).
	Name, Range string
	// Comment goes into the entry's header; Note, when set, is said to
	// the user (the range is unknown).
	Comment, Note string
}

var lowerBound = regexp.MustCompile(`^(?:>=|==|~=)\s*([^\s,<>=!~]+)`)

// versionOf reads t's version: a version literal, else the nearest
// version tag reachable from its commit (a checkout, a git revision), at
// most source.MaxTagDistance commits back.
func versionOf(ctx context.Context, t source.Tree) (ver, from string) {
	v, from, err := t.Version(ctx)
	if err != nil {
		return "", err.Error()
	}
	if v == nil {
		return "", from
	}
	return source.VersionString(v), from
}

// rangeOf is the variant's name and range for a change made on version
// ver (read from from; "" when unknown), or the range given (--versions),
// which is checked as the catalog checks one. what names the tree or the
// parent commit in the entry's comment.
func rangeOf(ver, from, given, what string) (*verRange, error) {
	from = strings.TrimPrefix(from, "unknown: ")
	r := &verRange{Ver: ver, From: from, Name: variantName(ver)}
	if given != "" {
		given = strings.TrimSpace(given)
		if _, err := source.ParseConstraints(given); err != nil {
			return nil, inputf("--versions %q: %v (a range as the catalog writes one: \">= 0.5.14\", \">= 0.5.14, < 0.5.16\")", given, err)
		}
		r.Range = given
		if ver == "" {
			if m := lowerBound.FindStringSubmatch(given); m != nil {
				r.Name = variantName(m[1])
			}
		}
		r.Comment = fmt.Sprintf("versions %s: given with --versions", given)
		if ver != "" {
			r.Comment += fmt.Sprintf(" (%s is at %s, from %s)", what, ver, from)
		}
		return r, nil
	}
	if ver == "" {
		r.Note = fmt.Sprintf("version unknown (%s): the variant has no range and is tried on every release; give --versions RANGE", orElse(from, "no version read"))
		r.Comment = "version of " + what + " unknown (" + orElse(from, "no version read") + "): no range"
		return r, nil
	}
	r.Range = ">= " + ver
	r.Comment = fmt.Sprintf("versions %s: %s is at %s, from %s", r.Range, what, ver, from)
	return r, nil
}
