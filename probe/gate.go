package probe

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/internal/requires"
	"github.com/smpatch/smpatch/source"
)

// CheckRequirements checks req against the report, one Finding per
// requirement, each with its evidence. sm ("12.0"), when set, stands for the
// GPU the patch is meant for instead of the visible ones. A requirement of
// the launch (tensor parallel size) is not checked: CheckLaunchRequirements
// checks it against a launch.
func CheckRequirements(r *Report, req requires.Set, sm string) []Finding {
	return CheckLaunchRequirements(r, req, Launch{SM: sm})
}

// Launch is what a requirement is checked for beyond the machine: the GPU
// meant (SM, "12.0"; "" for the visible ones) and the launch's tensor
// parallel size (TP; 0 when no launch is known).
type Launch struct {
	SM string
	TP int
}

// CheckLaunchRequirements is CheckRequirements for a launch: req.tp is
// checked against l.TP, never against how many GPUs the host has; without
// a TP it is reported not checked.
func CheckLaunchRequirements(r *Report, req requires.Set, l Launch) []Finding {
	sm := l.SM
	var out []Finding
	majors, majorsFrom := targetMajors(r, req, sm)
	if len(req.GPUSMMajor) > 0 {
		out = append(out, checkGPU(r, req.GPUSMMajor, sm))
	}
	if req.FlashInferModule != "" {
		if len(majors) == 0 {
			out = append(out, Finding{
				Requirement: "flashinfer module " + req.FlashInferModule + " builds for the GPU",
				Evidence:    "no GPU to check it for: " + majorsFrom,
			})
		}
		for _, m := range majors {
			f := Finding{Requirement: fmt.Sprintf("flashinfer module %s builds for SM %d.x", req.FlashInferModule, m)}
			if r.FlashInfer == nil {
				f.Evidence = "flashinfer not found"
				if why, ok := r.Unknown["flashinfer"]; ok {
					f.Evidence = why
				} else if len(r.Python.sitePackages()) > 0 {
					f.Evidence += " in " + strings.Join(r.Python.sitePackages(), ", ")
				}
			} else {
				v := ModuleVerdict(r.FlashInfer, req.FlashInferModule, m)
				f.OK = v.Verdict == Supported
				f.Evidence = fmt.Sprintf("%s (flashinfer %s at %s): %s", v.Verdict, orUnknown(r.FlashInfer.Version), r.FlashInfer.Root, strings.Join(v.Reasons, "; "))
			}
			out = append(out, f)
		}
	}
	if req.CUDAMin != "" {
		out = append(out, checkCUDA(r, req.CUDAMin))
	}
	if req.P2PAll {
		out = append(out, checkP2P(r))
	}
	if len(req.TP) > 0 {
		out = append(out, checkTP(req.TP, l.TP))
	}
	if req.NVLink != nil {
		out = append(out, checkNVLink(r, *req.NVLink))
	}
	names := make([]string, 0, len(req.Packages))
	for n := range req.Packages {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, checkPackage(r, n, req.Packages[n]))
	}
	return out
}

func (p *Python) sitePackages() []string {
	if p == nil {
		return nil
	}
	return p.SitePackages
}

func orUnknown(s string) string {
	if s == "" {
		return "version unknown"
	}
	return s
}

// targetMajors are the SM majors a patch is checked for: --sm, else the
// visible GPUs (those of a required major when the patch names majors).
func targetMajors(r *Report, req requires.Set, sm string) ([]int, string) {
	if sm != "" {
		m, _, ok := parseSM(sm)
		if !ok {
			return nil, fmt.Sprintf("--sm %q is not MAJOR.MINOR", sm)
		}
		return []int{m}, "--sm " + sm
	}
	set := map[int]bool{}
	if r.Host != nil {
		for _, g := range r.Host.GPUs {
			if m := g.Major(); m >= 0 && (len(req.GPUSMMajor) == 0 || containsInt(req.GPUSMMajor, m)) {
				set[m] = true
			}
		}
	}
	var ms []int
	for m := range set {
		ms = append(ms, m)
	}
	sort.Ints(ms)
	if len(ms) == 0 {
		return nil, gpuUnknownWhy(r)
	}
	return ms, "visible GPUs"
}

