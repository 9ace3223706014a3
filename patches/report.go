package patches

import (
	"fmt"
	"strings"

	"github.com/smpatch/smpatch/internal/termsafe"
)

// ConflictReport renders the conflicting hunks of a plan for people: each
// with its file, header, reason and the nearest region found.
func ConflictReport(p *Plan) string {
	var b strings.Builder
	for _, fp := range p.Files {
		for _, h := range fp.Hunks {
			if h.Status != Conflict {
				continue
			}
			hdr := ""
			if fp.Diff != nil && h.Index < len(fp.Diff.Hunks) && fp.Diff.Hunks[h.Index] != nil {
				hk := fp.Diff.Hunks[h.Index]
				hdr = fmt.Sprintf(" @@ -%d,%d +%d,%d @@%s", hk.OldStart, hk.OldLines, hk.NewStart, hk.NewLines, sectionText(hk.Section))
			}
			fmt.Fprintf(&b, "conflict: %s hunk #%d%s\n", p.Shown(fp.Path), h.Index+1, hdr)
			if h.Reason != "" {
				fmt.Fprintf(&b, "  %s\n", h.Reason)
			}
			if h.Nearest != nil {
				fmt.Fprintf(&b, "  nearest region: lines %d-%d\n", h.Nearest.Start, h.Nearest.End)
				for _, l := range strings.Split(strings.TrimRight(h.Nearest.Text, "\n"), "\n") {
					fmt.Fprintf(&b, "    | %s\n", termsafe.Line(l))
				}
			}
		}
	}
	return b.String()
}

// FitLine says in a few words how plan p fares on its tree, for a line
// that names the patch elsewhere (doctor's remedies): "applies (variant
// gate)", "already applied", "refused: ...", "does not apply: ...".
func FitLine(p *Plan) string {
	v := VariantLabel(p.Variant)
	switch o := p.Outcome(); o {
	case OutcomeApplies, OutcomeFuzzy:
		s := "applies"
		if o == OutcomeFuzzy {
			s = "applies with fuzz"
		}
		if v != "" {
			s += " (variant " + v + ")"
		}
		return s
	case OutcomeAlreadyApplied:
		if p.Retired != "" {
			return "nothing to do: " + p.Retired
		}
		return "already applied"
	case OutcomeRefused:
		return "refused: " + p.Refused
	default:
		if p.Reason != "" {
			return "does not apply: " + p.Reason
		}
		return "does not apply"
	}
}

// sectionText is a hunk header's context as shown after "@@" (a space
// first, as git writes it).
func sectionText(s string) string {
	if s == "" {
		return ""
	}
	return " " + termsafe.Line(s)
}
