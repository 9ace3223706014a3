package matrix

import (
	_ "embed"
	"fmt"
	"github.com/smpatch/smpatch/internal/textdist"
	"sort"
	"strings"
	"sync"
)

// nccl_variables.txt lists the environment variables NCCL documents or
// reads, with the release they were taken from.
//
//go:embed nccl_variables.txt
var ncclVariablesText string

var ncclVariables = sync.OnceValue(func() map[string]bool {
	known := map[string]bool{} // name -> documented
	for _, line := range strings.Split(ncclVariablesText, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		known[f[0]] = f[1] == "documented"
	}
	return known
})

// NCCLWarnings lists the NCCL_* environment variables of the matrix
// (presets, include entries, launch.env) that NCCL neither documents nor
// reads, each with file:line and the nearest known name, and those NCCL
// reads without documenting them. A misspelt variable is ignored by NCCL
// without a word, so the cell would silently run with the default.
func (m *Matrix) NCCLWarnings() []string {
	var out []string
	check := func(line int, where, name string) {
		if !strings.HasPrefix(name, "NCCL_") {
			return
		}
		documented, ok := ncclVariables()[name]
		switch {
		case ok && documented:
			return
		case ok:
			out = append(out, m.warnf(line, "%s: %s is read by NCCL but not documented in its user guide; its meaning may change between releases", where, name))
		default:
			msg := fmt.Sprintf("%s: %s is not an NCCL environment variable; NCCL ignores it", where, name)
			if s := nearestNCCL(name); s != "" {
				msg += " (did you mean " + s + "?)"
			}
			out = append(out, m.warnf(line, "%s", msg))
		}
	}
	axes := make([]string, 0, len(m.Presets))
	for a := range m.Presets {
		axes = append(axes, a)
	}
	sort.Strings(axes)
	for _, axis := range axes {
		names := sortedKeys(m.Presets[axis])
		for _, name := range names {
			p := m.Presets[axis][name]
			for _, k := range sortedKeys(p.Env) {
				line := m.line("presets", axis, name, k)
				if line == 0 {
					line = p.Line
				}
				check(line, "presets."+axis+"."+name, k)
			}
		}
	}
	for i, inc := range m.Include {
		for _, k := range sortedKeys(inc.Env) {
			check(inc.Line, fmt.Sprintf("include[%d].env", i), k)
		}
	}
	for _, k := range sortedKeys(m.Launch.Env) {
		check(m.line("launch", "env", k), "launch.env", k)
	}
	return out
}

func (m *Matrix) warnf(line int, format string, args ...any) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d: %s", m.File, line, fmt.Sprintf(format, args...))
	}
	return fmt.Sprintf("%s: %s", m.File, fmt.Sprintf(format, args...))
}

// nearestNCCL is the known variable closest to name by edit distance, when
// it is close enough to be a typo (at most a third of the name's length
// past the NCCL_ prefix, and never more than 3 edits).
func nearestNCCL(name string) string {
	best, bestD := "", 1<<30
	for k := range ncclVariables() {
		d := textdist.Distance(name, k)
		if d < bestD || d == bestD && k < best {
			best, bestD = k, d
		}
	}
	limit := min(3, max(1, (len(name)-len("NCCL_"))/3))
	if bestD > limit {
		return ""
	}
	return best
}
