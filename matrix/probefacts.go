package matrix

import (
	"slices"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/probe"
)

// ProbeFacts are the parts of a probe report (smpatch probe --json) that
// rules read: the visible GPUs and the flashinfer module verdicts.
type ProbeFacts struct {
	File string
	// SMs are the compute capabilities of the visible GPUs ("12.0").
	SMs []string
	// Verdicts maps a flashinfer module and a GPU major ("12") to its
	// verdict: supported, unsupported-gate, unsupported-header or unknown.
	Verdicts map[string]map[string]string
	// FlashInfer is the report's static analysis of flashinfer, used to
	// judge a major the probed host did not have (an SM120 cell probed on
	// an H200 build host).
	FlashInfer *probe.FlashInfer
	// NVLink is whether some pair of GPUs is linked by NVLink, P2P whether
	// every pair can read each other's memory; nil when the report does
	// not say.
	NVLink, P2P *bool
	// Versions are the installed packages' versions ("torch", "nccl": the
	// nvidia-nccl-cu12/cu13 wheel), for version conditions.
	Versions map[string]string
}

// verdict is the verdict for a module on a GPU major: the report's, else
// judged from the report's flashinfer analysis, else unknown.
func (f *ProbeFacts) verdict(module string, major int) string {
	if v := f.Verdicts[module][strconv.Itoa(major)]; v != "" {
		return v
	}
	if f.FlashInfer != nil {
		if v := probe.ModuleVerdict(f.FlashInfer, module, major); v != nil && v.Verdict != "" {
			return v.Verdict
		}
	}
	return probe.Unknown
}

// ReadProbeFacts reads a probe report written by smpatch probe --json -o FILE.
func ReadProbeFacts(file string) (*ProbeFacts, error) {
	r, err := probe.ReadReport(file)
	if err != nil {
		return nil, err
	}
	f := FactsFromReport(r)
	f.File = file
	return f, nil
}

// FactsFromReport takes from a probe report what rules read.
func FactsFromReport(r *probe.Report) *ProbeFacts {
	f := &ProbeFacts{Verdicts: map[string]map[string]string{}, FlashInfer: r.FlashInfer, Versions: map[string]string{}}
	if r.Host != nil {
		for _, g := range r.Host.GPUs {
			if g.SM != "" {
				f.SMs = append(f.SMs, g.SM)
			}
		}
		if linked, _, ok := probe.AnyPair(r.Host.NVLink); ok {
			f.NVLink = &linked
		} else if len(r.Host.GPUs) == 1 {
			f.NVLink = new(bool)
		}
		if _, all, ok := probe.AnyPair(r.Host.P2P); ok {
			f.P2P = &all
		}
	}
	for name, p := range r.Packages {
		if p == nil || p.Version == "" {
			continue
		}
		switch name {
		case "nvidia-nccl-cu12", "nvidia-nccl-cu13":
			f.Versions["nccl"] = p.Version
		case "torch":
			f.Versions["torch"] = p.Version
		}
	}
	for mod, per := range r.Verdicts {
		f.Verdicts[mod] = map[string]string{}
		for major, v := range per {
			s := probe.Unknown
			if v != nil && v.Verdict != "" {
				s = v.Verdict
			}
			f.Verdicts[mod][strings.TrimSuffix(major, ".0")] = s
		}
	}
	return f
}

// majors returns the distinct GPU majors of the probed host.
func (f *ProbeFacts) majors() []int {
	var out []int
	for _, s := range f.SMs {
		if maj, _, err := parseSM(s); err == nil && !slices.Contains(out, maj) {
			out = append(out, maj)
		}
	}
	return out
}
