package probe

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/ctxio"
	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/source"
)

// Options says what Run probes.
type Options struct {
	// Python is the interpreter whose sys.path gives site-packages ("" is
	// python3 on PATH). Unused when SitePackages is set.
	Python string
	// SitePackages replaces asking the interpreter: directories to read
	// distributions (and flashinfer) from. A flashinfer checkout root works too.
	SitePackages []string
	// Timeout bounds the whole probe, every command it runs and every file
	// it reads (DefaultTimeout when zero): what is not read by then is
	// reported unknown.
	Timeout time.Duration
	// Majors adds SM majors to compute verdicts for (an --sm override).
	Majors []int
	// SysRoot, ProcRoot and CUDASearchDir are "/sys", "/proc" and
	// "/usr/local" unless set (a synthetic host in tests).
	SysRoot       string
	ProcRoot      string
	CUDASearchDir string
	// NoBinaries skips the fatbin scan of package binaries.
	NoBinaries bool
}

// Dists are the distributions the probe reports, by PEP 503 name.
// The per-architecture flashinfer-jit-cache-smXY packages found beside
// them are reported too.
var Dists = []string{"torch", "triton", "flashinfer-python", "flashinfer-jit-cache", "flashinfer-cubin", "sglang", "sgl-kernel", "sglang-kernel", "sgl-deep-gemm", "nvidia-nccl-cu12", "nvidia-nccl-cu13"}

// Run probes this machine: GPUs and driver, CUDA toolkit, the Python
// environment and everything Static reads there, all within opts.Timeout.
// A cancelled ctx (a signal) returns its error and no report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	procRoot := cmp.Or(opts.ProcRoot, "/proc")
	sysRoot := cmp.Or(opts.SysRoot, "/sys")
	search := cmp.Or(opts.CUDASearchDir, "/usr/local")
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// The GPU query and the toolkit are processes of their own: ask them
	// while the interpreter is asked and its site-packages read, each
	// filling a report of its own.
	h := &Host{GPUs: []GPU{}}
	gr, cr, hr := newReport(), newReport(), newReport()
	var wg sync.WaitGroup
	var facts *hostFacts
	wg.Add(3)
	go func() { defer wg.Done(); probeGPUs(ctx, gr, h, procRoot) }()
	go func() { defer wg.Done(); h.CUDAToolkit = probeCUDA(ctx, cr, search) }()
	go func() { defer wg.Done(); facts = readHostFacts(ctx, hr, sysRoot, procRoot) }()
	r := newReport()
	py := &Python{SitePackages: []string{}}
	r.Python = py
	dirs, err := pythonDirs(ctx, r, py, opts)
	if err == nil {
		py.SitePackages = append(py.SitePackages, dirs...)
		for _, d := range dirs {
			if m := pyVersionRe().FindStringSubmatch(d); m != nil {
				py.Version = m[1]
				break
			}
		}
		staticInto(ctx, r, hostFS{}, dirs, opts, true)
	}
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if err := parent.Err(); err != nil {
		return nil, err // interrupted: no half report
	}
	facts.matchGPUs(hr, h.GPUs, h.GPUSource)
	h.PCIe, h.IOMMU, h.NvidiaDriver = facts.pcie, facts.iommu, facts.driver
	r.Host = h
	for _, sub := range []*Report{gr, cr, hr} {
		for k, v := range sub.Unknown {
			r.unknown(k, v)
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		r.unknown("probe.timeout", fmt.Sprintf("--timeout %s reached; what was not read by then is unknown", timeout))
	}
	// FLASHINFER_CUDA_ARCH_LIST in this environment replaces flashinfer's
	// device detection, so it changes the verdicts, as the GPUs' majors
	// add to them.
	if env := os.Getenv("FLASHINFER_CUDA_ARCH_LIST"); env != "" && r.FlashInfer != nil {
		r.FlashInfer.ArchList = env
	}
	computeVerdicts(r, reportMajors(r, opts.Majors))
	return r, nil
}

