package probe

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

// cfgSpace is a 4096-byte config space with the extended capability
// headers given as offset → (id, next).
func cfgSpace(size int, caps map[int][2]int) []byte {
	b := make([]byte, size)
	for off, c := range caps {
		binary.LittleEndian.PutUint32(b[off:], uint32(c[0])|1<<16|uint32(c[1])<<20)
	}
	return b
}

func TestFindExtCap(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  []byte
		off  int
		err  string
	}{
		{"ACS second", cfgSpace(4096, map[int][2]int{0x100: {1, 0x148}, 0x148: {ExtCapACS, 0}}), 0x148, ""},
		{"ACS first", cfgSpace(4096, map[int][2]int{0x100: {ExtCapACS, 0x200}}), 0x100, ""},
		{"backwards is allowed", cfgSpace(4096, map[int][2]int{0x100: {1, 0x300}, 0x300: {0xb, 0x200}, 0x200: {ExtCapACS, 0}}), 0x200, ""},
		{"no ACS", cfgSpace(4096, map[int][2]int{0x100: {1, 0x140}, 0x140: {2, 0}}), 0, ""},
		{"no extended capabilities", cfgSpace(4096, nil), 0, ""},
		{"all ones", append(make([]byte, 0x100), 0xff, 0xff, 0xff, 0xff), 0, ""},
		{"non-root 64 bytes", make([]byte, 64), 0, "64 bytes, the extended capabilities start at 0x100"},
		{"conventional 256 bytes", make([]byte, 256), 0, "256 bytes"},
		{"loop to itself", cfgSpace(4096, map[int][2]int{0x100: {1, 0x100}}), 0, "next pointer 0x100 loops"},
		{"loop of two", cfgSpace(4096, map[int][2]int{0x100: {1, 0x140}, 0x140: {2, 0x100}}), 0, "loops"},
		{"below 0x100", cfgSpace(4096, map[int][2]int{0x100: {1, 0x40}}), 0, "below 0x100"},
		{"unaligned", cfgSpace(4096, map[int][2]int{0x100: {1, 0x142}}), 0, "not dword-aligned"},
		{"past a short space", cfgSpace(0x180, map[int][2]int{0x100: {1, 0x200}}), 0, "past the 384 bytes"},
		{"header at the very end", cfgSpace(4096, map[int][2]int{0x100: {1, 0xffc}, 0xffc: {ExtCapACS, 0}}), 0xffc, ""},
	} {
		off, err := FindExtCap(c.cfg, ExtCapACS)
		if off != c.off || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: got 0x%x, %v; want 0x%x, %q", c.name, off, err, c.off, c.err)
		}
	}
}

func TestReadACS(t *testing.T) {
	cfg := cfgSpace(4096, map[int][2]int{0x100: {1, 0x150}, 0x150: {ExtCapACS, 0}})
	binary.LittleEndian.PutUint16(cfg[0x154:], 0x7f)
	binary.LittleEndian.PutUint16(cfg[0x156:], 0x7f)
	a, err := ReadACS(cfg)
	if err != nil || !a.Present || a.Offset != 0x150 || a.Capability != 0x7f || !a.RedirectsP2P || !reflect.DeepEqual(a.Enabled, acsBits) {
		t.Fatalf("all bits: %+v %v", a, err)
	}
	binary.LittleEndian.PutUint16(cfg[0x156:], 0x20) // egress control alone
	if a, _ := ReadACS(cfg); a.RedirectsP2P || !reflect.DeepEqual(a.Enabled, []string{"p2p_egress_control"}) {
		t.Errorf("egress only: %+v", a)
	}
	// An ACS header in the last dword leaves no room for its registers.
	cfg = cfgSpace(4096, map[int][2]int{0x100: {1, 0xffc}, 0xffc: {ExtCapACS, 0}})
	if _, err := ReadACS(cfg); err == nil || !strings.Contains(err.Error(), "past the 4096 bytes") {
		t.Errorf("truncated ACS: %v", err)
	}
}

