package probe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/smver"
)

// GPUQueryArgs are the nvidia-smi arguments the probe uses.
var GPUQueryArgs = []string{"--query-gpu=index,name,uuid,compute_cap,driver_version,memory.total", "--format=csv,noheader"}

// probeGPUs fills h from nvidia-smi, falling back to /proc/driver/nvidia/gpus
// for presence only, within ctx. The reasons for anything it could not read
// go to r.
func probeGPUs(ctx context.Context, r *Report, h *Host, procRoot string) {
	// The GPU list and the two topology matrices are asked for at once:
	// each nvidia-smi call costs tens of milliseconds on a machine of
	// eight GPUs. The matrices are read only when two GPUs or more are
	// listed; otherwise their calls are stopped.
	tctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var topo [2]struct {
		out []byte
		err error
	}
	for i, mode := range []string{"r", "n"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			topo[i].out, topo[i].err = runTool(tctx, "nvidia-smi", "topo", "-p2p", mode)
		}()
	}
	defer func() { stop(); wg.Wait() }()
	out, err := runTool(ctx, "nvidia-smi", GPUQueryArgs...)
	if err == nil {
		gpus, driver, perr := ParseGPUQuery(out)
		if perr == nil {
			h.GPUs, h.Driver, h.GPUSource = gpus, driver, "nvidia-smi"
			for _, g := range gpus {
				if g.SM == "" { // [N/A]: say so rather than leave a gap
					r.unknown(fmt.Sprintf("host.gpus[%d].sm", g.Index), "nvidia-smi reports no compute capability for GPU "+strconv.Itoa(g.Index)+" ("+g.Name+")")
				}
			}
		} else {
			err = fmt.Errorf("nvidia-smi %s: %w", strings.Join(GPUQueryArgs, " "), perr)
		}
	}
	if err != nil {
		r.unknown("host.gpus", err.Error())
		gpus, perr := readProcGPUs(ctx, procRoot)
		if perr == nil && len(gpus) > 0 {
			h.GPUs, h.GPUSource = gpus, filepath.Join(procRoot, "driver/nvidia/gpus")
			r.unknown("host.gpus.sm", err.Error()+"; "+h.GPUSource+" lists the GPUs but not their compute capability")
		}
		if v, verr := readProcDriverVersion(ctx, procRoot); verr == nil {
			h.Driver = v
		}
		return
	}
	if len(h.GPUs) < 2 {
		return
	}
	wg.Wait()
	if err := topo[0].err; err != nil {
		r.unknown("host.p2p", err.Error())
		return
	}
	m, err := ParseP2PMatrix(topo[0].out, len(h.GPUs))
	if err != nil {
		r.unknown("host.p2p", "nvidia-smi topo -p2p r: "+err.Error())
		return
	}
	h.P2P = m
	if err := topo[1].err; err != nil {
		r.unknown("host.nvlink", err.Error())
	} else if m, err := ParseP2PMatrix(topo[1].out, len(h.GPUs)); err != nil {
		r.unknown("host.nvlink", "nvidia-smi topo -p2p n: "+err.Error())
	} else {
		h.NVLink = m
	}
}

// AnyPair reports whether some pair of distinct GPUs has "OK" in m (a
// P2P or NVLink matrix), and whether every pair has; ok is false for a
// nil matrix.
func AnyPair(m [][]string) (any, all, ok bool) {
	if m == nil {
		return false, false, false
	}
	all = true
	for i, row := range m {
		for j, s := range row {
			if i == j {
				continue
			}
			if s == "OK" {
				any = true
			} else {
				all = false
			}
		}
	}
	return any, all, true
}

var (
	ansiRe = lazyre.New("\x1b\\[[0-9;]*[A-Za-z]")
	memRe  = lazyre.New(`^(\d+)\s*MiB$`)
)

// ParseGPUQuery parses `nvidia-smi --query-gpu=index,name,uuid,compute_cap,
// driver_version,memory.total --format=csv,noheader`. A line it cannot read is
// an error naming the line.
func ParseGPUQuery(out []byte) (gpus []GPU, driver string, err error) {
	var driverV *version.Version
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 1 && strings.TrimSpace(lines[0]) == "" {
		return nil, "", fmt.Errorf("no GPUs listed")
	}
	for i, line := range lines {
		line = strings.TrimSpace(line)
		f := strings.Split(line, ",")
		for j := range f {
			f[j] = strings.TrimSpace(f[j])
		}
		if len(f) < 6 {
			return nil, "", fmt.Errorf("line %d: want 6 fields, got %q", i+1, clip(line, 80))
		}
		// A name may hold commas: the other fields are fixed at both ends.
		n := len(f)
		g := GPU{Name: strings.Join(f[1:n-4], ", "), UUID: f[n-4]}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, "", fmt.Errorf("line %d: index %q is not a number", i+1, clip(f[0], 40))
		}
		g.Index = idx
		if _, err := smver.ParseArch(f[n-3]); err == nil {
			g.SM = f[n-3]
		} else if !isNA(f[n-3]) {
			return nil, "", fmt.Errorf("line %d: compute capability %q is not MAJOR.MINOR", i+1, clip(f[n-3], 40))
		}
		if m := memRe().FindStringSubmatch(f[n-1]); m != nil {
			g.MemoryMiB, _ = strconv.Atoi(m[1])
		} else if !isNA(f[n-1]) {
			return nil, "", fmt.Errorf("line %d: memory %q is not N MiB", i+1, clip(f[n-1], 40))
		}
		if g.Name == "" {
			return nil, "", fmt.Errorf("line %d: empty GPU name", i+1)
		}
		if d := f[n-2]; !isNA(d) {
			// Compared as versions, kept as nvidia-smi printed it.
			dv, err := version.NewVersion(d)
			switch {
			case err != nil:
				return nil, "", fmt.Errorf("line %d: driver version %q is not a version", i+1, clip(d, 40))
			case driverV == nil:
				driver, driverV = d, dv
			case !dv.Equal(driverV):
				return nil, "", fmt.Errorf("line %d: driver %s differs from %s", i+1, d, driver)
			}
		}
		gpus = append(gpus, g)
	}
	return gpus, driver, nil
}

