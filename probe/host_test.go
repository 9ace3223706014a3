package probe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-version"
)

const h200Query = "0, NVIDIA H200, GPU-1b122d05-8c93-e80c-c42d-a43b421ae510, 9.0, 580.159.04, 143771 MiB\n"

func rtx8Query() string {
	var b strings.Builder
	for i := 0; i < 8; i++ {
		b.WriteString(strings.Join([]string{itoa(i), "NVIDIA RTX PRO 6000 Blackwell Server Edition", "GPU-0000000" + itoa(i), "12.0", "580.65.06", "97887 MiB"}, ", ") + "\n")
	}
	return b.String()
}

func TestParseGPUQuery(t *testing.T) {
	gpus, driver, err := ParseGPUQuery([]byte(h200Query))
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{{Index: 0, Name: "NVIDIA H200", UUID: "GPU-1b122d05-8c93-e80c-c42d-a43b421ae510", SM: "9.0", MemoryMiB: 143771}}
	if !reflect.DeepEqual(gpus, want) || driver != "580.159.04" {
		t.Fatalf("got %+v %q", gpus, driver)
	}
	gpus, _, err = ParseGPUQuery([]byte(rtx8Query()))
	if err != nil || len(gpus) != 8 || gpus[7].Index != 7 || gpus[7].Major() != 12 {
		t.Fatalf("8 GPUs: %+v %v", gpus, err)
	}
	// A name with a comma, and fields nvidia-smi cannot read.
	gpus, _, err = ParseGPUQuery([]byte("0, Tesla X, rev 2, GPU-a, [N/A], 550.1, [N/A]\n"))
	if err != nil || gpus[0].Name != "Tesla X, rev 2" || gpus[0].SM != "" || gpus[0].Major() != -1 {
		t.Fatalf("comma name: %+v %v", gpus, err)
	}
	for _, bad := range []string{
		"",
		"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
		"x, NVIDIA H200, GPU-1, 9.0, 580, 10 MiB",
		"0, NVIDIA H200, GPU-1, nine, 580, 10 MiB",
		"0, NVIDIA H200, GPU-1, 9.0, 580, lots",
		"0, NVIDIA H200, GPU-1, 9.0, 580, 10 MiB\n1, NVIDIA H200, GPU-2, 9.0, 581, 10 MiB",
	} {
		if _, _, err := ParseGPUQuery([]byte(bad)); err == nil {
			t.Errorf("ParseGPUQuery(%q): no error", bad)
		}
	}
}

