package probe

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// The PCIe facts are read from /sys, without lspci or setpci: the devices
// of /sys/bus/pci/devices (links into /sys/devices, whose parent
// directories are the bridges above a device), their attribute files, and
// the binary config file, whose extended capabilities hold ACS.

var pciAddrRe = lazyre.New(`^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// readPCIe lists the NVIDIA GPUs of sys with their links, NUMA nodes,
// BAR 1 and the bridges above them. What it cannot read goes to r under
// "host.pcie...".
func readPCIe(sys *hostTree, r *Report) *PCIe {
	const dir = "bus/pci/devices"
	names, err := sys.readDir(dir)
	if err != nil {
		r.unknown("host.pcie", err.Error())
		return nil
	}
	sort.Strings(names)
	p := &PCIe{From: sys.show(dir), GPUs: []PCIGPU{}, Bridges: []Bridge{}, NUMANodes: []int{}, Sockets: []int{}}
	bridges := map[string]*Bridge{}
	for _, addr := range names {
		if !pciAddrRe().MatchString(addr) {
			continue
		}
		if sys.ctx.Err() != nil {
			r.unknown("host.pcie", fmt.Sprintf("%s: not read to the end: %v", p.From, sys.ctx.Err()))
			break
		}
		dev := path.Join(dir, addr)
		vendor, err := sys.line(path.Join(dev, "vendor"))
		if err != nil || !strings.EqualFold(vendor, "0x10de") {
			continue
		}
		class, err := sys.line(path.Join(dev, "class"))
		if err != nil {
			r.unknown("host.pcie.devices["+addr+"]", "NVIDIA device whose class could not be read: "+err.Error())
			continue
		}
		if c, err := strconv.ParseUint(strings.TrimPrefix(class, "0x"), 16, 32); err != nil || c>>16 != 0x03 {
			continue // an audio function, an NVSwitch
		}
		g := readPCIGPU(sys, r, addr)
		for _, b := range g.Bridges {
			br := bridges[b]
			if br == nil {
				br = &Bridge{Address: b, GPUs: []string{}}
				bridges[b] = br
			}
			br.GPUs = append(br.GPUs, addr)
		}
		p.GPUs = append(p.GPUs, g)
	}
	// A bridge's directory is the part of a GPU's real path up to it.
	for _, g := range p.GPUs {
		real := strings.TrimPrefix(g.SysfsPath, sys.base+"/")
		for _, b := range g.Bridges {
			br := bridges[b]
			if br.SysfsPath != "" {
				continue
			}
			i := strings.Index(real, "/"+b+"/")
			br.SysfsPath = sys.show(real[:i+1+len(b)])
		}
	}
	for _, a := range slices.Sorted(maps.Keys(bridges)) {
		br := bridges[a]
		readBridge(sys, r, br)
		p.Bridges = append(p.Bridges, *br)
	}
	p.NUMANodes, p.SpansNUMA = spread(p.GPUs, func(g PCIGPU) *int { return g.NUMANode })
	p.Sockets, p.SpansSockets = spread(p.GPUs, func(g PCIGPU) *int { return g.Socket })
	return p
}

// spread is the distinct known values of f over gs, and whether they
// span more than one: true with two or more known, false when every GPU's
// is known and they agree, nil otherwise.
func spread(gs []PCIGPU, f func(PCIGPU) *int) ([]int, *bool) {
	set := map[int]bool{}
	known := 0
	for _, g := range gs {
		if v := f(g); v != nil {
			set[*v] = true
			known++
		}
	}
	vals := []int{}
	for v := range set {
		vals = append(vals, v)
	}
	sort.Ints(vals)
	var spans *bool
	switch {
	case len(vals) >= 2:
		spans = ptr(true)
	case len(gs) > 0 && known == len(gs):
		spans = ptr(false)
	}
	return vals, spans
}

func ptr[T any](v T) *T { return &v }

// readPCIGPU reads one GPU's directory.
func readPCIGPU(sys *hostTree, r *Report, addr string) PCIGPU {
	dev := path.Join("bus/pci/devices", addr)
	key := "host.pcie.gpus[" + addr + "]."
	g := PCIGPU{Address: addr, Bridges: []string{}}
	if real, err := sys.resolve(dev); err != nil {
		g.SysfsPath = sys.show(dev)
		r.unknown(key+"bridges", err.Error())
	} else {
		g.SysfsPath = sys.show(real)
		g.Bridges, g.RootComplex = pathBridges(real, addr)
		dev = real
	}
	v, verr := sys.line(path.Join(dev, "vendor"))
	d, derr := sys.line(path.Join(dev, "device"))
	if verr == nil && derr == nil {
		g.VendorDevice = strings.TrimPrefix(v, "0x") + ":" + strings.TrimPrefix(d, "0x")
	}
	if l, err := readLink(sys, dev); err != nil {
		r.unknown(key+"link", err.Error())
	} else {
		g.Link = l
	}
	f := path.Join(dev, "numa_node")
	if s, err := sys.line(f); err != nil {
		r.unknown(key+"numa_node", err.Error())
	} else if n, err := strconv.Atoi(s); err != nil || n < -1 {
		r.unknown(key+"numa_node", fmt.Sprintf("%s: %q is not a node number", sys.show(f), clip(s, 40)))
	} else if n == -1 {
		r.unknown(key+"numa_node", sys.show(f)+": -1 (the firmware gives no NUMA node, as in most VMs)")
	} else {
		g.NUMANode, g.NUMANodeFrom = &n, sys.show(f)
	}
	f = path.Join(dev, "local_cpulist")
	if s, err := sys.line(f); err != nil {
		r.unknown(key+"local_cpulist", err.Error())
	} else if cpu, err := FirstCPU(s); err != nil {
		r.unknown(key+"local_cpulist", fmt.Sprintf("%s: %v", sys.show(f), err))
	} else {
		g.LocalCPUs, g.LocalCPUsFrom = s, sys.show(f)
		pf := fmt.Sprintf("devices/system/cpu/cpu%d/topology/physical_package_id", cpu)
		if ps, err := sys.line(pf); err != nil {
			r.unknown(key+"socket", err.Error())
		} else if n, err := strconv.Atoi(ps); err != nil || n < 0 {
			r.unknown(key+"socket", fmt.Sprintf("%s: %q is not a package number", sys.show(pf), clip(ps, 40)))
		} else {
			g.Socket, g.SocketFrom = &n, sys.show(pf)
		}
	}
	f = path.Join(dev, "resource")
	if data, err := sys.read(f, maxSysFile); err != nil {
		r.unknown(key+"bar1", err.Error())
	} else if n, line, err := BAR1(data); err != nil {
		r.unknown(key+"bar1", fmt.Sprintf("%s: %v", sys.show(f), err))
	} else {
		g.BAR1Bytes, g.BAR1From = n, fmt.Sprintf("%s line %d", sys.show(f), line)
	}
	readIOMMUGroup(sys, r, &g, dev, key)
	return g
}

// pathBridges are the PCI addresses on the real path of the device addr
// ("devices/pci0000:16/0000:16:01.0/0000:17:00.0"), nearest first, and the
// root complex it hangs from ("pci0000:16").
func pathBridges(real, addr string) ([]string, string) {
	parts := strings.Split(real, "/")
	var bs []string
	root := ""
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		if strings.HasPrefix(p, "pci") && root == "" && i < len(parts)-1 {
			root = p
		}
		if !pciAddrRe().MatchString(p) || p == addr {
			continue
		}
		if root == "" {
			bs = append(bs, p)
		}
	}
	if bs == nil {
		bs = []string{}
	}
	return bs, root
}

// readLink reads the four link files of a device directory.
func readLink(sys *hostTree, dev string) (*Link, error) {
	l := &Link{From: sys.show(dev)}
	var err error
	read := func(name string) string {
		if err != nil {
			return ""
		}
		var s string
		s, err = sys.line(path.Join(dev, name))
		return s
	}
	cs, cw, ms, mw := read("current_link_speed"), read("current_link_width"), read("max_link_speed"), read("max_link_width")
	if err != nil {
		return nil, err
	}
	l.CurrentSpeed, l.MaxSpeed = cs, ms
	l.CurrentGen, _ = PCIeGen(cs)
	l.MaxGen, _ = PCIeGen(ms)
	for _, w := range []struct {
		s    string
		name string
		to   *int
	}{{cw, "current_link_width", &l.CurrentWidth}, {mw, "max_link_width", &l.MaxWidth}} {
		n, werr := ParseLinkWidth(w.s)
		if werr != nil {
			return nil, fmt.Errorf("%s: %v", sys.show(path.Join(dev, w.name)), werr)
		}
		*w.to = n
	}
	return l, nil
}

// pcieGens are the PCIe generations by transfer rate (GT/s, times ten).
var pcieGens = map[int]int{25: 1, 50: 2, 80: 3, 160: 4, 320: 5, 640: 6, 1280: 7}

// PCIeGen is the PCIe generation of a link speed as /sys writes it
// ("32.0 GT/s PCIe" is 5; older kernels wrote "8 GT/s", "2.5 GT/s"), and
// whether the text is one; "Unknown" and other text are 0, false.
func PCIeGen(speed string) (int, bool) {
	f := strings.Fields(speed)
	if len(f) < 2 || f[1] != "GT/s" {
		return 0, false
	}
	whole, frac, _ := strings.Cut(f[0], ".")
	if len(whole) == 0 || len(whole) > 4 || len(frac) > 1 {
		return 0, false
	}
	w, err := strconv.Atoi(whole)
	if err != nil || w < 0 {
		return 0, false
	}
	t := 0
	if frac != "" {
		if t, err = strconv.Atoi(frac); err != nil || t < 0 {
			return 0, false
		}
	}
	g, ok := pcieGens[w*10+t]
	return g, ok
}

// ParseLinkWidth reads a link width file ("16"; 0 for a link the device
// does not report).
func ParseLinkWidth(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(s), "x"))
	if err != nil || n < 0 || n > 32 {
		return 0, fmt.Errorf("%q is not a link width", clip(s, 40))
	}
	return n, nil
}

// FirstCPU is the first CPU of a CPU list ("0-31,64-95" is 0).
func FirstCPU(list string) (int, error) {
	first, _, _ := strings.Cut(strings.TrimSpace(list), ",")
	first, _, _ = strings.Cut(first, "-")
	n, err := strconv.Atoi(first)
	if err != nil || n < 0 || n >= 1<<20 {
		return 0, fmt.Errorf("%q is not a CPU list", clip(list, 40))
	}
	return n, nil
}

// BAR1 is the size of what NVIDIA calls BAR 1, the framebuffer aperture
// peers map, from a device's resource file: one line per region, "START
// END FLAGS" in hex, the six standard BARs first, a 64-bit BAR leaving the
// line after it zero. BAR 1 is the second memory region: line 2 where
// BAR 0 is 32-bit, line 3 where it is 64-bit (H100, H200). line is the
// 1-based line it was read from.
func BAR1(resource []byte) (size int64, line int, err error) {
	lines := strings.Split(string(resource), "\n")
	mem := 0
	for i := 0; i < 6 && i < len(lines); i++ {
		f := strings.Fields(lines[i])
		if len(f) != 3 {
			return 0, 0, fmt.Errorf("line %d: %q is not START END FLAGS", i+1, clip(lines[i], 80))
		}
		start, err1 := strconv.ParseUint(f[0], 0, 64)
		end, err2 := strconv.ParseUint(f[1], 0, 64)
		flags, err3 := strconv.ParseUint(f[2], 0, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return 0, 0, fmt.Errorf("line %d: %q is not START END FLAGS", i+1, clip(lines[i], 80))
		}
		if start == 0 && end == 0 || flags&0x200 == 0 { // unused, or not IORESOURCE_MEM
			continue
		}
		if end < start || end-start >= 1<<62 {
			return 0, 0, fmt.Errorf("line %d: end 0x%x before start 0x%x", i+1, end, start)
		}
		if mem++; mem == 2 {
			return int64(end - start + 1), i + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("%d memory regions in the standard BARs: no BAR 1", mem)
}

// readBridge reads a bridge's IDs and its ACS capability.
func readBridge(sys *hostTree, r *Report, br *Bridge) {
	dir := strings.TrimPrefix(br.SysfsPath, sys.base+"/")
	v, verr := sys.line(path.Join(dir, "vendor"))
	d, derr := sys.line(path.Join(dir, "device"))
	if verr == nil && derr == nil {
		br.VendorDevice = strings.TrimPrefix(v, "0x") + ":" + strings.TrimPrefix(d, "0x")
	}
	key := "host.pcie.bridges[" + br.Address + "].acs"
	f := path.Join(dir, "config")
	cfg, err := sys.read(f, cfgExtEnd)
	if err != nil {
		r.unknown(key, err.Error())
		return
	}
	if t, err := PCIePortType(cfg); err == nil {
		br.PortType = t
	}
	acs, err := ReadACS(cfg)
	if err != nil {
		why := fmt.Sprintf("%s: %v", sys.show(f), err)
		if len(cfg) < cfgExtStart+4 && os.Geteuid() != 0 {
			why += " (the kernel gives the extended config space to root only: run the probe as root to read ACS)"
		}
		r.unknown(key, why)
		return
	}
	acs.From = sys.show(f)
	br.ACS = acs
}

// readIOMMUGroup reads the device's iommu_group link and the group's type.
func readIOMMUGroup(sys *hostTree, r *Report, g *PCIGPU, dev, key string) {
	link := path.Join(dev, "iommu_group")
	target, err := sys.readlink(link)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return // no IOMMU group: no IOMMU, said in host.iommu
		}
		r.unknown(key+"iommu_group", err.Error())
		return
	}
	n, err := strconv.Atoi(path.Base(target))
	if err != nil || n < 0 {
		r.unknown(key+"iommu_group", fmt.Sprintf("%s: links to %q, not a group number", sys.show(link), clip(target, 80)))
		return
	}
	g.IOMMUGroup = &n
	f := fmt.Sprintf("kernel/iommu_groups/%d/type", n)
	if s, err := sys.line(f); err != nil {
		r.unknown(key+"iommu_group_type", err.Error())
	} else {
		g.IOMMUGroupType = s
	}
}
