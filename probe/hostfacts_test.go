package probe

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
)

// synthHost writes the txtar host trees named (in testdata, later ones
// over earlier ones) into a directory and returns it: sys/ and proc/ as the
// probe reads them. NAME.hex becomes the binary file NAME ("size N" zero
// bytes, then "OFFSET: bytes" lines in hex, # comments); LINKS holds
// "PATH -> TARGET" symbolic links, FIFOS named pipes, DIRS empty directories.
func synthHost(t testing.TB, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range names {
		a, err := txtar.ParseFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range a.Files {
			switch f.Name {
			case "LINKS", "FIFOS", "DIRS":
				for _, line := range strings.Split(strings.TrimSpace(string(f.Data)), "\n") {
					if line = strings.TrimSpace(line); line == "" {
						continue
					}
					var p, target string
					if f.Name == "LINKS" {
						p, target, _ = strings.Cut(line, " -> ")
					} else {
						p = line
					}
					full := filepath.Join(dir, p)
					if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
						t.Fatal(err)
					}
					os.Remove(full)
					switch f.Name {
					case "LINKS":
						err = os.Symlink(target, full)
					case "FIFOS":
						err = syscall.Mkfifo(full, 0o644)
					default:
						err = os.MkdirAll(full, 0o755)
					}
					if err != nil {
						t.Skip(err)
					}
				}
				continue
			}
			name, data := f.Name, f.Data
			if n, ok := strings.CutSuffix(name, ".hex"); ok {
				name, data = n, hexFile(t, f.Name, data)
			}
			full := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// hexFile decodes the .hex convention of synthHost.
func hexFile(t testing.TB, name string, text []byte) []byte {
	var out []byte
	for i, line := range strings.Split(string(text), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if n, ok := strings.CutPrefix(line, "size "); ok {
			size, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("%s:%d: %v", name, i+1, err)
			}
			out = make([]byte, size)
			continue
		}
		off, bytesText, ok := strings.Cut(line, ":")
		o, err := strconv.ParseInt(off, 0, 32)
		b, herr := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(bytesText), " ", ""))
		if !ok || err != nil || herr != nil || int(o)+len(b) > len(out) {
			t.Fatalf("%s:%d: %q is not OFFSET: BYTES within the size", name, i+1, line)
		}
		copy(out[o:], b)
	}
	return out
}

func readSynthHost(t *testing.T, names ...string) (*hostFacts, *Report, string) {
	t.Helper()
	dir := synthHost(t, names...)
	r := newReport()
	f := readHostFacts(context.Background(), r, filepath.Join(dir, "sys"), filepath.Join(dir, "proc"))
	return f, r, dir
}

func rtx8GPUs() []GPU {
	var gs []GPU
	for i := 0; i < 8; i++ {
		gs = append(gs, GPU{Index: i, Name: "NVIDIA RTX PRO 6000 Blackwell Server Edition", UUID: "GPU-0000000" + itoa(i) + "-5a1e-4b0c-9d6e-00000000000" + itoa(i), SM: "12.0"})
	}
	return gs
}

