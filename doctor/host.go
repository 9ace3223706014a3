package doctor

import (
	"fmt"
	"path"
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
		pcieFacts(f, r, h)
		iommuFacts(f, r, h)
		driverFacts(f, r, h)
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
			loadsFact(f, key+".loads", p.Arches, p.ArchesFrom)
			// A loader that picks one file by GPU (sgl-kernel's sm90/ and
			// sm100/ common_ops): each file's directory on its own.
			for _, b := range p.Files {
				dir := path.Base(path.Dir(b.Path))
				loadsFact(f, key+".loads."+dir, b.Arches, []string{b.Path})
			}
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
		if read && (currentProbe(r) || slices.Contains(firstDists, name)) {
			f.none(key, "not installed in "+where)
		}
	}
	why := "the probe does not look for it"
	if !currentProbe(r) {
		why = "the report comes from an older probe, which did not look for it"
	}
	if !read {
		why = unknownOr(r, "python", "the report read no site-packages")
	}
	f.unknownBecause("pkg", why)
	// NCCL: the library torch loads, from its wheel: the version the
	// library states, else the wheel's.
	for _, name := range []string{"nvidia-nccl-cu13", "nvidia-nccl-cu12"} {
		p := r.Packages[name]
		if p == nil {
			continue
		}
		if p.LibVersion != "" {
			v, _, _ := strings.Cut(p.LibVersion, "+")
			f.set("nccl.version", "NCCL version string of "+p.LibVersionFrom, v)
			break
		}
		if p.Version != "" {
			f.set("nccl.version", name+" "+p.Version+" in "+p.Location, p.Version)
			break
		}
	}
	if _, ok := f.known["nccl.version"]; !ok {
		f.unknownBecause("nccl.version", "no nvidia-nccl-cu12/cu13 wheel in the report")
	}
	if p := r.Packages["triton"]; p != nil {
		f.set("triton.version", p.Location, p.Version)
		switch pt := p.PTXAS; {
		case pt == nil:
			f.unknownBecause("triton.ptxas", unknownOr(r, "packages.triton.ptxas", "the report names no bundled ptxas of triton"))
		default:
			if pt.Version != "" {
				f.set("triton.ptxas", firstNonEmpty(pt.VersionFrom, pt.Path), pt.Version)
			} else {
				f.unknownBecause("triton.ptxas", unknownOr(r, "packages.triton.ptxas.version", pt.Path+": version not read"))
			}
			if len(pt.Targets) > 0 {
				f.set("triton.ptxas.targets", firstNonEmpty(pt.TargetsFrom, pt.Path), pt.Targets...)
			} else {
				f.unknownBecause("triton.ptxas.targets", unknownOr(r, "packages.triton.ptxas.targets", pt.Path+": targets not read"))
			}
		}
	} else if read {
		f.none("triton.ptxas", "triton is not installed")
		f.none("triton.ptxas.targets", "triton is not installed")
	}
}

// firstDists are the distributions every probe has looked for; a report
// of an older probe says nothing of the others (triton, sglang-kernel,
// sgl-deep-gemm) when they are missing from it.
var firstDists = []string{"torch", "flashinfer-python", "flashinfer-jit-cache", "flashinfer-cubin", "sglang", "sgl-kernel", "nvidia-nccl-cu12", "nvidia-nccl-cu13"}

// currentProbe reports whether r comes from a probe that looks for every
// one of probe.Dists: one that also reads the host's PCIe, IOMMU and
// driver, or the libraries' own versions.
func currentProbe(r *probe.Report) bool {
	if h := r.Host; h != nil && (h.PCIe != nil || h.IOMMU != nil || h.NvidiaDriver != nil) {
		return true
	}
	for k := range r.Unknown {
		if strings.HasPrefix(k, "host.pcie") || strings.HasPrefix(k, "host.iommu") || strings.HasPrefix(k, "host.nvidia_driver") {
			return true
		}
	}
	for _, p := range r.Packages {
		if p != nil && (p.LibVersion != "" || p.PTXAS != nil || len(p.Files) > 0) {
			return true
		}
	}
	return false
}

