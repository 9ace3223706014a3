package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/internal/smver"
	"github.com/smpatch/smpatch/probe"
	"github.com/smpatch/smpatch/source"
)

// hostFacts records what the probe's report says of the GPUs, driver,
// toolkit, topology and the packages installed beside the tree.
func hostFacts(f *Facts, r *probe.Report, noHost string) {
	if r == nil {
		why := noHost
		if why == "" {
			why = "no probe report"
		}
		for _, fam := range []string{"gpu", "host", "cuda", "flashinfer", "pkg", "nccl", "triton"} {
			f.unknownBecause(fam, why)
		}
		return
	}
	for k, v := range r.Unknown {
		f.unknownBecause("probe."+k, v)
	}
	gpuFacts(f, r)
	if h := r.Host; h != nil {
		if h.Driver != "" {
			f.set("host.driver", "the probe (nvidia-smi)", h.Driver)
		}
		topologyFacts(f, h)
		if tk := h.CUDAToolkit; tk != nil && tk.Version != "" {
			f.set("cuda.version", tk.VersionFrom, tk.Version)
			if tk.Root != "" {
				f.set("cuda.root", tk.VersionFrom, tk.Root)
			}
		} else {
			f.unknownBecause("cuda", unknownOr(r, "cuda_toolkit", "no CUDA toolkit in the report"))
		}
	} else {
		f.unknownBecause("host", unknownOr(r, "host", "the report has no host (a static probe, as of an image)"))
		f.unknownBecause("gpu", unknownOr(r, "host.gpus", "the report has no host"))
		f.unknownBecause("cuda", "the report has no host")
	}
	packageFacts(f, r)
	flashinferFacts(f, r)
}

// unknownOr is the report's reason for key, else def.
func unknownOr(r *probe.Report, key, def string) string {
	if w := r.Unknown[key]; w != "" {
		return w
	}
	return def
}

func gpuFacts(f *Facts, r *probe.Report) {
	if r.Host == nil || len(r.Host.GPUs) == 0 {
		f.unknownBecause("gpu", unknownOr(r, "host.gpus", "no GPU in the report"))
		return
	}
	from := "the probe (" + firstNonEmpty(r.Host.GPUSource, "nvidia-smi") + ")"
	var sms, majors, caps, names []string
	for _, g := range r.Host.GPUs {
		a, err := smver.ParseArch(g.SM)
		if err != nil {
			f.unknownBecause("gpu.sm", fmt.Sprintf("GPU %d %s: compute capability unknown (%q)", g.Index, g.Name, g.SM))
			continue
		}
		sms = appendNew(sms, fmt.Sprintf("%d.%d", a.Major, a.Minor))
		majors = appendNew(majors, strconv.Itoa(a.Major))
		caps = appendNew(caps, strconv.Itoa(a.Major*10+a.Minor))
		names = appendNew(names, g.Name)
	}
	desc := fmt.Sprintf("%s: %d GPU(s), GPU 0 %s", from, len(r.Host.GPUs), r.Host.GPUs[0].Name)
	if len(sms) > 0 {
		f.set("gpu.sm", desc, sms...)
		f.set("gpu.major", desc, majors...)
		f.set("gpu.capability", desc, caps...)
	}
	f.set("gpu.name", from, names...)
	f.set("gpu.count", from, strconv.Itoa(len(r.Host.GPUs)))
}

// topologyFacts: P2P reads and NVLink between every pair of GPUs.
func topologyFacts(f *Facts, h *probe.Host) {
	n := len(h.GPUs)
	if n < 2 {
		f.set("host.p2p.all", "one GPU", "true")
		f.set("host.nvlink.all", "one GPU", "false")
		f.set("host.nvlink.any", "one GPU", "false")
		return
	}
	if h.P2P == nil {
		f.unknownBecause("host.p2p", "the report has no P2P matrix (nvidia-smi topo -p2p r)")
	} else {
		ok, bad := pairs(h.P2P, n)
		v := strconv.FormatBool(bad == "")
		f.set("host.p2p.all", "nvidia-smi topo -p2p r: "+firstNonEmpty(bad, fmt.Sprintf("all %d ordered pairs OK", ok)), v)
	}
	if h.NVLink == nil {
		f.unknownBecause("host.nvlink", "the report has no NVLink matrix (nvidia-smi topo -p2p n)")
	} else {
		ok, bad := pairs(h.NVLink, n)
		f.set("host.nvlink.all", "nvidia-smi topo -p2p n: "+firstNonEmpty(bad, fmt.Sprintf("all %d ordered pairs linked", ok)), strconv.FormatBool(bad == ""))
		f.set("host.nvlink.any", fmt.Sprintf("nvidia-smi topo -p2p n: %d ordered pairs linked", ok), strconv.FormatBool(ok > 0))
	}
}

// pairs counts the OK pairs of a GPU matrix and names the first that is not.
func pairs(m [][]string, n int) (ok int, bad string) {
	for i := 0; i < n && i < len(m); i++ {
		for j := 0; j < n && j < len(m[i]); j++ {
			if i == j {
				continue
			}
			if m[i][j] == "OK" {
				ok++
			} else if bad == "" {
				bad = fmt.Sprintf("GPU %d to GPU %d: %s", i, j, m[i][j])
			}
		}
	}
	return ok, bad
}