func TestPCIePortType(t *testing.T) {
	cfg := make([]byte, 256)
	cfg[6] = 0x10
	cfg[0x34] = 0x40
	cfg[0x40], cfg[0x41] = 0x05, 0x50 // MSI, then PCIe
	cfg[0x50], cfg[0x52] = capPCIe, 0x62
	if s, err := PCIePortType(cfg); s != "switch downstream port" || err != nil {
		t.Errorf("downstream: %q %v", s, err)
	}
	cfg[0x51] = 0x50 // PCIe → itself: a loop
	cfg[0x50] = 0x09
	if _, err := PCIePortType(cfg); err == nil || !strings.Contains(err.Error(), "loops") {
		t.Errorf("loop: %v", err)
	}
	if s, err := PCIePortType(cfg[:64]); s != "" || err == nil {
		t.Errorf("64 bytes: %q %v", s, err)
	}
}

func TestPCIeGen(t *testing.T) {
	for in, want := range map[string]int{
		"2.5 GT/s PCIe": 1, "5.0 GT/s PCIe": 2, "8.0 GT/s PCIe": 3, "16.0 GT/s PCIe": 4,
		"32.0 GT/s PCIe": 5, "64.0 GT/s PCIe": 6, "8 GT/s": 3, "2.5 GT/s": 1, "16 GT/s": 4,
		"Unknown": 0, "": 0, "32.0 GB/s": 0, "12.0 GT/s PCIe": 0, "-5 GT/s": 0, "1e3 GT/s": 0, "32.00 GT/s": 0,
	} {
		if got, ok := PCIeGen(in); got != want || ok != (want != 0) {
			t.Errorf("PCIeGen(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for in, want := range map[string]int{"16": 16, "8": 8, "0": 0, " 4\n": 4} {
		if got, err := ParseLinkWidth(in); got != want || err != nil {
			t.Errorf("ParseLinkWidth(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "x", "-1", "64", "sixteen"} {
		if _, err := ParseLinkWidth(in); err == nil {
			t.Errorf("ParseLinkWidth(%q): no error", in)
		}
	}
}

func TestBAR1AndCPUs(t *testing.T) {
	old := "0x00000000f0000000 0x00000000f3ffffff 0x0000000000040200\n0x0000018000000000 0x000001800fffffff 0x000000000014220c\n0x0000000000000000 0x0000000000000000 0x0000000000000000\n0x000000000000e000 0x000000000000e07f 0x0000000000040101\n"
	if n, line, err := BAR1([]byte(old)); n != 256<<20 || line != 2 || err != nil {
		t.Errorf("32-bit BAR 0: %d line %d %v", n, line, err)
	}
	for _, bad := range []string{"", "garbage", "0x1 0x0 0x200\n0x10 0x1f 0x200", "0x0 0xfff 0x200\n0x0 0x0 0x0\n0x0 0x0 0x0\n0x0 0x0 0x0\n0x0 0x0 0x0\n0x0 0x0 0x0\n"} {
		if _, _, err := BAR1([]byte(bad)); err == nil {
			t.Errorf("BAR1(%q): no error", bad)
		}
	}
	for in, want := range map[string]int{"0-31,64-95": 0, "64-127": 64, "3": 3} {
		if got, err := FirstCPU(in); got != want || err != nil {
			t.Errorf("FirstCPU(%q) = %d %v", in, got, err)
		}
	}
	if _, err := FirstCPU(""); err == nil {
		t.Error("FirstCPU(\"\"): no error")
	}
}

func TestParseCmdline(t *testing.T) {
	got := ParseCmdline(`BOOT_IMAGE=/vmlinuz ro intel_iommu=on,sm_on iommu=pt pci=noacs quiet pci=realloc amd-iommu=off "iommu.passthrough=1" x="a b" -- iommu=off`)
	want := map[string]string{"intel_iommu": "on,sm_on", "iommu": "pt", "pci": "noacs,realloc", "amd_iommu": "off", "iommu.passthrough": "1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if !hasOption(got["pci"], "noacs") || hasOption(got["pci"], "acs") {
		t.Error("hasOption")
	}
}

func TestIOMMUMode(t *testing.T) {
	none := iommuFacts{devicesKnown: true, groupsKnown: true, devicesFrom: "/sys/class/iommu", groupsFrom: "/sys/kernel/iommu_groups", cmdline: map[string]string{}, cmdlineFrom: "/proc/cmdline"}
	some := none
	some.devices, some.groups = []string{"dmar0"}, 40
	for _, c := range []struct {
		name string
		f    iommuFacts
		want string
	}{
		{"no IOMMU", none, "off"},
		{"group types identity", withTypes(some, "identity", "identity"), "passthrough"},
		{"group types DMA", withTypes(some, "DMA", "DMA-FQ"), "translated"},
		{"one translated", withTypes(some, "identity", "DMA"), "translated"},
		{"unmanaged (vfio)", withTypes(withCmd(some, "iommu", "pt"), "unmanaged"), "passthrough"},
		{"iommu=pt", withCmd(some, "iommu", "pt"), "passthrough"},
		{"intel_iommu=off", withCmd(some, "intel_iommu", "off"), "off"},
		{"iommu.passthrough=0", withCmd(some, "iommu.passthrough", "0"), "translated"},
		{"iommu.passthrough last wins", withCmd(some, "iommu.passthrough", "0,1"), "passthrough"},
		{"kernel default", some, Unknown},
		{"nothing read", iommuFacts{}, Unknown},
	} {
		mode, ev := c.f.mode()
		if mode != c.want || len(ev) == 0 {
			t.Errorf("%s: %s %v, want %s", c.name, mode, ev, c.want)
		}
	}
}

func withTypes(f iommuFacts, types ...string) iommuFacts {
	f.groupTypes = map[string]string{}
	for i, t := range types {
		f.groupTypes["0000:0"+itoa(i)+":00.0"] = t
	}
	return f
}

func withCmd(f iommuFacts, k, v string) iommuFacts {
	f.cmdline = map[string]string{k: v}
	return f
}

func TestParseParams(t *testing.T) {
	p, bad := ParseParams([]byte("EnableResizableBar: 1\nRegistryDwords: \"ForceP2P=0x11; RMForceP2PType=1;\"\nRmMsg: \"\"\n\nnot one\nBad Key: 2\n"))
	if p["EnableResizableBar"] != "1" || p["RegistryDwords"] != `"ForceP2P=0x11; RMForceP2PType=1;"` || p["RmMsg"] != `""` || len(bad) != 2 {
		t.Errorf("params %v bad %v", p, bad)
	}
	dw, bad := ParseRegistryDwords(p["RegistryDwords"])
	if !reflect.DeepEqual(dw, map[string]string{"ForceP2P": "0x11", "RMForceP2PType": "1"}) || bad != nil {
		t.Errorf("dwords %v bad %v", dw, bad)
	}
	if dw, bad := ParseRegistryDwords(`""`); len(dw) != 0 || bad != nil {
		t.Errorf("empty: %v %v", dw, bad)
	}
	per, bad := ParseRegistryDwordsPerDevice(`"pci=0000:17:00.0;RMForceP2PType=1;pci=0000:18:00.0;RMForceP2PType=1;RMPcieP2PType=2"`)
	if len(per) != 2 || per["0000:18:00.0"]["RMPcieP2PType"] != "2" || bad != nil {
		t.Errorf("per device %v bad %v", per, bad)
	}
}

func TestParseDriverVersion(t *testing.T) {
	for in, want := range map[string][2]string{
		"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version: 15\n": {"580.159.04", "open"},
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n":                         {"535.104.05", "proprietary"},
		"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build\n":                               {"580.95.05", "open"},
	} {
		_, v, mod, err := ParseDriverVersion([]byte(in))
		if v != want[0] || mod != want[1] || err != nil {
			t.Errorf("%q: %s %s %v", in, v, mod, err)
		}
	}
	if _, _, _, err := ParseDriverVersion([]byte("NVRM version: something else\n")); err == nil {
		t.Error("no version: no error")
	}
}

// The fuzz targets: each parser of host input returns, never panics, and
// keeps its bounds.

func FuzzFindExtCap(f *testing.F) {
	f.Add(cfgSpace(4096, map[int][2]int{0x100: {1, 0x148}, 0x148: {ExtCapACS, 0}}))
	f.Add(cfgSpace(4096, map[int][2]int{0x100: {1, 0x140}, 0x140: {2, 0x100}}))
	f.Add(cfgSpace(0x180, map[int][2]int{0x100: {1, 0x200}}))
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, cfg []byte) {
		off, err := FindExtCap(cfg, ExtCapACS)
		if err == nil && off != 0 && (off < 0x100 || off+4 > len(cfg) || binary.LittleEndian.Uint16(cfg[off:]) != ExtCapACS) {
			t.Fatalf("offset 0x%x in %d bytes", off, len(cfg))
		}
		if a, err := ReadACS(cfg); err == nil && a.Present && a.Offset+8 > len(cfg) {
			t.Fatalf("ACS at 0x%x in %d bytes", a.Offset, len(cfg))
		}
		PCIePortType(cfg)
	})
}

func FuzzParseParams(f *testing.F) {
	f.Add([]byte("EnableResizableBar: 1\nRegistryDwords: \"ForceP2P=0x11;RMForceP2PType=1\"\nRegistryDwordsPerDevice: \"pci=0000:17:00.0;RMForceP2PType=1\"\n"))
	f.Add([]byte("RegistryDwords: \"\"\n: x\n\"a\": b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, bad := ParseParams(data)
		if len(bad) > 3 {
			t.Fatalf("%d bad lines kept", len(bad))
		}
		for k := range p {
			if k == "" || strings.ContainsAny(k, " \t\n\"") {
				t.Fatalf("key %q", k)
			}
		}
		dw, _ := ParseRegistryDwords(p["RegistryDwords"])
		for k := range dw {
			if k == "" || strings.Contains(k, ";") {
				t.Fatalf("dword key %q", k)
			}
		}
		ParseRegistryDwordsPerDevice(p["RegistryDwordsPerDevice"])
		ParseDriverVersion(data)
	})
}

func FuzzParseCmdline(f *testing.F) {
	f.Add(`BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt pci=noacs "x=a b" amd-iommu=off`)
	f.Add(`"unterminated iommu=pt`)
	f.Fuzz(func(t *testing.T, s string) {
		for k := range ParseCmdline(s) {
			if !iommuParams[k] {
				t.Fatalf("kept %q", k)
			}
		}
	})
}

func FuzzPCIeGen(f *testing.F) {
	for _, s := range []string{"32.0 GT/s PCIe", "2.5 GT/s", "Unknown", "8 GT/s", "64.0 GT/s PCIe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if g, ok := PCIeGen(s); ok != (g != 0) || g < 0 || g > 7 {
			t.Fatalf("PCIeGen(%q) = %d, %v", s, g, ok)
		}
		if n, err := ParseLinkWidth(s); err == nil && (n < 0 || n > 32) {
			t.Fatalf("ParseLinkWidth(%q) = %d", s, n)
		}
		if n, line, err := BAR1([]byte(s)); err == nil && (n <= 0 || line < 1 || line > 6) {
			t.Fatalf("BAR1(%q) = %d line %d", s, n, line)
		}
		FirstCPU(s)
	})
}

func TestPathBridges(t *testing.T) {
	for _, c := range []struct {
		real, addr, root string
		bridges          []string
	}{
		// Behind a PCIe switch: downstream port, upstream port, root port.
		{"devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:19:00.0", "0000:19:00.0", "pci0000:15", []string{"0000:17:02.0", "0000:16:00.0", "0000:15:01.0"}},
		{"devices/pci0000:00/0000:00:06.0", "0000:00:06.0", "pci0000:00", []string{}},
		// A Hyper-V VM: the PCI domain hangs off the VMBus.
		{"devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/47505500-0001-0000-3130-444531454238/pci0001:00/0001:00:00.0", "0001:00:00.0", "pci0001:00", []string{}},
	} {
		bs, root := pathBridges(c.real, c.addr)
		if !reflect.DeepEqual(bs, c.bridges) || root != c.root {
			t.Errorf("%s: %v %q", c.real, bs, root)
		}
	}
}
