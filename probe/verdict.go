package probe

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/internal/smver"
)

// DefaultMajors are the SM majors every report has verdicts for, beside
// those of the visible GPUs.
var DefaultMajors = []int{8, 9, 10, 11, 12}

// ModuleVerdict says whether module can build working kernels for GPUs of
// SM major, from the code the probe read (the gate, the header exclusions),
// never from the version number.
func ModuleVerdict(fi *FlashInfer, module string, major int) *Verdict {
	v := &Verdict{Reasons: []string{}}
	if fi == nil {
		v.Verdict = Unknown
		v.Reasons = append(v.Reasons, "flashinfer not found")
		return v
	}
	m, ok := fi.Modules[module]
	if !ok {
		v.Verdict = Unknown
		v.Reasons = append(v.Reasons, fmt.Sprintf("no JIT generator for module %s in %s", module, fi.Root))
		return v
	}
	gateOK := true // the gate admits the major
	switch m.Gate {
	case "supported_major_versions":
		if len(m.Gates) > 1 {
			in, out := 0, 0
			for _, g := range m.Gates {
				if containsInt(g.SMMajors, major) {
					in++
				} else {
					out++
				}
			}
			switch {
			case out == 0:
				v.Reasons = append(v.Reasons, fmt.Sprintf("every gate of %s admits %d (%s)", m.Generator, major, gateSources(m.Gates)))
			case in == 0:
				v.Verdict = UnsupportedGate
				v.Reasons = append(v.Reasons, fmt.Sprintf("no gate of %s admits %d (%s)", m.Generator, major, gateSources(m.Gates)))
				return v
			default:
				v.Verdict = Unknown
				v.Reasons = append(v.Reasons, fmt.Sprintf("%s picks one of several gates at run time, some admit %d and some do not (%s)", m.Generator, major, gateSources(m.Gates)))
				return v
			}
		} else if !containsInt(m.SMMajors, major) {
			v.Verdict = UnsupportedGate
			v.Reasons = append(v.Reasons, fmt.Sprintf("%s: %s passes supported_major_versions=%s: no target for SM %d.x (JIT raises \"No supported CUDA architectures found for major versions %s\")",
				m.Source, m.Generator, intList(m.SMMajors), major, intList(m.SMMajors)))
			if hits := headerHits(fi, m, major); len(hits) > 0 {
				v.Reasons = append(v.Reasons, "widening the gate would not do: "+hitsReason(hits, major))
			}
			return v
		} else {
			v.Reasons = append(v.Reasons, fmt.Sprintf("%s: %s passes supported_major_versions=%s, which admits %d", m.Source, m.Generator, intList(m.SMMajors), major))
		}
	case "all":
		v.Reasons = append(v.Reasons, fmt.Sprintf("%s: %s asks for every target arch (no major list)", m.Source, m.Generator))
	case "explicit":
		has := false
		for _, t := range m.Explicit {
			if a, err := smver.ParseArch(t); err == nil && a.Major == major {
				has = true
			}
		}
		if !has && !m.Conditional {
			v.Verdict = UnsupportedGate
			v.Reasons = append(v.Reasons, fmt.Sprintf("%s: %s builds only %s: no SM %d.x target (%s)", m.Source, m.Generator, strings.Join(m.Explicit, ", "), major, m.Note))
			return v
		}
		gateOK = false
		v.Reasons = append(v.Reasons, fmt.Sprintf("%s: %s: %s; fixed targets %s: whether SM %d.x gets working kernels is not established by the code", m.Source, m.Generator, m.Note, strings.Join(m.Explicit, ", "), major))
	case "none":
		gateOK = false
		v.Reasons = append(v.Reasons, fmt.Sprintf("%s: %s: %s: nothing in the code read says SM %d.x kernels work", m.Source, m.Generator, m.Note, major))
	default:
		v.Verdict = Unknown
		v.Reasons = append(v.Reasons, fmt.Sprintf("%s: %s: %s", m.Source, m.Generator, m.Note))
		return v
	}
	// Header exclusions in the comm headers the module's sources use.
	if hits := headerHits(fi, m, major); len(hits) > 0 {
		v.Verdict = UnsupportedHeader
		v.Reasons = append(v.Reasons, hitsReason(hits, major))
		return v
	}
	if isCommModule(m) && len(m.Headers) == 0 {
		v.Verdict = Unknown
		v.Reasons = append(v.Reasons, "comm headers of "+strings.Join(m.Sources, ", ")+" not found: exclusions not checked")
		return v
	}
	if len(m.Headers) > 0 {
		v.Reasons = append(v.Reasons, "no __CUDA_ARCH__ exclusion for SM "+strconv.Itoa(major)+".x in "+strings.Join(m.Headers, ", "))
	}
	if !gateOK {
		v.Verdict = Unknown
		return v
	}
	if major == 12 && fi.SM12CUDAMin != "" {
		v.Reasons = append(v.Reasons, fmt.Sprintf("%s: SM 12.x needs CUDA >= %s to JIT", fi.SM12CUDAMinFrom, fi.SM12CUDAMin))
	}
	if fi.ArchList != "" && !archListHasMajor(fi.ArchList, major) {
		v.Verdict = UnsupportedGate
		v.Reasons = append(v.Reasons, fmt.Sprintf("FLASHINFER_CUDA_ARCH_LIST=%q replaces device detection and has no %d.x target", fi.ArchList, major))
		return v
	}
	v.Verdict = Supported
	return v
}