func isNA(s string) bool { return s == "[N/A]" || s == "N/A" || s == "[Not Supported]" }

// ParseP2PMatrix parses `nvidia-smi topo -p2p r` into an n×n matrix of
// statuses ("X", "OK", "NS", "CNS", …) indexed by GPU index.
func ParseP2PMatrix(out []byte, n int) ([][]string, error) {
	var cols []int
	m := make([][]string, n)
	rows := 0
	// nvidia-smi underlines the header with terminal escapes even into a pipe.
	out = ansiRe().ReplaceAll(out, nil)
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			if cols != nil && rows > 0 {
				break
			}
			continue
		}
		if strings.HasPrefix(f[0], "Legend") {
			break
		}
		if cols == nil {
			if !strings.HasPrefix(f[0], "GPU") {
				continue
			}
			for _, c := range f {
				i, err := gpuIndex(c)
				if err != nil {
					return nil, fmt.Errorf("header: %w", err)
				}
				cols = append(cols, i)
			}
			continue
		}
		ri, err := gpuIndex(f[0])
		if err != nil {
			return nil, fmt.Errorf("row %q: %w", clip(line, 60), err)
		}
		if len(f)-1 != len(cols) {
			return nil, fmt.Errorf("row GPU%d: %d entries for %d columns", ri, len(f)-1, len(cols))
		}
		if ri < 0 || ri >= n {
			return nil, fmt.Errorf("row GPU%d: no such GPU (%d listed)", ri, n)
		}
		m[ri] = make([]string, n)
		for j, c := range cols {
			if c < 0 || c >= n {
				return nil, fmt.Errorf("column GPU%d: no such GPU (%d listed)", c, n)
			}
			m[ri][c] = f[j+1]
		}
		rows++
	}
	if cols == nil {
		return nil, fmt.Errorf("no GPU header line")
	}
	for i := range m {
		if m[i] == nil {
			return nil, fmt.Errorf("no row for GPU%d", i)
		}
	}
	return m, nil
}

func gpuIndex(s string) (int, error) {
	if !strings.HasPrefix(s, "GPU") {
		return 0, fmt.Errorf("%q is not GPUn", clip(s, 20))
	}
	i, err := strconv.Atoi(s[3:])
	if err != nil || i < 0 {
		return 0, fmt.Errorf("%q is not GPUn", clip(s, 20))
	}
	return i, nil
}

// readProcGPUs lists GPUs from /proc/driver/nvidia/gpus/*/information (name
// and UUID; no compute capability there).
func readProcGPUs(ctx context.Context, procRoot string) ([]GPU, error) {
	dir := filepath.Join(procRoot, "driver", "nvidia", "gpus")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var busIDs []string
	for _, e := range ents {
		busIDs = append(busIDs, e.Name())
	}
	sort.Strings(busIDs)
	var gpus []GPU
	for i, b := range busIDs {
		data, err := readHostFile(ctx, filepath.Join(dir, b, "information"), maxProcFile)
		if err != nil {
			continue
		}
		g := GPU{Index: i}
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "Model":
				g.Name = strings.TrimSpace(v)
			case "GPU UUID":
				g.UUID = strings.TrimSpace(v)
			}
		}
		if g.Name == "" {
			g.Name = "unknown GPU at " + b
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// maxProcFile bounds a file of /proc/driver/nvidia the probe reads (a few
// hundred bytes each).
const maxProcFile = 64 << 10

// readProcDriverVersion reads the driver version from
// /proc/driver/nvidia/version, as written there.
func readProcDriverVersion(ctx context.Context, procRoot string) (string, error) {
	p := filepath.Join(procRoot, "driver", "nvidia", "version")
	data, err := readHostFile(ctx, p, maxProcFile)
	if err != nil {
		return "", err
	}
	_, v, _, err := ParseDriverVersion(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return v, nil
}

// parseSM splits "12.0" (any form smver reads) into 12, 0.
func parseSM(s string) (major, minor int, ok bool) {
	ma, mi, err := smver.Parse(s)
	return ma, mi, err == nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
