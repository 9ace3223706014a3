package catalog

import (
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/source"
)

var versionInConstraint = lazyre.New(`[0-9][0-9A-Za-z.+!_-]*`)

// overlap reports a version both variants admit, probing every version the
// constraints name and the versions just below and above each (pa and pb are
// probesOf a's and b's versions).
func overlap(a, b *Variant, pa, pb variantProbes) (string, bool) {
	if len(a.Constraints) == 0 || len(b.Constraints) == 0 {
		if a.Versions == "" && b.Versions == "" {
			return "every version", true
		}
		// An unconstrained variant overlaps every other.
		return "every version the other admits", true
	}
	for _, list := range [][]*version.Version{edgeProbes(), pa.named, pb.named, pa.near, pb.near} {
		for _, probe := range list {
			if source.Satisfies(a.Constraints, probe) && source.Satisfies(b.Constraints, probe) {
				return source.VersionString(probe), true
			}
		}
	}
	return "", false
}

// variantProbes are the versions a constraint text names and, for each in
// turn, its neighbours just below and above.
type variantProbes struct {
	named, near []*version.Version
}

// edgeProbes are a very small and a very large version.
var edgeProbes = sync.OnceValue(func() []*version.Version {
	var out []*version.Version
	for _, s := range []string{"0.0.0", "99999.0.0"} {
		if v, err := source.ParseVersion(s); err == nil {
			out = append(out, v)
		}
	}
	return out
})

// probesOf parses the versions of one variant's constraint text, once for
// all the pairs the variant is part of.
func probesOf(text string) variantProbes {
	var p variantProbes
	add := func(s string) {
		if v, err := source.ParseVersion(s); err == nil {
			p.near = append(p.near, v)
		}
	}
	for _, m := range versionInConstraint().FindAllString(text, -1) {
		m = strings.TrimRight(m, ".")
		if v, err := source.ParseVersion(m); err == nil {
			p.named = append(p.named, v)
		}
	}
	for _, v := range p.named {
		segs := v.Segments()
		add(joinSegs(segs) + ".99999")
		add(joinSegs(segs) + ".1")
		add(joinSegs(segs) + ".post1")
		add(joinSegs(segs) + "rc1")
		add(joinSegs(segs) + ".dev0")
		for k := len(segs) - 1; k >= 0; k-- {
			if segs[k] > 0 {
				below := append(append([]int(nil), segs[:k]...), segs[k]-1)
				add(joinSegs(below) + ".99999")
				break
			}
		}
		bumped := append(append([]int(nil), segs[:len(segs)-1]...), segs[len(segs)-1]+1)
		add(joinSegs(bumped))
	}
	return p
}

func joinSegs(segs []int) string {
	parts := make([]string, len(segs))
	for i, s := range segs {
		parts[i] = strconv.Itoa(s)
	}
	return strings.Join(parts, ".")
}