// loadsFact: pkg.NAME.loads is "cubin" when one of the package's cubins
// runs on every GPU's SM, "ptx" when only PTX does (compiled by the
// driver at first use), "no" when none can: CUDA then says "no kernel
// image is available for execution on the device".
func loadsFact(f *Facts, key string, arches, from []string) {
	sms := f.known["gpu.sm"].Vals
	if len(sms) == 0 {
		f.unknownBecause(key, "the GPUs' compute capability is unknown")
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
		for _, t := range arches {
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
	f.set(key, fmt.Sprintf("%s against targets %s of %s", strings.Join(why, "; "), strings.Join(arches, " "), strings.Join(from, ", ")), worst)
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

// pcieFacts: the GPUs' PCIe links (a width below the maximum is a
// degraded link; a speed below it is a GPU at rest), ACS on the bridges
// above them, NUMA nodes and sockets, BAR1.
func pcieFacts(f *Facts, r *probe.Report, h *probe.Host) {
	p := h.PCIe
	if p == nil {
		f.unknownBecause("host.pcie", unknownOr(r, "host.pcie", "the report has no PCIe facts (a probe older than this doctor, or no /sys)"))
		f.unknownBecause("host.acs", unknownOr(r, "host.pcie", "no PCIe facts"))
		f.unknownBecause("host.numa", unknownOr(r, "host.pcie", "no PCIe facts"))
		f.unknownBecause("host.bar1", unknownOr(r, "host.pcie", "no PCIe facts"))
		return
	}
	var degraded, gens, widths []string
	known := 0
	for _, g := range p.GPUs {
		l := g.Link
		if l == nil || l.MaxWidth == 0 || l.CurrentWidth == 0 {
			continue
		}
		known++
		if l.MaxGen > 0 {
			gens = appendNew(gens, strconv.Itoa(l.MaxGen))
		}
		widths = appendNew(widths, strconv.Itoa(l.CurrentWidth))
		if l.CurrentWidth < l.MaxWidth {
			degraded = append(degraded, fmt.Sprintf("%s x%d of x%d (%s)", g.Address, l.CurrentWidth, l.MaxWidth, l.From))
		}
	}
	switch {
	case len(p.GPUs) == 0:
		f.set("host.pcie.degraded", "no NVIDIA GPU under "+p.From, "false")
	case known == 0:
		f.unknownBecause("host.pcie.degraded", "no GPU link width in the report")
	case len(degraded) > 0:
		f.set("host.pcie.degraded", "link width below its maximum: "+strings.Join(degraded, "; "), "true")
	default:
		f.set("host.pcie.degraded", fmt.Sprintf("%d GPU links at their maximum width (%s)", known, p.From), "false")
	}
	if len(gens) > 0 {
		f.set("host.pcie.max_gen", p.From, gens...)
	}
	if len(widths) > 0 {
		f.set("host.pcie.width", p.From, widths...)
	}
	// ACS: redirecting bridges, else known-clean bridges, else unknown.
	var redirect []string
	var first *probe.Bridge
	unknownACS := 0
	for i, b := range p.Bridges {
		switch {
		case b.ACS == nil:
			unknownACS++
		case b.ACS.RedirectsP2P:
			redirect = append(redirect, b.Address)
			if first == nil {
				first = &p.Bridges[i]
			}
		}
	}
	switch {
	case len(redirect) > 0:
		f.set("host.acs", fmt.Sprintf("ACS redirects P2P at %d bridge(s) above the GPUs: %s; at %s (%s): %s, from %s", len(redirect), strings.Join(redirect, " "),
			first.Address, firstNonEmpty(first.PortType, "bridge"), strings.Join(first.ACS.Enabled, " "), first.ACS.From), "redirects")
	case unknownACS > 0:
		f.unknownBecause("host.acs", fmt.Sprintf("%d bridge(s) above the GPUs with ACS unread (%s)", unknownACS, firstNonEmpty(unknownKeyWith(r, ".acs"), "the extended config space is readable by root only")))
	case len(p.Bridges) > 0:
		f.set("host.acs", fmt.Sprintf("%d bridge(s) above the GPUs, none redirects P2P", len(p.Bridges)), "off")
	default:
		f.set("host.acs", "no bridge above the GPUs", "off")
	}
	if p.SpansSockets != nil {
		f.set("host.numa.span", fmt.Sprintf("GPUs on sockets %v, NUMA nodes %v (%s)", p.Sockets, p.NUMANodes, p.From), strconv.FormatBool(*p.SpansSockets))
	} else if p.SpansNUMA != nil {
		f.set("host.numa.span", fmt.Sprintf("GPUs on NUMA nodes %v (%s)", p.NUMANodes, p.From), strconv.FormatBool(*p.SpansNUMA))
	} else {
		f.unknownBecause("host.numa.span", "a GPU's NUMA node or socket is unknown (numa_node -1, as in most VMs)")
	}
	// BAR1 below the GPU's memory: peers map it through a smaller window.
	mem := map[int]int{}
	for _, g := range h.GPUs {
		mem[g.Index] = g.MemoryMiB
	}
	var small []string
	bars := 0
	for _, g := range p.GPUs {
		if g.BAR1Bytes <= 0 {
			continue
		}
		bars++
		if g.Index != nil && mem[*g.Index] > 0 && g.BAR1Bytes < int64(mem[*g.Index])<<20 {
			small = append(small, fmt.Sprintf("GPU %d (%s) BAR1 %d MiB of %d MiB memory (%s)", *g.Index, g.Address, g.BAR1Bytes>>20, mem[*g.Index], g.BAR1From))
		}
	}
	switch {
	case bars == 0:
		f.unknownBecause("host.bar1", "no BAR1 size in the report")
	case len(small) > 0:
		f.set("host.bar1.small", strings.Join(small, "; "), "true")
	default:
		f.set("host.bar1.small", fmt.Sprintf("%d GPU(s) with BAR1 at least their memory", bars), "false")
	}
}

// unknownKeyWith is the first reason of the report's unknown entries
// whose key ends with suffix.
func unknownKeyWith(r *probe.Report, suffix string) string {
	for _, k := range sortedKeys(r.Unknown) {
		if strings.HasSuffix(k, suffix) {
			return k + ": " + r.Unknown[k]
		}
	}
	return ""
}

func iommuFacts(f *Facts, r *probe.Report, h *probe.Host) {
	m := h.IOMMU
	if m == nil || m.Mode == "" || m.Mode == probe.Unknown {
		f.unknownBecause("host.iommu", unknownOr(r, "host.iommu", "the report does not say the IOMMU's mode"))
		return
	}
	f.set("host.iommu", strings.Join(m.Evidence, "; "), m.Mode)
}

func driverFacts(f *Facts, r *probe.Report, h *probe.Host) {
	d := h.NvidiaDriver
	if d == nil || d.Params == nil {
		f.unknownBecause("host.registry_dwords", unknownOr(r, "host.nvidia_driver", "the report has no /proc/driver/nvidia/params"))
		f.unknownBecause("host.force_p2p", unknownOr(r, "host.nvidia_driver", "the report has no /proc/driver/nvidia/params"))
		return
	}
	from := firstNonEmpty(d.ParamsFrom, "/proc/driver/nvidia/params")
	var kv []string
	for _, k := range sortedKeys(d.RegistryDwords) {
		kv = append(kv, k+"="+d.RegistryDwords[k])
	}
	f.set("host.registry_dwords", from+" RegistryDwords", kv...)
	if v, ok := d.RegistryDwords["ForceP2P"]; ok {
		f.set("host.force_p2p", from+" RegistryDwords ForceP2P", v)
	} else {
		f.none("host.force_p2p", from+": RegistryDwords sets no ForceP2P")
	}
}
