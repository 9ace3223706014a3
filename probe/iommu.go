package probe

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// iommuParams are the kernel command-line parameters the IOMMU facts keep.
var iommuParams = map[string]bool{
	"iommu": true, "iommu.passthrough": true, "iommu.strict": true,
	"amd_iommu": true, "intel_iommu": true, "pci": true,
}

// maxCmdline bounds /proc/cmdline (the kernel's own limit is a few KiB).
const maxCmdline = 64 << 10

// ParseCmdline splits a kernel command line into its parameters the way
// the kernel does (spaces separate, double quotes group, "--" ends the
// kernel's part) and returns the
// IOMMU and PCI ones (iommu, iommu.passthrough, iommu.strict, amd_iommu,
// intel_iommu, pci), a parameter given more than once with its values
// joined by commas in order. A parameter without a value maps to "".
func ParseCmdline(cmdline string) map[string]string {
	out := map[string]string{}
	for _, arg := range splitCmdline(cmdline) {
		if arg == "--" {
			break // the rest is init's
		}
		k, v, _ := strings.Cut(strings.TrimPrefix(arg, `"`), "=")
		k = strings.ReplaceAll(k, "-", "_") // the kernel reads dashes as underscores in names
		if !iommuParams[k] {
			continue
		}
		v = strings.Trim(v, `"`)
		if old, ok := out[k]; ok && old != "" {
			v = old + "," + v
		}
		out[k] = v
	}
	return out
}

// splitCmdline splits at spaces outside double quotes.
func splitCmdline(s string) []string {
	var args []string
	var b strings.Builder
	quoted := false
	for _, c := range s {
		switch {
		case c == '"':
			quoted = !quoted
			b.WriteRune(c)
		case (c == ' ' || c == '\t' || c == '\n') && !quoted:
			if b.Len() > 0 {
				args = append(args, b.String())
				b.Reset()
			}
		default:
			b.WriteRune(c)
		}
	}
	if b.Len() > 0 {
		args = append(args, b.String())
	}
	return args
}

// hasOption reports whether a comma list ("on,sm_on", "noacs,realloc")
// holds opt.
func hasOption(list, opt string) bool {
	for _, o := range strings.Split(list, ",") {
		if strings.TrimSpace(o) == opt {
			return true
		}
	}
	return false
}

// readIOMMU reads /sys/class/iommu, /sys/kernel/iommu_groups and
// /proc/cmdline, and derives the mode, with the GPUs' group types when
// pcie has them.
func readIOMMU(sys, proc *hostTree, r *Report, pcie *PCIe) *IOMMU {
	m := &IOMMU{Devices: []string{}, Evidence: []string{}}
	devsKnown, groupsKnown := false, false
	if sys != nil {
		if names, err := sys.readDir("class/iommu"); err == nil {
			sort.Strings(names)
			m.Devices, m.DevicesFrom, devsKnown = names, sys.show("class/iommu"), true
		} else if isNotExist(err) {
			// No such class: the kernel registered no IOMMU.
			m.DevicesFrom, devsKnown = sys.show("class/iommu"), true
		} else {
			r.unknown("host.iommu.devices", err.Error())
		}
		if names, err := sys.readDir("kernel/iommu_groups"); err == nil {
			m.Groups, m.GroupsFrom, groupsKnown = ptr(len(names)), sys.show("kernel/iommu_groups"), true
		} else if isNotExist(err) {
			m.Groups, m.GroupsFrom, groupsKnown = ptr(0), sys.show("kernel/iommu_groups"), true
		} else {
			r.unknown("host.iommu.groups", err.Error())
		}
	}
	if proc != nil {
		if data, err := proc.read("cmdline", maxCmdline); err != nil {
			r.unknown("host.iommu.cmdline", err.Error())
		} else {
			m.Cmdline = strings.TrimSpace(string(data))
			m.CmdlineFrom = proc.show("cmdline")
			m.CmdlineParams = ParseCmdline(m.Cmdline)
		}
	}
	var types map[string]string
	if pcie != nil {
		types = map[string]string{}
		for _, g := range pcie.GPUs {
			if g.IOMMUGroupType != "" {
				types[g.Address] = g.IOMMUGroupType
			}
		}
	}
	f := iommuFacts{
		devices: m.Devices, devicesKnown: devsKnown, devicesFrom: m.DevicesFrom,
		groupsKnown: groupsKnown, groupsFrom: m.GroupsFrom,
		cmdline: m.CmdlineParams, cmdlineFrom: m.CmdlineFrom, groupTypes: types,
	}
	if m.Groups != nil {
		f.groups = *m.Groups
	}
	m.Mode, m.Evidence = f.mode()
	if m.Mode == Unknown {
		r.unknown("host.iommu.mode", strings.Join(m.Evidence, "; "))
	}
	return m
}