func gpuUnknownWhy(r *Report) string {
	if why, ok := r.Unknown["host.gpus.sm"]; ok {
		return why
	}
	if why, ok := r.Unknown["host.gpus"]; ok {
		return why
	}
	if r.Host == nil {
		return "the report has no host section (a static report): give --sm"
	}
	if len(r.Host.GPUs) == 0 {
		return "no GPU listed"
	}
	var ds []string
	for _, g := range r.Host.GPUs {
		ds = append(ds, gpuLine(g))
	}
	return "visible GPUs: " + strings.Join(ds, "; ")
}

func gpuLine(g GPU) string {
	sm := g.SM
	if sm == "" {
		sm = "?"
	}
	return fmt.Sprintf("GPU %d %s sm %s", g.Index, g.Name, sm)
}

func checkGPU(r *Report, want []int, sm string) Finding {
	f := Finding{Requirement: "a GPU of SM major " + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(want)), " or "), "[]")}
	if sm != "" {
		m, _, ok := parseSM(sm)
		if !ok {
			f.Evidence = fmt.Sprintf("--sm %q is not MAJOR.MINOR", sm)
			return f
		}
		f.OK = containsInt(want, m)
		f.Evidence = "--sm " + sm
		if r.Host != nil && len(r.Host.GPUs) > 0 {
			f.Evidence += " (this report's GPUs: " + gpuSummary(r.Host.GPUs) + ")"
		}
		return f
	}
	if r.Host == nil || len(r.Host.GPUs) == 0 {
		f.Evidence = gpuUnknownWhy(r)
		return f
	}
	for _, g := range r.Host.GPUs {
		if m := g.Major(); m >= 0 && containsInt(want, m) {
			f.OK = true
			f.Evidence = fmt.Sprintf("%s (%s)", gpuLine(g), r.Host.GPUSource)
			return f
		}
	}
	f.Evidence = gpuSummary(r.Host.GPUs) + " (" + r.Host.GPUSource + ")"
	if why, ok := r.Unknown["host.gpus.sm"]; ok {
		f.Evidence += "; " + why
	}
	return f
}