// isCommModule reports whether the module builds from comm sources, whose
// headers must be read before a verdict.
func isCommModule(m *Module) bool {
	for _, s := range m.Sources {
		b := path.Base(s)
		if strings.Contains(b, "allreduce") || strings.Contains(b, "comm") || strings.Contains(b, "alltoall") {
			return true
		}
	}
	return false
}

// archListHasMajor reports whether FLASHINFER_CUDA_ARCH_LIST ("9.0a
// 12.0f", space-separated as flashinfer splits it) names a target of major.
func archListHasMajor(list string, major int) bool {
	for _, f := range strings.Fields(list) {
		if a, err := smver.ParseArch(f); err == nil && a.Major == major {
			return true
		}
	}
	return false
}

func gateSources(gs []GateSite) string {
	var parts []string
	for _, g := range gs {
		parts = append(parts, g.Source+" "+intList(g.SMMajors))
	}
	return strings.Join(parts, "; ")
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// computeVerdicts fills r.Verdicts for every module and each major.
func computeVerdicts(r *Report, majors []int) {
	if r.FlashInfer == nil {
		return
	}
	set := map[int]bool{}
	for _, m := range majors {
		set[m] = true
	}
	var ms []int
	for m := range set {
		ms = append(ms, m)
	}
	sort.Ints(ms)
	for name := range r.FlashInfer.Modules {
		per := map[string]*Verdict{}
		for _, m := range ms {
			per[strconv.Itoa(m)] = ModuleVerdict(r.FlashInfer, name, m)
		}
		r.Verdicts[name] = per
	}
}

// headerHits are the exclusions in the module's headers that cover major.
func headerHits(fi *FlashInfer, m *Module, major int) []HeaderExclusion {
	var hits []HeaderExclusion
	for _, h := range fi.HeaderExclusions {
		if h.FromMajor > major {
			continue
		}
		for _, mh := range m.Headers {
			if path.Base(h.File) == mh {
				hits = append(hits, h)
			}
		}
	}
	return hits
}

func hitsReason(hits []HeaderExclusion, major int) string {
	return fmt.Sprintf("%d kernel bodies compiled out for SM %d.x: %s:%d %s%s", len(hits), major, hits[0].File, hits[0].Line, hits[0].Text, more(len(hits)-1))
}