// TestHostPCIe8ACS reads the eight-GPU PCIe box with ACS on its root
// ports and a translating IOMMU.
func TestHostPCIe8ACS(t *testing.T) {
	f, r, dir := readSynthHost(t, "host-pcie8-acs.txtar")
	f.matchGPUs(r, rtx8GPUs(), "nvidia-smi")
	p := f.pcie
	if p == nil || len(p.GPUs) != 8 || len(p.Bridges) != 8 {
		t.Fatalf("pcie: %+v (unknown %v)", p, r.Unknown)
	}
	sys := filepath.Join(dir, "sys")
	for i, g := range p.GPUs {
		if g.Index == nil || *g.Index != i || !strings.Contains(g.IndexFrom, "GPU UUID GPU-0000000"+itoa(i)) {
			t.Errorf("GPU %s: index %v from %q", g.Address, g.Index, g.IndexFrom)
		}
		if g.BAR1Bytes != 128<<30 || g.BAR1From != g.SysfsPath+"/resource line 2" {
			t.Errorf("GPU %s: BAR1 %d from %q", g.Address, g.BAR1Bytes, g.BAR1From)
		}
		if g.IOMMUGroupType != "DMA-FQ" || g.IOMMUGroup == nil {
			t.Errorf("GPU %s: iommu group %v %q", g.Address, g.IOMMUGroup, g.IOMMUGroupType)
		}
		if len(g.Bridges) != 1 || g.VendorDevice != "10de:2bb5" || !strings.HasPrefix(g.RootComplex, "pci0000:") {
			t.Errorf("GPU %s: bridges %v, %q, %q", g.Address, g.Bridges, g.VendorDevice, g.RootComplex)
		}
	}
	g := p.GPUs[5]
	if g.Address != "0000:92:00.0" || g.Link == nil || g.Link.CurrentWidth != 8 || g.Link.MaxWidth != 16 || g.Link.MaxGen != 5 {
		t.Errorf("degraded GPU: %+v %+v", g, g.Link)
	}
	if l := p.GPUs[1].Link; l.CurrentSpeed != "2.5 GT/s PCIe" || l.CurrentGen != 1 || l.MaxGen != 5 {
		t.Errorf("idle link: %+v", l)
	}
	if *p.GPUs[0].NUMANode != 0 || *p.GPUs[7].NUMANode != 1 || *p.GPUs[7].Socket != 1 || p.GPUs[7].SocketFrom != sys+"/devices/system/cpu/cpu64/topology/physical_package_id" {
		t.Errorf("NUMA: %+v", p.GPUs[7])
	}
	if !reflect.DeepEqual(p.NUMANodes, []int{0, 1}) || !reflect.DeepEqual(p.Sockets, []int{0, 1}) || p.SpansNUMA == nil || !*p.SpansNUMA || p.SpansSockets == nil || !*p.SpansSockets {
		t.Errorf("spread: %v %v %v %v", p.NUMANodes, p.Sockets, p.SpansNUMA, p.SpansSockets)
	}
	for _, b := range p.Bridges {
		a := b.ACS
		if a == nil || !a.Present || a.Offset != 0x150 || a.Control != 0x1d || !a.RedirectsP2P || b.PortType != "root port" || b.VendorDevice != "1022:14ab" || len(b.GPUs) != 1 {
			t.Fatalf("bridge %s: %+v ACS %+v", b.Address, b, a)
		}
		if !reflect.DeepEqual(a.Enabled, []string{"source_validation", "p2p_request_redirect", "p2p_completion_redirect", "upstream_forwarding"}) || a.From != b.SysfsPath+"/config" {
			t.Errorf("bridge %s: ACS %+v", b.Address, a)
		}
	}
	m := f.iommu
	if m.Mode != "translated" || !reflect.DeepEqual(m.Devices, []string{"ivhd0", "ivhd1", "ivhd2", "ivhd3"}) || *m.Groups != 20 || m.CmdlineParams["amd_iommu"] != "on" {
		t.Errorf("iommu: %+v", m)
	}
	if !strings.Contains(strings.Join(m.Evidence, "; "), "DMA-FQ (0000:11:00.0 0000:12:00.0") {
		t.Errorf("iommu evidence: %v", m.Evidence)
	}
	d := f.driver
	if d == nil || d.Version != "580.65.06" || d.Module != "open" || d.Params["EnableResizableBar"] != "1" || len(d.RegistryDwords) != 0 {
		t.Errorf("driver: %+v", d)
	}
	if len(r.Unknown) != 0 {
		t.Errorf("unknown on a readable host: %v", r.Unknown)
	}
}