// packageFacts: pkg.NAME is a distribution's version; a distribution the
// probe looks for and did not find in the site-packages it read is
// known to be absent. pkg.NAME.arches are the SM targets of its binaries
// and pkg.NAME.loads whether one of them runs on the GPUs.
func packageFacts(f *Facts, r *probe.Report) {
	read := r.Python != nil && len(r.Python.SitePackages) > 0
	where := ""
	if read {
		where = strings.Join(r.Python.SitePackages, ", ")
	}
	for name, p := range r.Packages {
		if p == nil {
			continue
		}
		key := "pkg." + source.NormalizeDistName(name)
		f.set(key, p.Location, p.Version)
		if len(p.ArchesFrom) > 0 {
			f.set(key+".arches", strings.Join(p.ArchesFrom, ", "), p.Arches...)
			loadsFact(f, key, p)
		} else {
			why := unknownOr(r, "packages."+name+".arches", "the report lists no binaries of "+name)
			f.unknownBecause(key+".arches", why)
			f.unknownBecause(key+".loads", why)
		}
		if name == "torch" && p.CUDA != "" {
			f.set("pkg.torch.cuda", p.Location+"/torch/version.py", p.CUDA)
		}
	}
	for _, name := range probe.Dists {
		key := "pkg." + source.NormalizeDistName(name)
		if _, ok := f.known[key]; ok {
			continue
		}
		if read {
			f.none(key, "not installed in "+where)
		}
	}
	why := "the probe does not look for it"
	if !read {
		why = unknownOr(r, "python", "the report read no site-packages")
	}
	f.unknownBecause("pkg", why)
	// NCCL: the library torch loads, from its wheel.
	for _, name := range []string{"nvidia-nccl-cu13", "nvidia-nccl-cu12"} {
		if p := r.Packages[name]; p != nil && p.Version != "" {
			f.set("nccl.version", name+" "+p.Location, p.Version)
			break
		}
	}
	if _, ok := f.known["nccl.version"]; !ok {
		f.unknownBecause("nccl.version", "no nvidia-nccl-cu12/cu13 wheel in the report")
	}
	if p := r.Packages["triton"]; p != nil {
		f.set("triton.version", p.Location, p.Version)
	}
}

// loadsFact: pkg.NAME.loads is "cubin" when one of the package's cubins
// runs on every GPU's SM, "ptx" when only PTX does (compiled by the
// driver at first use), "no" when none can: CUDA then says "no kernel
// image is available for execution on the device".
func loadsFact(f *Facts, key string, p *probe.Package) {
	sms := f.known["gpu.sm"].Vals
	if len(sms) == 0 {
		f.unknownBecause(key+".loads", "the GPUs' compute capability is unknown")
		return
	}
	worst := "cubin"
	var why []string
	for _, sm := range sms {
		gpu, err := smver.ParseArch(sm)
		if err != nil {
			continue
		}
		got := "no"
		for _, t := range p.Arches {
			a, err := smver.ParseArch(t)
			if err != nil {
				continue
			}
			if runsOn(a, gpu) {
				if !a.PTX {
					got = "cubin"
					break
				}
				got = "ptx"
			}
		}
		why = append(why, fmt.Sprintf("SM %s: %s", sm, got))
		if got == "no" || got == "ptx" && worst == "cubin" {
			worst = got
		}
	}
	f.set(key+".loads", fmt.Sprintf("%s against targets %s of %s", strings.Join(why, "; "), strings.Join(p.Arches, " "), strings.Join(p.ArchesFrom, ", ")), worst)
}

// runsOn is CUDA's rule for a compilation target on a GPU: a cubin for
// sm_XY runs on X.Z for Z >= Y; sm_XYa only on X.Y; sm_XYf on X.Z for
// Z >= Y (the family); PTX for compute_XY is compiled for any GPU from
// X.Y up, compute_XYa only for X.Y, compute_XYf for the family.
func runsOn(t, gpu smver.Arch) bool {
	switch {
	case t.Suffix == "a":
		return t.Major == gpu.Major && t.Minor == gpu.Minor
	case t.Suffix == "f", !t.PTX:
		return t.Major == gpu.Major && gpu.Minor >= t.Minor
	}
	return gpu.Major > t.Major || gpu.Major == t.Major && gpu.Minor >= t.Minor
}

// flashinferFacts: the installed flashinfer's version and, per JIT
// module, the probe's verdict for the GPUs' major.
func flashinferFacts(f *Facts, r *probe.Report) {
	if fi := r.FlashInfer; fi != nil && fi.Version != "" {
		f.set("flashinfer.version", firstNonEmpty(fi.VersionFrom, fi.Root), fi.Version)
	} else if p := r.Packages["flashinfer-python"]; p != nil {
		f.set("flashinfer.version", p.Location, p.Version)
	} else if r.Python != nil && len(r.Python.SitePackages) > 0 {
		f.none("flashinfer.version", "flashinfer-python is not installed")
	}
	majors := f.known["gpu.major"].Vals
	if len(majors) == 0 {
		f.unknownBecause("flashinfer.module", "the GPUs' compute capability is unknown")
		return
	}
	for mod, byMajor := range r.Verdicts {
		var vals, reasons []string
		for _, m := range majors {
			v := byMajor[m]
			if v == nil {
				continue
			}
			vals = appendNew(vals, v.Verdict)
			reasons = append(reasons, v.Reasons...)
		}
		if len(vals) > 0 {
			f.set("flashinfer.module."+mod, strings.Join(reasons, "; "), vals...)
		}
	}
	if r.FlashInfer == nil {
		f.unknownBecause("flashinfer.module", unknownOr(r, "flashinfer", "no flashinfer in the report"))
	} else {
		f.unknownBecause("flashinfer.module", "the probe gave no verdict for this module")
	}
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