// gpuSummary is "8× NVIDIA RTX PRO 6000 … sm 12.0" or a list.
func gpuSummary(gs []GPU) string {
	same := true
	for _, g := range gs[1:] {
		if g.Name != gs[0].Name || g.SM != gs[0].SM {
			same = false
		}
	}
	if same && len(gs) > 1 {
		return fmt.Sprintf("%d× %s sm %s", len(gs), gs[0].Name, orQ(gs[0].SM))
	}
	var parts []string
	for _, g := range gs {
		parts = append(parts, gpuLine(g))
	}
	return strings.Join(parts, "; ")
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func checkCUDA(r *Report, min string) Finding {
	f := Finding{Requirement: "CUDA toolkit >= " + min, Host: true}
	var tk *CUDAToolkit
	if r.Host != nil {
		tk = r.Host.CUDAToolkit
	}
	if tk == nil || tk.Version == "" {
		why := "no CUDA toolkit in the report"
		if w, ok := r.Unknown["host.cuda_toolkit"]; ok {
			why = w
		} else if w, ok := r.Unknown["host.cuda_toolkit.version"]; ok {
			why = w
		}
		f.Evidence = why
		return f
	}
	ok, err := AtLeast(tk.Version, min)
	f.OK = ok && err == nil
	f.Evidence = fmt.Sprintf("CUDA %s at %s (%s)", tk.Version, tk.Root, tk.VersionFrom)
	if err != nil {
		f.Evidence += ": " + err.Error()
	}
	return f
}

func checkP2P(r *Report) Finding {
	f := Finding{Requirement: "P2P reads between every pair of GPUs", Host: true}
	if r.Host == nil || len(r.Host.GPUs) == 0 {
		f.Evidence = gpuUnknownWhy(r)
		return f
	}
	if len(r.Host.GPUs) == 1 {
		f.OK = true
		f.Evidence = "one GPU: no pairs"
		return f
	}
	if r.Host.P2P == nil {
		f.Evidence = "no P2P matrix"
		if why, ok := r.Unknown["host.p2p"]; ok {
			f.Evidence = why
		}
		return f
	}
	var bad []string
	pairs := 0
	for i, row := range r.Host.P2P {
		for j, s := range row {
			if i == j {
				continue
			}
			pairs++
			if s != "OK" {
				bad = append(bad, fmt.Sprintf("GPU%d→GPU%d %s", i, j, s))
			}
		}
	}
	if len(bad) == 0 {
		f.OK = true
		f.Evidence = fmt.Sprintf("nvidia-smi topo -p2p r: all %d ordered pairs OK", pairs)
		return f
	}
	shown := bad
	if len(shown) > 4 {
		shown = shown[:4]
	}
	f.Evidence = fmt.Sprintf("nvidia-smi topo -p2p r: %d of %d pairs not OK: %s%s", len(bad), pairs, strings.Join(shown, ", "), more(len(bad)-len(shown)))
	return f
}

func checkPackage(r *Report, name, constraint string) Finding {
	f := Finding{Requirement: name + " " + constraint}
	p := r.Packages[name]
	if p == nil {
		f.Evidence = name + " not installed in " + strings.Join(r.Python.sitePackages(), ", ")
		return f
	}
	cs, err := source.ParseConstraints(constraint)
	if err != nil {
		f.Evidence = fmt.Sprintf("constraint %q: %v", constraint, err)
		return f
	}
	v, err := source.ParseVersion(p.Version)
	if err != nil {
		f.Evidence = fmt.Sprintf("%s %s at %s: version not read: %v", name, p.Version, p.Location, err)
		return f
	}
	f.OK = source.Satisfies(cs, v)
	f.Evidence = fmt.Sprintf("%s %s at %s", name, p.Version, p.Location)
	return f
}

// checkTP: the patch is for these tensor-parallel sizes, and the launch
// runs tp (0: no launch known here). The GPUs a host has say nothing about
// the size a server runs with.
func checkTP(sizes []int, tp int) Finding {
	f := Finding{Requirement: "tensor parallel " + intsText(sizes)}
	if tp <= 0 {
		f.NotChecked = "a requirement of the launch, checked where its tensor parallel size is known (doctor, matrix cells); give --tp N to check it here"
		return f
	}
	f.OK = slices.Contains(sizes, tp)
	f.Evidence = fmt.Sprintf("the launch runs tensor parallel %d", tp)
	return f
}

func intsText(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// checkNVLink: want false is "no NVLink between any pair of GPUs" (a PCIe
// machine, where the patch's path wins); true is "NVLink between some".
func checkNVLink(r *Report, want bool) Finding {
	f := Finding{Requirement: "no NVLink between the GPUs"}
	if want {
		f.Requirement = "NVLink between the GPUs"
	}
	if r.Host == nil || len(r.Host.GPUs) == 0 {
		f.Evidence = gpuUnknownWhy(r)
		return f
	}
	if len(r.Host.GPUs) == 1 {
		f.OK = !want
		f.Evidence = "one GPU: no links"
		return f
	}
	linked, _, ok := AnyPair(r.Host.NVLink)
	if !ok {
		f.Evidence = "no NVLink matrix"
		if why, ok := r.Unknown["host.nvlink"]; ok {
			f.Evidence = why
		}
		return f
	}
	f.OK = linked == want
	if linked {
		f.Evidence = "nvidia-smi topo -p2p n: NVLink between some pairs"
	} else {
		f.Evidence = fmt.Sprintf("nvidia-smi topo -p2p n: no NVLink between any of the %d GPUs", len(r.Host.GPUs))
	}
	return f
}