// TestHostPCIe8Fixed reads the same box set up for peer traffic.
func TestHostPCIe8Fixed(t *testing.T) {
	f, r, _ := readSynthHost(t, "host-pcie8-acs.txtar", "host-pcie8-fixed.txtar")
	for _, b := range f.pcie.Bridges {
		if a := b.ACS; a == nil || !a.Present || a.Control != 0 || a.RedirectsP2P || len(a.Enabled) != 0 {
			t.Errorf("bridge %s: ACS %+v", b.Address, a)
		}
	}
	for _, g := range f.pcie.GPUs {
		if g.Link.CurrentWidth != 16 {
			t.Errorf("GPU %s: x%d", g.Address, g.Link.CurrentWidth)
		}
	}
	if f.iommu.Mode != "passthrough" || f.iommu.CmdlineParams["iommu"] != "pt" {
		t.Errorf("iommu: %+v", f.iommu)
	}
	want := map[string]string{"ForceP2P": "0x11", "RMForceP2PType": "1", "RMPcieP2PType": "2"}
	if !reflect.DeepEqual(f.driver.RegistryDwords, want) {
		t.Errorf("RegistryDwords: %v", f.driver.RegistryDwords)
	}
	if len(r.Unknown) != 0 {
		t.Errorf("unknown: %v", r.Unknown)
	}
}

// TestHostH200VM reads the H200 VM: a GPU on the root bus, no NUMA node,
// no IOMMU.
func TestHostH200VM(t *testing.T) {
	f, r, dir := readSynthHost(t, "host-h200-vm.txtar")
	f.matchGPUs(r, []GPU{{Index: 0, Name: "NVIDIA H200", UUID: "GPU-1b122d05-8c93-e80c-c42d-a43b421ae510"}}, "nvidia-smi")
	p := f.pcie
	if len(p.GPUs) != 1 || len(p.Bridges) != 0 {
		t.Fatalf("pcie: %+v", p)
	}
	g := p.GPUs[0]
	sys := filepath.Join(dir, "sys")
	if g.Address != "0000:00:06.0" || g.RootComplex != "pci0000:00" || len(g.Bridges) != 0 || g.SysfsPath != sys+"/devices/pci0000:00/0000:00:06.0" || g.Index == nil || *g.Index != 0 {
		t.Errorf("GPU: %+v", g)
	}
	if g.BAR1Bytes != 256<<30 || !strings.HasSuffix(g.BAR1From, "/resource line 3") {
		t.Errorf("BAR1 %d from %q", g.BAR1Bytes, g.BAR1From)
	}
	if g.NUMANode != nil || p.SpansNUMA != nil || len(p.NUMANodes) != 0 || !strings.Contains(r.Unknown["host.pcie.gpus[0000:00:06.0].numa_node"], "-1 (the firmware gives no NUMA node") {
		t.Errorf("NUMA: %v %v %v", g.NUMANode, p.SpansNUMA, r.Unknown)
	}
	if p.SpansSockets == nil || *p.SpansSockets || !reflect.DeepEqual(p.Sockets, []int{0}) {
		t.Errorf("sockets: %v %v", p.Sockets, p.SpansSockets)
	}
	if f.iommu.Mode != "off" || f.iommu.CmdlineParams["pci"] != "realloc=off" || g.IOMMUGroup != nil {
		t.Errorf("iommu: %+v", f.iommu)
	}
	if d := f.driver; d.Version != "580.159.04" || d.Params["NvLinkDisable"] != "1" || d.Params["RegistryDwords"] != `""` || len(d.RegistryDwords) != 0 {
		t.Errorf("driver: %+v", d)
	}
	delete(r.Unknown, "host.pcie.gpus[0000:00:06.0].numa_node")
	if len(r.Unknown) != 0 {
		t.Errorf("unknown: %v", r.Unknown)
	}
}

