package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/probe"
)

// The host's PCIe, IOMMU and driver facts in probe's text report.

// hostRoots points o at the /sys and /proc of $SMPATCH_SYSFS and
// $SMPATCH_PROCFS when they are set (a synthetic host).
func hostRoots(o probe.Options) probe.Options {
	o.SysRoot = cmp.Or(o.SysRoot, os.Getenv("SMPATCH_SYSFS"))
	o.ProcRoot = cmp.Or(o.ProcRoot, os.Getenv("SMPATCH_PROCFS"))
	return o
}

// printPCIe writes each GPU's link, NUMA node and BAR1, whether the GPUs
// span nodes and sockets, and the bridges above them with their ACS.
func printPCIe(w io.Writer, r *probe.Report) {
	p := r.Host.PCIe
	if p == nil {
		if why, ok := r.Unknown["host.pcie"]; ok {
			fmt.Fprintf(w, "PCIe: unknown (%s)\n", why)
		}
		return
	}
	if len(p.GPUs) == 0 {
		fmt.Fprintf(w, "PCIe (%s): no NVIDIA GPU listed\n", p.From)
		return
	}
	fmt.Fprintf(w, "PCIe (%s):\n", p.From)
	for _, g := range p.GPUs {
		idx := "GPU ?"
		if g.Index != nil {
			idx = "GPU " + strconv.Itoa(*g.Index)
		}
		parts := []string{idx, g.Address, linkText(g.Link)}
		if g.NUMANode != nil {
			parts = append(parts, "NUMA "+strconv.Itoa(*g.NUMANode))
		} else {
			parts = append(parts, "NUMA unknown")
		}
		if g.Socket != nil {
			parts = append(parts, "socket "+strconv.Itoa(*g.Socket))
		}
		if g.BAR1Bytes > 0 {
			parts = append(parts, "BAR1 "+bytesText(g.BAR1Bytes))
		}
		if g.IOMMUGroupType != "" {
			parts = append(parts, "iommu group "+strconv.Itoa(*g.IOMMUGroup)+" "+g.IOMMUGroupType)
		}
		path := g.RootComplex
		if len(g.Bridges) > 0 {
			path += " via " + strings.Join(g.Bridges, " ")
		}
		if path != "" {
			parts = append(parts, path)
		}
		fmt.Fprintf(w, "  %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "  NUMA nodes: %s; sockets: %s\n", spanText(p.SpansNUMA, p.NUMANodes), spanText(p.SpansSockets, p.Sockets))
	for _, b := range p.Bridges {
		what := strings.TrimSpace(b.PortType + " " + paren(b.VendorDevice))
		fmt.Fprintf(w, "  bridge %s %s above %s: %s\n", b.Address, what, strings.Join(b.GPUs, " "), acsText(b.ACS))
	}
}

func linkText(l *probe.Link) string {
	if l == nil {
		return "link unknown"
	}
	gen := func(g int, speed string) string {
		if g > 0 {
			return "Gen" + strconv.Itoa(g)
		}
		return cmp.Or(speed, "?")
	}
	s := fmt.Sprintf("%s x%d", gen(l.CurrentGen, l.CurrentSpeed), l.CurrentWidth)
	if l.CurrentGen != l.MaxGen || l.CurrentWidth != l.MaxWidth {
		s += fmt.Sprintf(" (max %s x%d)", gen(l.MaxGen, l.MaxSpeed), l.MaxWidth)
	}
	return s
}

// spanText is the distinct values and whether the GPUs span more than one.
func spanText(spans *bool, vals []int) string {
	var ns []string
	for _, v := range vals {
		ns = append(ns, strconv.Itoa(v))
	}
	list := strings.Join(ns, " ")
	switch {
	case spans == nil && list == "":
		return "unknown"
	case spans == nil:
		return list + " and unknown"
	case *spans:
		return list + " (spans " + strconv.Itoa(len(vals)) + ")"
	}
	return list + " (one)"
}

func acsText(a *probe.ACS) string {
	switch {
	case a == nil:
		return "ACS unknown"
	case !a.Present:
		return "no ACS capability"
	case len(a.Enabled) == 0:
		return fmt.Sprintf("ACS nothing enabled (control 0x%04x at 0x%x)", a.Control, a.Offset)
	}
	s := fmt.Sprintf("ACS %s (control 0x%04x at 0x%x)", strings.Join(a.Enabled, " "), a.Control, a.Offset)
	if a.RedirectsP2P {
		s += ": P2P redirected upstream"
	}
	return s
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

// bytesText is n in GiB or MiB when it is a whole number of them.
func bytesText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// printIOMMU writes the IOMMU mode with its evidence, and the kernel
// command line's IOMMU and PCI parameters.
func printIOMMU(w io.Writer, r *probe.Report) {
	m := r.Host.IOMMU
	if m == nil {
		return
	}
	fmt.Fprintf(w, "IOMMU: %s (%s)\n", m.Mode, strings.Join(m.Evidence, "; "))
	if len(m.CmdlineParams) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(m.CmdlineParams)) {
			kv = append(kv, k+"="+m.CmdlineParams[k])
		}
		fmt.Fprintf(w, "  kernel command line: %s (%s)\n", strings.Join(kv, " "), m.CmdlineFrom)
	}
}

// driverParams are the nvidia module parameters the text report shows;
// --json has them all.
var driverParams = []string{"EnableResizableBar", "NvLinkDisable", "DmaRemapPeerMmio", "GrdmaPciTopoCheckOverride"}

// printDriver writes the nvidia module, its RegistryDwords and the
// parameters that bear on peer traffic.
func printDriver(w io.Writer, r *probe.Report) {
	d := r.Host.NvidiaDriver
	if d == nil {
		return
	}
	if d.Version != "" {
		fmt.Fprintf(w, "nvidia module: %s %s (%s)\n", d.Version, d.Module, d.VersionFrom)
	} else {
		fmt.Fprintln(w, "nvidia module: version unknown")
	}
	if d.Params == nil {
		return
	}
	var kv []string
	for _, k := range driverParams {
		if v, ok := d.Params[k]; ok {
			kv = append(kv, k+"="+v)
		}
	}
	dw := "none"
	if len(d.RegistryDwords) > 0 {
		var ps []string
		for _, k := range slices.Sorted(maps.Keys(d.RegistryDwords)) {
			ps = append(ps, k+"="+d.RegistryDwords[k])
		}
		dw = strings.Join(ps, " ")
	}
	fmt.Fprintf(w, "  RegistryDwords: %s; %s (%s)\n", dw, strings.Join(kv, " "), d.ParamsFrom)
	for _, a := range slices.Sorted(maps.Keys(d.RegistryDwordsPerDevice)) {
		var ps []string
		for _, k := range slices.Sorted(maps.Keys(d.RegistryDwordsPerDevice[a])) {
			ps = append(ps, k+"="+d.RegistryDwordsPerDevice[a][k])
		}
		fmt.Fprintf(w, "  RegistryDwordsPerDevice %s: %s\n", a, strings.Join(ps, " "))
	}
}

// printPackageExtras writes what a package's libraries and tools say of
// themselves: NCCL's own version, triton's ptxas, each kernel file's arches.
func printPackageExtras(w io.Writer, p *probe.Package) {
	if p.LibVersion != "" {
		fmt.Fprintf(w, "  %-22s library: NCCL %s (%s)\n", "", p.LibVersion, p.LibVersionFrom)
	}
	if pt := p.PTXAS; pt != nil {
		ts := "targets unknown"
		if n := len(pt.Targets); n > 0 {
			ts = "targets " + pt.Targets[0] + " … " + pt.Targets[n-1]
		}
		fmt.Fprintf(w, "  %-22s ptxas %s, %s (%s)\n", "", cmp.Or(pt.Version, "version unknown"), ts, pt.Path)
	}
	for _, f := range p.Files {
		fmt.Fprintf(w, "  %-22s %s: %s\n", "", f.Path, joinOrNone(f.Arches))
	}
}