// iommuFacts are what the mode is derived from.
type iommuFacts struct {
	devices      []string
	devicesKnown bool
	devicesFrom  string
	groups       int
	groupsKnown  bool
	groupsFrom   string
	cmdline      map[string]string // nil: not read
	cmdlineFrom  string
	groupTypes   map[string]string // GPU address → its group's type
}

// mode derives the IOMMU mode: the GPUs' group types first (the kernel's
// own word on how their DMA is mapped), then no IOMMU at all, then the
// command line.
func (f iommuFacts) mode() (string, []string) {
	var ev []string
	if len(f.groupTypes) > 0 {
		addrs := make([]string, 0, len(f.groupTypes))
		for a := range f.groupTypes {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		identity, translated, other := 0, 0, 0
		for _, a := range addrs {
			switch t := f.groupTypes[a]; t {
			case "identity":
				identity++
			case "DMA", "DMA-FQ":
				translated++
			default:
				other++
			}
		}
		ev = append(ev, "iommu_groups/N/type of the GPUs' groups: "+groupTypeSummary(addrs, f.groupTypes))
		switch {
		case translated > 0:
			return "translated", ev
		case identity > 0 && other == 0:
			return "passthrough", ev
		}
	}
	p := f.cmdline
	if f.devicesKnown && len(f.devices) == 0 && f.groupsKnown && f.groups == 0 {
		ev = append(ev, f.devicesFrom+": none (no IOMMU registered)", f.groupsFrom+": 0 groups")
		return "off", ev
	}
	if f.devicesKnown && len(f.devices) > 0 {
		ev = append(ev, f.devicesFrom+": "+strings.Join(f.devices, " "))
	}
	if f.groupsKnown {
		ev = append(ev, f.groupsFrom+": "+strconv.Itoa(f.groups)+" groups")
	}
	if p != nil {
		for _, k := range []string{"iommu", "amd_iommu", "intel_iommu"} {
			if v, ok := p[k]; ok && hasOption(v, "off") {
				return "off", append(ev, fmt.Sprintf("%s: %s=%s", f.cmdlineFrom, k, v))
			}
		}
		if v, ok := p["iommu"]; ok && hasOption(v, "pt") {
			return "passthrough", append(ev, fmt.Sprintf("%s: iommu=%s", f.cmdlineFrom, v))
		}
		if v, ok := p["iommu.passthrough"]; ok {
			last := v[strings.LastIndex(v, ",")+1:]
			switch last {
			case "1", "y", "Y", "on":
				return "passthrough", append(ev, fmt.Sprintf("%s: iommu.passthrough=%s", f.cmdlineFrom, v))
			case "0", "n", "N", "off":
				return "translated", append(ev, fmt.Sprintf("%s: iommu.passthrough=%s", f.cmdlineFrom, v))
			}
		}
		ev = append(ev, f.cmdlineFrom+": no iommu=pt, iommu=off or iommu.passthrough (the kernel's built-in default decides)")
	} else {
		ev = append(ev, "kernel command line not read")
	}
	return Unknown, ev
}

func groupTypeSummary(addrs []string, types map[string]string) string {
	byType := map[string][]string{}
	var order []string
	for _, a := range addrs {
		t := types[a]
		if _, ok := byType[t]; !ok {
			order = append(order, t)
		}
		byType[t] = append(byType[t], a)
	}
	var parts []string
	for _, t := range order {
		parts = append(parts, fmt.Sprintf("%s (%s)", t, strings.Join(byType[t], " ")))
	}
	return strings.Join(parts, ", ")
}