// TestHostHostile reads a host whose files are unreadable, endless or
// malformed: each is one unknown with its reason, nothing hangs.
func TestHostHostile(t *testing.T) {
	start := time.Now()
	f, r, _ := readSynthHost(t, "host-hostile.txtar")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s", took)
	}
	p := f.pcie
	if len(p.GPUs) != 5 || len(p.Bridges) != 5 {
		t.Fatalf("pcie: %+v %v", p, r.Unknown)
	}
	want := map[string]string{
		"host.pcie.bridges[0000:00:01.0].acs":           "config space not readable that far: 64 bytes",
		"host.pcie.bridges[0000:00:03.0].acs":           "next pointer 0x100 loops",
		"host.pcie.bridges[0000:00:04.0].acs":           "next pointer 0x40 below 0x100",
		"host.pcie.bridges[0000:00:05.0].acs":           "extended capability at 0x200: past the 384 bytes",
		"host.pcie.gpus[0000:01:00.0].numa_node":        "not a regular file (a named pipe)",
		"host.pcie.gpus[0000:01:00.0].local_cpulist":    "local_cpulist",
		"host.pcie.gpus[0000:01:00.0].bar1":             `"garbage" is not START END FLAGS`,
		"host.pcie.gpus[0000:02:00.0].link":             "current_link_width: larger than 4096 bytes",
		"host.iommu.cmdline":                            "cmdline: not a regular file (a named pipe)",
		"host.iommu.devices":                            "class/iommu: not a directory",
		"host.nvidia_driver.params":                     `line 2: "this line is no parameter"`,
		"host.nvidia_driver.registry_dwords":            "garbage",
		"host.nvidia_driver.registry_dwords_per_device": "RMForceP2PType=1",
	}
	for k, w := range want {
		if !strings.Contains(r.Unknown[k], w) {
			t.Errorf("unknown[%s] = %q, want it to hold %q", k, r.Unknown[k], w)
		}
	}
	if b := p.Bridges[1]; b.ACS == nil || b.ACS.Present || b.PortType != "root port" {
		t.Errorf("no ACS: %+v", b)
	}
	if l := p.GPUs[0].Link; l == nil || l.CurrentSpeed != "Unknown" || l.CurrentGen != 0 || l.MaxGen != 5 {
		t.Errorf("unknown speed: %+v", l)
	}
	if f.iommu.Mode != Unknown || f.iommu.Cmdline != "" {
		t.Errorf("iommu: %+v", f.iommu)
	}
	d := f.driver
	if d.Version != "535.104.05" || d.Module != "proprietary" || d.RegistryDwords["ForceP2P"] != "0x11" || d.RegistryDwords["RMForceP2PType"] != "1" {
		t.Errorf("driver: %+v", d)
	}
	if got := d.RegistryDwordsPerDevice["0000:02:00.0"]; !reflect.DeepEqual(got, map[string]string{"RMPcieP2PType": "2"}) {
		t.Errorf("per device: %v", d.RegistryDwordsPerDevice)
	}
}

// TestHostFactsCancelled checks that a cancelled probe reads nothing more
// and says so once.
func TestHostFactsCancelled(t *testing.T) {
	dir := synthHost(t, "host-pcie8-acs.txtar")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := newReport()
	f := readHostFacts(ctx, r, filepath.Join(dir, "sys"), filepath.Join(dir, "proc"))
	if f.pcie != nil || !strings.Contains(r.Unknown["host.pcie"], "context canceled") {
		t.Errorf("cancelled: %+v %v", f.pcie, r.Unknown)
	}
}