// pythonDirs are the --site-packages dirs, or the interpreter's.
func pythonDirs(ctx context.Context, r *Report, py *Python, opts Options) ([]string, error) {
	if len(opts.SitePackages) == 0 {
		python := cmp.Or(opts.Python, "python3")
		py.Executable = python
		paths, err := source.PythonSysPath(ctx, python)
		if err != nil {
			r.unknown("python", err.Error())
			return nil, nil
		}
		dirs := source.SitePackagesDirs(paths)
		if len(dirs) == 0 {
			r.unknown("python.site_packages", "no site-packages or dist-packages directory on sys.path of "+python)
		}
		return dirs, nil
	}
	var dirs []string
	for _, d := range opts.SitePackages {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("--site-packages %s: %w", d, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("--site-packages %s: not a directory", d)
		}
		dirs = append(dirs, abs)
	}
	return dirs, nil
}

var pyVersionRe = lazyre.New(`python(\d+\.\d+)`)

// Static reads what needs no running machine from a filesystem: the
// distributions in sitePackages (slash paths on fsys, leading "/" allowed),
// flashinfer's gates and headers, and the SM targets of package binaries.
// The image builder runs it on an image filesystem.
func Static(ctx context.Context, fsys fs.FS, sitePackages []string) (*Report, error) {
	r := newReport()
	r.Python = &Python{SitePackages: append([]string{}, sitePackages...)}
	staticInto(ctx, r, fsys, sitePackages, Options{}, false)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

// staticInto reads the distributions in dirs of fsys into r; live says
// fsys is this machine's, whose tools (triton's ptxas) may be run.
func staticInto(ctx context.Context, r *Report, fsys fs.FS, dirs []string, opts Options, live bool) {
	fsys = boundedFS{fsys: fsys, ctx: ctx, max: MaxSourceFile}
	fsDirs := make([]string, len(dirs))
	for i, d := range dirs {
		fsDirs[i] = fsPath(d)
	}
	dists := map[string]*source.Dist{}
	for _, name := range append(append([]string(nil), Dists...), splitJITCacheDists(fsys, fsDirs)...) {
		d, err := source.FindDistFS(fsys, fsDirs, name)
		if err != nil {
			continue
		}
		dists[name] = d
		p := &Package{Version: d.Version, Location: "/" + strings.TrimPrefix(d.Location, "/")}
		r.Packages[name] = p
	}
	if p := r.Packages["torch"]; p != nil {
		if data, err := fs.ReadFile(fsys, path.Join(fsPath(p.Location), "torch", "version.py")); err == nil {
			if m := torchCUDARe().FindSubmatch(data); m != nil {
				p.CUDA = string(m[1])
			}
		}
	}
	// flashinfer-python against its prebuilt kernels.
	if fp := r.Packages["flashinfer-python"]; fp != nil {
		for _, other := range []string{"flashinfer-jit-cache", "flashinfer-cubin"} {
			op := r.Packages[other]
			if op == nil {
				continue
			}
			ok := baseVersion(op.Version) == baseVersion(fp.Version)
			r.Findings = append(r.Findings, Finding{
				Requirement: other + " version matches flashinfer-python",
				OK:          ok,
				Evidence:    fmt.Sprintf("flashinfer-python %s (%s), %s %s (%s)", fp.Version, fp.Location, other, op.Version, op.Location),
			})
		}
	}
	fiDirs := fsDirs
	if d := dists["flashinfer-python"]; d != nil {
		// pip install -e: the dist-info is in site-packages, the package
		// in the checkout its direct_url.json names.
		if dir, ok := editableDir(fsys, d); ok {
			fiDirs = append(append([]string(nil), fsDirs...), dir)
		}
	}
	if t, ok := findFlashInfer(fsys, fiDirs); ok {
		r.FlashInfer = analyzeFlashInfer(ctx, t, r)
		if r.FlashInfer.Version == "" {
			if d := dists["flashinfer-python"]; d != nil {
				r.FlashInfer.Version, r.FlashInfer.VersionFrom = d.Version, "/"+d.DistInfo+"/METADATA"
				delete(r.Unknown, "flashinfer.version")
			}
		}
	} else if r.Packages["flashinfer-python"] != nil {
		r.unknown("flashinfer", "flashinfer-python is installed but no flashinfer/jit package was found in "+strings.Join(dirs, ", "))
	}
	computeVerdicts(r, reportMajors(r, opts.Majors))
	if p := r.Packages["triton"]; p != nil {
		readTritonPTXAS(ctx, r, fsys, p, live)
	}
	if !opts.NoBinaries {
		for _, name := range []string{"nvidia-nccl-cu12", "nvidia-nccl-cu13"} {
			if p := r.Packages[name]; p != nil {
				readNCCLLib(ctx, r, fsys, name, dists[name], p)
			}
		}
		scanPackageBinaries(ctx, r, fsys, dists)
	}
}

// editableDir is the directory an editable install (pip install -e) was
// made from, as its dist-info's direct_url.json says, as an fs.FS path.
func editableDir(fsys fs.FS, d *source.Dist) (string, bool) {
	data, err := fs.ReadFile(fsys, path.Join(fsPath(d.DistInfo), "direct_url.json"))
	if err != nil {
		return "", false
	}
	dir, ok := source.EditableDir(data)
	if !ok {
		return "", false
	}
	return fsPath(dir), true
}

// baseVersion drops a local version label ("0.6.17+cu130" → "0.6.17").
func baseVersion(v string) string {
	if i := strings.IndexByte(v, '+'); i >= 0 {
		return v[:i]
	}
	return v
}

var torchCUDARe = lazyre.New(`(?m)^cuda\s*(?::[^=]*)?=\s*['"]([^'"]+)['"]`)

// reportMajors are the majors verdicts are computed for.
func reportMajors(r *Report, extra []int) []int {
	ms := append(append([]int(nil), DefaultMajors...), extra...)
	if r.Host != nil {
		for _, g := range r.Host.GPUs {
			if m := g.Major(); m >= 0 {
				ms = append(ms, m)
			}
		}
	}
	return ms
}

// binaryGlob is a package directory and the binaries in it whose SM
// targets the report lists.
type binaryGlob struct {
	dir  string
	exts []string
	only []string // exact file names (torch: the CUDA library alone)
	// perFile lists each binary's arches too: sgl-kernel's loader picks
	// sm90/ or sm100/common_ops by GPU.
	perFile bool
}

// binaryGlobs are, per distribution, its package directory and the binaries
// whose SM targets the report lists.
var binaryGlobs = map[string]binaryGlob{
	"torch":                {dir: "torch/lib", only: []string{"libtorch_cuda.so"}},
	"flashinfer-jit-cache": {dir: "flashinfer_jit_cache", exts: []string{".so"}},
	"flashinfer-cubin":     {dir: "flashinfer_cubin", exts: []string{".cubin"}},
	"sgl-kernel":           {dir: "sgl_kernel", exts: []string{".so"}, perFile: true},
	"sglang-kernel":        {dir: "sgl_kernel", exts: []string{".so"}, perFile: true},
}

// maxPerFile bounds the binaries whose arches are listed one by one.
const maxPerFile = 16

func scanPackageBinaries(ctx context.Context, r *Report, fsys fs.FS, dists map[string]*source.Dist) {
	names := slices.Sorted(maps.Keys(r.Packages))
	for _, name := range names {
		p := r.Packages[name]
		files, where, perFile, ok := packageBinaries(ctx, fsys, name, p, dists[name])
		if !ok {
			continue
		}
		if len(files) == 0 {
			r.unknown("packages."+name+".arches", "no binaries "+where)
			continue
		}
		set := map[string]bool{}
		var errs []string
		for _, f := range files {
			s, err := scanFS(ctx, fsys, f)
			if err != nil {
				errs = append(errs, "/"+f+": "+err.Error())
				continue
			}
			for _, t := range s.Targets() {
				set[t] = true
			}
			p.ArchesFrom = append(p.ArchesFrom, "/"+f)
			if perFile && len(files) <= maxPerFile {
				p.Files = append(p.Files, BinaryArches{Path: "/" + f, Arches: s.Targets()})
			}
		}
		p.Arches = sortedTargets(set)
		if len(errs) > 0 {
			r.unknown("packages."+name+".arches", fmt.Sprintf("%d of %d binaries not read: %s", len(errs), len(files), errs[0]))
		}
		if len(p.ArchesFrom) > 5 {
			n := len(p.ArchesFrom)
			p.ArchesFrom = append(p.ArchesFrom[:4], fmt.Sprintf("... %d files in all", n))
		}
	}
}

// packageBinaries are the binaries of the package name whose SM targets
// the report lists (ok false for a package without any), and where they
// were looked for.
func packageBinaries(ctx context.Context, fsys fs.FS, name string, p *Package, d *source.Dist) (files []string, where string, perFile, ok bool) {
	g, ok := binaryGlobs[name]
	if !ok && strings.HasPrefix(name, splitJITCachePrefix) {
		// A per-architecture jit-cache: its RECORD names its files.
		g, ok = binaryGlob{dir: strings.ReplaceAll(name, "-", "_"), exts: []string{".so", ".cubin"}}, true
		if d != nil {
			if rec := distFiles(fsys, d, func(b string) bool { return strings.HasSuffix(b, ".so") || strings.HasSuffix(b, ".cubin") }); rec != nil {
				return rec, "in the RECORD of /" + fsPath(d.DistInfo), false, true
			}
		}
	}
	if !ok {
		return nil, "", false, false
	}
	root := path.Join(fsPath(p.Location), g.dir)
	_ = fs.WalkDir(fsys, root, func(fp string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || ctx.Err() != nil {
			return nil
		}
		base := path.Base(fp)
		for _, o := range g.only {
			if base == o {
				files = append(files, fp)
			}
		}
		for _, e := range g.exts {
			if strings.HasSuffix(base, e) {
				files = append(files, fp)
			}
		}
		return nil
	})
	return files, "under /" + root, g.perFile, true
}

// ScanFile scans one binary on disk while ctx lasts (smpatch probe
// --scan's --timeout, or a signal); each, when not nil, gets every fatbin
// entry header as it is read.
func ScanFile(ctx context.Context, file string, each func(FatbinEntry) error) (*BinaryScan, error) {
	f, err := openRegular(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", file)
	}
	s, err := ScanBinary(ctx, f, fi.Size(), each)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	s.Path = file
	return s, nil
}

// maxUnseekable bounds a binary read whole because it cannot seek.
const maxUnseekable = 256 << 20

// scanFS scans one binary on an fs.FS while ctx lasts: files that can
// seek are streamed, others up to 256 MiB are read whole.
func scanFS(ctx context.Context, fsys fs.FS, name string) (*BinaryScan, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var ra io.ReaderAt
	switch v := f.(type) {
	case io.ReaderAt:
		ra = v
	case io.ReadSeeker:
		ra = &seekReaderAt{rs: v}
	default:
		if fi.Size() > maxUnseekable {
			return nil, fmt.Errorf("%d bytes and not seekable", fi.Size())
		}
		data, err := bounded.ReadAll(ctxio.Reader(ctx, f), maxUnseekable, "not seekable")
		if err != nil {
			return nil, err
		}
		ra = bytes.NewReader(data)
	}
	s, err := ScanBinary(ctx, ra, fi.Size(), nil)
	if err != nil {
		return nil, err
	}
	s.Path = "/" + name
	return s, nil
}

// ctxReaderAt reads through ra until ctx is done.
type ctxReaderAt struct {
	ctx context.Context
	ra  io.ReaderAt
}

func (c ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.ra.ReadAt(p, off)
}

type seekReaderAt struct{ rs io.ReadSeeker }

func (s *seekReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if _, err := s.rs.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.ReadFull(s.rs, p)
}
