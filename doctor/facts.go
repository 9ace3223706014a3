package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// Value is what is known of one fact: its values (none when the fact is
// known to have no value: a flag not given and defaulting to None, an
// environment variable not set, a package not installed) and where each
// was read. Unknown facts are not Values: they are in Facts.unknown.
type Value struct {
	Vals []string
	From string // where it was read: "config.json", "server_args.py:1010 (default)", "nvidia-smi"
}

// Facts are the facts of one doctor pass, by name: the host, the tree and
// what is installed beside it, the model, the launch. A name with no
// Value and no reason in unknown is unknown too ("not read").
type Facts struct {
	known   map[string]Value
	unknown map[string]string // name or family ("model", "host") → why
	// env is the launch's environment: every env.NAME is known, set or not.
	env     map[string]string
	envFrom string
	// noField, once the launch was parsed, is why a flag.NAME that is no
	// field of the tree's ServerArgs has no value: the launch cannot set it.
	noField string
}

func newFacts() *Facts {
	return &Facts{known: map[string]Value{}, unknown: map[string]string{}}
}

// set records a fact's values.
func (f *Facts) set(name, from string, vals ...string) {
	f.known[name] = Value{Vals: vals, From: from}
}

// none records that a fact is known to have no value.
func (f *Facts) none(name, from string) { f.known[name] = Value{From: from} }

// unknownBecause records why a fact (or every fact of a family: "model",
// "host", "flag") could not be read.
func (f *Facts) unknownBecause(name, why string) {
	if _, ok := f.unknown[name]; !ok {
		f.unknown[name] = why
	}
}

// Lookup is the fact name's value; ok false when unknown, with why.
func (f *Facts) Lookup(name string) (v Value, ok bool, why string) {
	if v, ok := f.known[name]; ok {
		return v, true, ""
	}
	if k, ok := strings.CutPrefix(name, "env."); ok && f.env != nil {
		if v, set := f.env[k]; set {
			return Value{Vals: []string{v}, From: f.envFrom}, true, ""
		}
		return Value{From: f.envFrom}, true, ""
	}
	if w, ok := f.unknown[name]; ok {
		return Value{}, false, w
	}
	if rest, ok := strings.CutPrefix(name, "pkg."); ok {
		// Whatever is said of a package that is not installed has no value.
		if base, _, sub := strings.Cut(rest, "."); sub {
			if v, ok := f.known["pkg."+base]; ok && len(v.Vals) == 0 {
				return Value{From: v.From}, true, ""
			}
		}
	}
	if strings.HasPrefix(name, "flag.") && f.noField != "" {
		if strings.HasSuffix(name, ".given") {
			return Value{Vals: []string{"false"}, From: f.noField}, true, ""
		}
		return Value{From: f.noField}, true, ""
	}
	for n := name; ; {
		if w, ok := f.unknown[n]; ok {
			return Value{}, false, w
		}
		i := strings.LastIndexByte(n, '.')
		if i < 0 {
			break
		}
		n = n[:i]
	}
	return Value{}, false, "not read"
}

// first is the fact's first value, "" when it has none or is unknown.
func (f *Facts) first(name string) string {
	v, ok, _ := f.Lookup(name)
	if !ok || len(v.Vals) == 0 {
		return ""
	}
	return v.Vals[0]
}

// Names are the known facts' names, sorted.
func (f *Facts) Names() []string {
	out := make([]string, 0, len(f.known))
	for k := range f.known {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Unknown is what could not be read, by fact or family, with why.
func (f *Facts) Unknown() map[string]string { return f.unknown }

// The fact names rules may use: fixed names, and families whose last part
// names a flag, an environment variable, a package, a config field or a
// flashinfer module.
var fixedFacts = []string{
	"gpu.sm", "gpu.major", "gpu.capability", "gpu.name", "gpu.count",
	"host.driver", "host.p2p.all", "host.nvlink.all", "host.nvlink.any",
	"host.acs", "host.iommu", "host.registry_dwords", "host.force_p2p",
	"host.pcie.degraded", "host.pcie.max_gen", "host.pcie.width", "host.numa.span", "host.bar1.small",
	"cuda.version", "cuda.root",
	"flashinfer.version", "nccl.version", "triton.version", "triton.ptxas", "triton.ptxas.targets",
	"sglang.version",
	"compat.fusion_sm12", "compat.install", "compat.advice",
	"launch.entry",
	"moe.config", "moe.config.file", "moe.config.dir",
	"attn.heads_per_rank",
}

var factFamilies = []string{"flag.", "env.", "pkg.", "pin.", "model.", "flashinfer.module."}

var factNameRe = lazyre.New(`^[A-Za-z0-9_.-]+$`)

func checkFactName(name string) error {
	if slices.Contains(fixedFacts, name) {
		return nil
	}
	for _, fam := range factFamilies {
		if rest, ok := strings.CutPrefix(name, fam); ok && rest != "" && factNameRe().MatchString(rest) {
			return nil
		}
	}
	return fmt.Errorf("unknown fact %q (facts: %s, and the families %s)", name, strings.Join(fixedFacts, ", "), strings.Join(factFamilies, "*, ")+"*")
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}
