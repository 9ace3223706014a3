package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/smver"
)

// probeCUDA finds the CUDA toolkit: $CUDA_HOME, $CUDA_PATH, the toolkit of
// nvcc on PATH, then searchDir/cuda and searchDir/cuda-* (newest first).
func probeCUDA(ctx context.Context, r *Report, searchDir string) *CUDAToolkit {
	var cands []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if v := os.Getenv(env); v != "" {
			cands = append(cands, v)
		}
	}
	if p, err := exec.LookPath("nvcc"); err == nil {
		if rp, err := filepath.EvalSymlinks(p); err == nil {
			p = rp
		}
		cands = append(cands, filepath.Dir(filepath.Dir(p)))
	}
	if searchDir != "" {
		cands = append(cands, filepath.Join(searchDir, "cuda"))
		matches, _ := filepath.Glob(filepath.Join(searchDir, "cuda-*"))
		sort.SliceStable(matches, func(i, j int) bool { return newerToolkit(filepath.Base(matches[i]), filepath.Base(matches[j])) })
		cands = append(cands, matches...)
	}
	var root string
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && fi.IsDir() {
			root = c
			break
		}
	}
	if root == "" {
		// Say what was looked at: a variable that is set but names no
		// directory is not "unset".
		var envs []string
		for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
			if v := os.Getenv(env); v != "" {
				envs = append(envs, env+"="+v+" is not a directory")
			} else {
				envs = append(envs, env+" unset")
			}
		}
		r.unknown("host.cuda_toolkit", "no CUDA toolkit: "+strings.Join(envs, ", ")+", no nvcc on PATH, nothing at "+filepath.Join(searchDir, "cuda*"))
		return nil
	}
	tk := &CUDAToolkit{Root: root}
	nvcc := filepath.Join(root, "bin", "nvcc")
	if _, err := os.Stat(nvcc); err != nil {
		if p, err := exec.LookPath("nvcc"); err == nil {
			nvcc = p
		} else {
			nvcc = ""
		}
	}
	tk.NVCC = nvcc
	// The arch list runs beside the version lookup.
	var archOut []byte
	var archErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if nvcc != "" {
			archOut, archErr = runTool(ctx, nvcc, "--list-gpu-arch")
		}
	}()
	// Version: version.json, else nvcc --version, else CUDA_VERSION in cuda.h.
	var why []string
	if v, err := readVersionJSON(ctx, filepath.Join(root, "version.json")); err == nil {
		tk.Version, tk.VersionFrom = v, filepath.Join(root, "version.json")
	} else {
		why = append(why, err.Error())
	}
	if tk.Version == "" && nvcc != "" {
		out, err := runTool(ctx, nvcc, "--version")
		if err == nil {
			if v := ParseNVCCVersion(out); v != "" {
				tk.Version, tk.VersionFrom = v, "nvcc --version"
			} else {
				why = append(why, "nvcc --version: no release line")
			}
		} else {
			why = append(why, err.Error())
		}
	}
	if tk.Version == "" {
		h := filepath.Join(root, "include", "cuda.h")
		if v, line, err := readCUDAHVersion(ctx, h); err == nil {
			tk.Version, tk.VersionFrom = v, fmt.Sprintf("%s:%d", h, line)
		} else {
			why = append(why, err.Error())
		}
	}
	if tk.Version == "" {
		r.unknown("host.cuda_toolkit.version", strings.Join(why, "; "))
	}
	<-done
	switch {
	case nvcc == "":
		r.unknown("host.cuda_toolkit.arches", "no nvcc under "+root+" or on PATH")
	case archErr != nil:
		r.unknown("host.cuda_toolkit.arches", archErr.Error())
	default:
		tk.Arches = ParseArchList(archOut)
	}
	return tk
}

// maxToolkitFile bounds version.json and cuda.h (tens of KiB).
const maxToolkitFile = 1 << 20

func readVersionJSON(ctx context.Context, path string) (string, error) {
	data, err := readHostFile(ctx, path, maxToolkitFile)
	if err != nil {
		return "", fmt.Errorf("%s: not readable", path)
	}
	var v struct {
		CUDA struct {
			Version string `json:"version"`
		} `json:"cuda"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.CUDA.Version == "" {
		return "", fmt.Errorf("%s: no cuda.version", path)
	}
	if _, err := version.NewVersion(v.CUDA.Version); err != nil {
		return "", fmt.Errorf("%s: cuda.version %q is not a version", path, clip(v.CUDA.Version, 40))
	}
	return v.CUDA.Version, nil
}

var (
	nvccReleaseRe = lazyre.New(`release (\d+\.\d+), V(\d+\.\d+\.\d+)`)
	nvccShortRe   = lazyre.New(`release (\d+\.\d+)`)
	cudaHRe       = lazyre.New(`^#define\s+CUDA_VERSION\s+(\d+)`)
)

// ParseNVCCVersion reads "Cuda compilation tools, release 13.0, V13.0.88"
// from `nvcc --version` as "13.0.88".
func ParseNVCCVersion(out []byte) string {
	if m := nvccReleaseRe().FindSubmatch(out); m != nil {
		return string(m[2])
	}
	if m := nvccShortRe().FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

func readCUDAHVersion(ctx context.Context, path string) (string, int, error) {
	data, err := readHostFile(ctx, path, maxToolkitFile)
	if err != nil {
		return "", 0, fmt.Errorf("%s: not readable", path)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if m := cudaHRe().FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			n, _ := strconv.Atoi(m[1])
			return fmt.Sprintf("%d.%d", n/1000, (n%1000)/10), i + 1, nil
		}
	}
	return "", 0, fmt.Errorf("%s: no CUDA_VERSION", path)
}

// ParseArchList reads `nvcc --list-gpu-arch` (one compute_XY per line):
// the targets it names, as it names them.
func ParseArchList(out []byte) []string {
	var arches []string
	for _, f := range strings.Fields(string(out)) {
		if a, err := smver.ParseArch(f); err == nil && a.Target() == f {
			arches = append(arches, f)
		}
	}
	return arches
}

// newerToolkit orders toolkit directories newest first: "cuda-13.0" before
// "cuda-12.10" before "cuda-12.9", compared as versions; a name that
// holds no version ("cuda-local") after every one that does, by name.
func newerToolkit(a, b string) bool {
	va, ea := version.NewVersion(strings.TrimPrefix(a, "cuda-"))
	vb, eb := version.NewVersion(strings.TrimPrefix(b, "cuda-"))
	switch {
	case ea == nil && eb == nil && !va.Equal(vb):
		return va.GreaterThan(vb)
	case (ea == nil) != (eb == nil):
		return ea == nil
	}
	return a < b
}

// AtLeast reports whether the CUDA version have is at least min, both
// compared as versions (12.10 is after 12.9); an error names the one that
// is not a version.
func AtLeast(have, min string) (bool, error) {
	h, err := version.NewVersion(have)
	if err != nil {
		return false, fmt.Errorf("CUDA %q is not a version", have)
	}
	m, err := version.NewVersion(min)
	if err != nil {
		return false, fmt.Errorf("%q is not a version", min)
	}
	return h.GreaterThanOrEqual(m), nil
}