func rtx8Topo(ns map[[2]int]bool) string {
	var b strings.Builder
	b.WriteString(" \t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\t\x1b[0m\n")
	for i := 0; i < 8; i++ {
		b.WriteString(" GPU" + itoa(i) + "\t")
		for j := 0; j < 8; j++ {
			s := "OK"
			if i == j {
				s = "X"
			} else if ns[[2]int{i, j}] {
				s = "NS"
			}
			b.WriteString(s + "\t")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n  NS   = Not supported\n")
	return b.String()
}

func TestParseP2PMatrix(t *testing.T) {
	m, err := ParseP2PMatrix([]byte(rtx8Topo(map[[2]int]bool{{0, 4}: true, {4, 0}: true})), 8)
	if err != nil {
		t.Fatal(err)
	}
	if m[0][0] != "X" || m[0][1] != "OK" || m[0][4] != "NS" || m[4][0] != "NS" || m[7][6] != "OK" {
		t.Fatalf("got %v", m)
	}
	// One GPU, as the H200 machine prints it.
	one := " \t\x1b[4mGPU0\t\x1b[0m\n GPU0\tX\t\n\nLegend:\n\n  X    = Self\n"
	if m, err := ParseP2PMatrix([]byte(one), 1); err != nil || !reflect.DeepEqual(m, [][]string{{"X"}}) {
		t.Fatalf("one GPU: %v %v", m, err)
	}
	for _, bad := range []string{"", "garbage\n", " \tGPU0\tGPU1\n GPU0\tX\n", " \tGPU0\tGPU1\n GPU0\tX\tOK\n", " \tGPU0\tGPU9\n GPU0\tX\tOK\n GPU9\tOK\tX\n"} {
		if _, err := ParseP2PMatrix([]byte(bad), 2); err == nil {
			t.Errorf("ParseP2PMatrix(%q): no error", bad)
		}
	}
}

func FuzzParseGPUQuery(f *testing.F) {
	f.Add([]byte(h200Query))
	f.Add([]byte(rtx8Query()))
	f.Add([]byte(rtx8Topo(nil)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if gpus, driver, err := ParseGPUQuery(data); err == nil {
			for _, g := range gpus {
				if g.Name == "" {
					t.Fatalf("GPU without a name: %+v", g)
				}
				if _, _, ok := parseSM(g.SM); g.SM != "" && !ok {
					t.Fatalf("compute capability %q kept that smver does not read", g.SM)
				}
			}
			if _, err := version.NewVersion(driver); driver != "" && err != nil {
				t.Fatalf("driver %q kept that is not a version", driver)
			}
		}
		for _, n := range []int{1, 2, 8} {
			if m, err := ParseP2PMatrix(data, n); err == nil && len(m) != n {
				t.Fatalf("%d rows for %d GPUs", len(m), n)
			}
		}
	})
}

// fakeTool writes an executable script named name into dir.
func fakeTool(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestProbeGPUsFallsBackToProc(t *testing.T) {
	bin := t.TempDir()
	t.Setenv("PATH", bin) // no nvidia-smi
	proc := t.TempDir()
	gdir := filepath.Join(proc, "driver", "nvidia", "gpus", "0000:17:00.0")
	if err := os.MkdirAll(gdir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(gdir, "information"), []byte("Model: \t\t NVIDIA H200\nIRQ:   1\nGPU UUID: \t GPU-abc\n"), 0o644)
	os.WriteFile(filepath.Join(proc, "driver", "nvidia", "version"), []byte("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue Jan 1\n"), 0o644)
	r, h := newReport(), &Host{}
	probeGPUs(context.Background(), r, h, proc)
	if len(h.GPUs) != 1 || h.GPUs[0].Name != "NVIDIA H200" || h.GPUs[0].UUID != "GPU-abc" || h.GPUs[0].SM != "" || h.Driver != "580.159.04" {
		t.Fatalf("got %+v driver %q", h.GPUs, h.Driver)
	}
	if !strings.Contains(r.Unknown["host.gpus"], "nvidia-smi: not found") || r.Unknown["host.gpus.sm"] == "" {
		t.Fatalf("unknown: %v", r.Unknown)
	}
}

func TestProbeGPUsWithTopology(t *testing.T) {
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	q := filepath.Join(t.TempDir(), "q.txt")
	topo := filepath.Join(t.TempDir(), "topo.txt")
	os.WriteFile(q, []byte(rtx8Query()), 0o644)
	os.WriteFile(topo, []byte(rtx8Topo(map[[2]int]bool{{1, 2}: true})), 0o644)
	// One script answering both questions.
	fakeTool(t, bin, "nvidia-smi", `if [ "$1" = topo ]; then f=`+topo+`; else f=`+q+`; fi
while IFS= read -r l; do printf '%s\n' "$l"; done < "$f"`)
	r, h := newReport(), &Host{}
	probeGPUs(context.Background(), r, h, t.TempDir())
	if len(h.GPUs) != 8 || h.P2P == nil || h.P2P[1][2] != "NS" || len(r.Unknown) != 0 {
		t.Fatalf("gpus %d p2p %v unknown %v", len(h.GPUs), h.P2P, r.Unknown)
	}
}

func TestProbeGPUsNAComputeCapIsUnknown(t *testing.T) {
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	fakeTool(t, bin, "nvidia-smi", `[ "$1" = topo ] && exit 1
echo "0, NVIDIA H200, GPU-a, [N/A], 580.159.04, [N/A]"`)
	r, h := newReport(), &Host{}
	probeGPUs(context.Background(), r, h, t.TempDir())
	if len(h.GPUs) != 1 || h.GPUs[0].SM != "" {
		t.Fatalf("gpus %+v", h.GPUs)
	}
	if why := r.Unknown["host.gpus[0].sm"]; !strings.Contains(why, "no compute capability for GPU 0 (NVIDIA H200)") {
		t.Fatalf("unknown %v", r.Unknown)
	}
}

// nvidia-smi's helper that detaches (setsid) is not left behind, whether
// nvidia-smi answers or hangs past the probe's time bound.
func TestProbeGPUsEndsDetachedHelper(t *testing.T) {
	setsid, err1 := exec.LookPath("setsid")
	sleep, err2 := exec.LookPath("sleep")
	if err1 != nil || err2 != nil {
		t.Skip("no setsid or sleep")
	}
	for _, hang := range []bool{false, true} {
		bin := t.TempDir()
		t.Setenv("PATH", bin)
		pidFile := filepath.Join(t.TempDir(), "pid")
		tail := ""
		if hang {
			tail = "\n" + sleep + " 60"
		}
		fakeTool(t, bin, "nvidia-smi", setsid+" "+sleep+" 60 </dev/null >/dev/null 2>&1 &\necho $! > "+pidFile+`
[ "$1" = topo ] && exit 1
echo "0, NVIDIA H200, GPU-a, 9.0, 580.159.04, 143771 MiB"`+tail)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, h := newReport(), &Host{}
		probeGPUs(ctx, r, h, t.TempDir())
		cancel()
		data, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		// Reaped by init or a zombie of ours: either way no longer running.
		deadline := time.Now().Add(3 * time.Second)
		for syscall.Kill(pid, 0) == nil && !isZombie(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil && !isZombie(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("hang %v: nvidia-smi's detached helper %d outlived the probe", hang, pid)
		}
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
