package probe

import (
	"context"
	"path"
	"sort"
	"strconv"
	"strings"
)

// hostFacts are the host's static facts: PCIe, IOMMU and the nvidia
// driver, read from /sys and /proc.
type hostFacts struct {
	pcie   *PCIe
	iommu  *IOMMU
	driver *NvidiaDriver
	uuids  map[string]string // PCI address → GPU UUID, from /proc/driver/nvidia/gpus
	from   string            // where uuids came from
}

// readHostFacts reads sysRoot and procRoot (shown as "/sys" and "/proc"
// when they are those) within ctx; what it cannot read goes to r.
func readHostFacts(ctx context.Context, r *Report, sysRoot, procRoot string) *hostFacts {
	f := &hostFacts{}
	sys, err := openHostTree(ctx, sysRoot, sysRoot)
	if err != nil {
		r.unknown("host.pcie", err.Error())
	}
	defer sys.close()
	proc, err := openHostTree(ctx, procRoot, procRoot)
	if err != nil {
		r.unknown("host.nvidia_driver", err.Error())
		r.unknown("host.iommu.cmdline", err.Error())
	}
	defer proc.close()
	if sys != nil {
		f.pcie = readPCIe(sys, r)
	}
	if sys != nil || proc != nil {
		f.iommu = readIOMMU(sys, proc, r, f.pcie)
	}
	if proc != nil {
		f.driver = readNvidiaDriver(proc, r)
		f.uuids, f.from = procGPUUUIDs(proc)
	}
	return f
}

// procGPUUUIDs maps the PCI address of each GPU the driver lists in
// /proc/driver/nvidia/gpus to the GPU UUID its information file gives.
func procGPUUUIDs(proc *hostTree) (map[string]string, string) {
	const dir = "driver/nvidia/gpus"
	names, err := proc.readDir(dir)
	if err != nil {
		return nil, ""
	}
	out := map[string]string{}
	for _, addr := range names {
		data, err := proc.read(path.Join(dir, addr, "information"), maxProcFile)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && strings.TrimSpace(k) == "GPU UUID" {
				if u := strings.TrimSpace(v); strings.HasPrefix(u, "GPU-") {
					out[strings.ToLower(addr)] = u
				}
			}
		}
	}
	return out, proc.show(path.Join(dir, "ADDR", "information"))
}

// matchGPUs gives each PCIe GPU the index of the GPU it is in gpus: by
// UUID where the driver's information files name one; else, when the
// driver names none and every GPU is listed in both, by order, as
// nvidia-smi lists GPUs in PCI bus order. A GPU left unmatched is said in r.
func (f *hostFacts) matchGPUs(r *Report, gpus []GPU, source string) {
	p := f.pcie
	if p == nil || len(gpus) == 0 {
		return
	}
	byUUID := map[string]int{}
	for _, g := range gpus {
		if g.UUID != "" {
			byUUID[g.UUID] = g.Index
		}
	}
	matched := 0
	for i := range p.GPUs {
		u := f.uuids[strings.ToLower(p.GPUs[i].Address)]
		if idx, ok := byUUID[u]; ok && u != "" {
			p.GPUs[i].Index, p.GPUs[i].IndexFrom = ptr(idx), "GPU UUID "+u+" in "+strings.Replace(f.from, "ADDR", p.GPUs[i].Address, 1)
			matched++
		}
	}
	if matched == len(p.GPUs) {
		return
	}
	if len(f.uuids) == 0 && len(p.GPUs) == len(gpus) {
		sorted := append([]GPU(nil), gpus...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
		how := "nvidia-smi lists GPUs in PCI bus order: the " + strconv.Itoa(len(gpus)) + " GPUs of " + source + " against the " + strconv.Itoa(len(p.GPUs)) + " of " + p.From
		for i := range p.GPUs { // p.GPUs are sorted by address
			p.GPUs[i].Index, p.GPUs[i].IndexFrom = ptr(sorted[i].Index), how
		}
		return
	}
	for _, g := range p.GPUs {
		if g.Index != nil {
			continue
		}
		why := "no GPU UUID for it in /proc/driver/nvidia/gpus, and " + source + " lists " + strconv.Itoa(len(gpus)) + " GPUs where " + p.From + " has " + strconv.Itoa(len(p.GPUs))
		if u := f.uuids[strings.ToLower(g.Address)]; u != "" {
			why = "no GPU of " + source + " has the UUID " + u + " that " + strings.Replace(f.from, "ADDR", g.Address, 1) + " gives"
		}
		r.unknown("host.pcie.gpus["+g.Address+"].index", why)
	}
}