// TestMatchGPUsByBusOrder checks the fallback when the driver names no
// UUIDs, and that it is not taken when its UUIDs disagree.
func TestMatchGPUsByBusOrder(t *testing.T) {
	f, r, dir := readSynthHost(t, "host-pcie8-acs.txtar")
	f.uuids = nil
	gs := rtx8GPUs()
	slices.Reverse(gs)
	f.matchGPUs(r, gs, "nvidia-smi")
	for i, g := range f.pcie.GPUs {
		if g.Index == nil || *g.Index != i || !strings.Contains(g.IndexFrom, "PCI bus order") {
			t.Fatalf("GPU %s: %v %q", g.Address, g.Index, g.IndexFrom)
		}
	}
	r = newReport()
	f = readHostFacts(context.Background(), r, filepath.Join(dir, "sys"), filepath.Join(dir, "proc"))
	gs = rtx8GPUs()
	gs[3].UUID = "GPU-other"
	f.matchGPUs(r, gs, "nvidia-smi")
	if f.pcie.GPUs[3].Index != nil || !strings.Contains(r.Unknown["host.pcie.gpus[0000:32:00.0].index"], "no GPU of nvidia-smi has the UUID GPU-00000003") {
		t.Errorf("disagreeing UUID: %v %v", f.pcie.GPUs[3].Index, r.Unknown)
	}
}

// BenchmarkReadHostFacts reads the eight-GPU box's /sys and /proc: every
// GPU's files, its root port's config space, the IOMMU and the driver.
func BenchmarkReadHostFacts(b *testing.B) {
	dir := synthHost(b, "host-pcie8-acs.txtar")
	sys, proc := filepath.Join(dir, "sys"), filepath.Join(dir, "proc")
	for b.Loop() {
		r := newReport()
		if f := readHostFacts(context.Background(), r, sys, proc); f.pcie == nil || len(f.pcie.GPUs) != 8 {
			b.Fatal(r.Unknown)
		}
	}
}

// TestHostSwitch reads two GPUs behind one PCIe switch: the bridges they
// share are listed once, with both GPUs below them.
func TestHostSwitch(t *testing.T) {
	f, r, _ := readSynthHost(t, "host-switch.txtar")
	p := f.pcie
	if len(p.GPUs) != 2 || len(p.Bridges) != 4 {
		t.Fatalf("pcie: %+v %v", p, r.Unknown)
	}
	if want := []string{"0000:17:00.0", "0000:16:00.0", "0000:15:01.0"}; !reflect.DeepEqual(p.GPUs[0].Bridges, want) {
		t.Errorf("GPU 0 bridges %v", p.GPUs[0].Bridges)
	}
	byAddr := map[string]Bridge{}
	for _, b := range p.Bridges {
		byAddr[b.Address] = b
	}
	for addr, want := range map[string]struct {
		port     string
		gpus     int
		redirect bool
		present  bool
	}{
		"0000:15:01.0": {"root port", 2, false, false},
		"0000:16:00.0": {"switch upstream port", 2, false, false},
		"0000:17:00.0": {"switch downstream port", 1, true, true},
		"0000:17:01.0": {"switch downstream port", 1, true, true},
	} {
		b := byAddr[addr]
		if b.PortType != want.port || len(b.GPUs) != want.gpus || b.ACS == nil || b.ACS.Present != want.present || b.ACS.RedirectsP2P != want.redirect {
			t.Errorf("bridge %s: %+v ACS %+v", addr, b, b.ACS)
		}
	}
	if b := byAddr["0000:16:00.0"]; b.VendorDevice != "1000:c030" || !strings.HasSuffix(b.SysfsPath, "/devices/pci0000:15/0000:15:01.0/0000:16:00.0") {
		t.Errorf("upstream port: %+v", b)
	}
	if f.iommu.Mode != "off" {
		t.Errorf("iommu: %+v", f.iommu)
	}
	if f.driver != nil || !strings.HasSuffix(r.Unknown["host.nvidia_driver"], "/proc/driver/nvidia: absent (no nvidia kernel module loaded)") {
		t.Errorf("no driver: %+v %v", f.driver, r.Unknown)
	}
	delete(r.Unknown, "host.nvidia_driver")
	if len(r.Unknown) != 0 {
		t.Errorf("unknown: %v", r.Unknown)
	}
}
