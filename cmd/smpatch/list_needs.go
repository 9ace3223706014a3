package main

import (
	"strings"

	"github.com/smpatch/smpatch/patches"
)

// uncoveredJSON is a patch's uncovered shapes as lines for people (JSON
// arrays, never null).
func uncoveredJSON(p *patches.Patch) []string {
	out := []string{}
	for _, u := range p.Uncovered {
		out = append(out, u.String())
	}
	return out
}

// needsText is the NEEDS column of list: the patches p needs, or "-".
func needsText(p *patches.Patch) string {
	if len(p.Needs) == 0 {
		return "-"
	}
	return strings.Join(p.Needs, ",")
}

// oneLineProblem reports whether why a plan does not apply fits the one
// error line: a refusal (a needed patch missing, a verify rule failing on
// the result) or a tree that is a known uncovered shape.
func oneLineProblem(pl *patches.Plan) bool {
	return pl.Refused != "" || pl.Shape != nil
}
