package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/probe"
)

// smpatch probe: what this machine, its CUDA toolkit and its Python
// environment can run, with evidence; or the SM targets of CUDA binaries.

// probeOptions are smpatch probe's flags, streams and dependencies.
type probeOptions struct {
	IO IOStreams
	// Probe probes this machine (probe.Run).
	Probe func(ctx context.Context, o probe.Options) (*probe.Report, error)
	// Color is where coloured text for a stream goes, and how it is painted.
	Color func(w io.Writer) (io.Writer, painter)
	// Python is the interpreter meant; PythonNamed says the user named it
	// (--python, $SMPATCH_PYTHON, the config file) rather than the default.
	Python      string
	PythonNamed bool
	Output      string // -o FILE
	Quiet       bool
	Verbose     bool // every module, not only the comm modules

	SitePackages []string
	JSON         bool
	Image        string
	Scan         []string
	Entries      bool
	Timeout      time.Duration
	image        *imageProbe // --image's --platform and --registry-timeout
}

func (o *probeOptions) AddFlags(c *cobra.Command) {
	fl := c.Flags()
	fl.StringArrayVar(&o.SitePackages, "site-packages", nil, "read distributions from this directory instead of asking --python (repeatable; a flashinfer checkout root works too)")
	fl.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	fl.StringVar(&o.Image, "image", "", "probe a container image `REF` instead of this machine (static part only)")
	fl.StringArrayVar(&o.Scan, "scan", nil, "list the SM targets of a CUDA binary `FILE` (repeatable)")
	fl.BoolVar(&o.Entries, "entries", false, "with --scan --json: every fatbin entry header")
	fl.DurationVar(&o.Timeout, "timeout", probe.DefaultTimeout, "bound on the whole probe: every command it runs (nvidia-smi, nvcc, python) and every file it reads")
	o.image.AddFlags(c)
}

func newProbeCmd(f *Factory) *cobra.Command {
	g := f.Globals
	o := &probeOptions{Probe: probe.Run, image: newImageProbe(f), Color: g.colorTarget}
	c := &cobra.Command{
		Use:   "probe",
		Short: "Report what this machine's GPUs, CUDA toolkit and installed flashinfer can build, with evidence",
		Long: `probe reads the GPUs (nvidia-smi), the CUDA toolkit, the Python
environment's installed distributions, and what the installed flashinfer's
JIT gates and comm headers admit per GPU major, all within --timeout. It
never imports torch or flashinfer. Whatever it cannot read is listed as
unknown, with why.

--scan FILE lists the SM targets (cubins and PTX) of CUDA binaries instead.

--image REF probes an image's filesystem instead (the static part). ` + platformHelp,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.image.set(c) && o.Image == "" {
				return withCode(exitUsage, errors.New("probe: --platform and --registry-timeout go with --image"))
			}
			o.IO, o.Output, o.Verbose, o.Quiet = streams(c), g.Output, g.Verbose, g.Quiet
			o.Python, o.PythonNamed = g.PythonPath(), g.Python != "" || g.defaultPython != ""
			return runProbe(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runProbe(ctx context.Context, o *probeOptions) error {
	w := o.IO.Out
	if o.Timeout <= 0 {
		return withCode(exitUsage, fmt.Errorf("probe: --timeout %s: want a positive duration, like 10s", o.Timeout))
	}
	if o.Entries && len(o.Scan) == 0 {
		return withCode(exitUsage, errors.New("probe: --entries needs --scan"))
	}
	if len(o.Scan) > 0 && (o.Output != "" || o.Image != "" || len(o.SitePackages) > 0) {
		return withCode(exitUsage, errors.New("probe: --scan lists one binary's targets; it takes no -o, --image or --site-packages"))
	}
	if len(o.Scan) > 0 {
		return runScan(ctx, w, o)
	}
	var r *probe.Report
	var err error
	if o.Image != "" {
		r, err = o.image.static(ctx, o.IO.ErrOut, o.Image, o.Timeout)
		if err != nil {
			return fmt.Errorf("probe --image %s: %w", o.Image, err)
		}
	} else {
		if err := checkNamedPython(o); err != nil {
			return err
		}
		r, err = o.Probe(ctx, hostRoots(probe.Options{Python: o.Python, SitePackages: o.SitePackages, Timeout: o.Timeout}))
		if err != nil {
			return fmt.Errorf("probe: %w", err)
		}
	}
	if o.JSON {
		if err := WriteJSON(w, r); err != nil {
			return err
		}
		if o.Output != "" && !o.Quiet {
			fi := "no flashinfer"
			if p := r.Packages["flashinfer-python"]; p != nil && p.Version != "" {
				fi = "flashinfer " + p.Version
			}
			what := "GPUs: " + gpusLine(r)
			if o.Image != "" {
				what = "image " + o.Image
			}
			fmt.Fprintf(o.IO.ErrOut, "probe: wrote %s (%s; %s): give it to --probe-file where the GPU host is not at hand\n", o.Output, what, fi)
		}
		return nil
	}
	// Without an interpreter, the site-packages came from --site-packages
	// or from the image.
	from := "no interpreter asked; site-packages from --site-packages"
	if o.Image != "" {
		from = "image " + o.Image
	}
	cw, paint := o.Color(w)
	printReport(w, r, from, o.Verbose, cw, paint)
	return nil
}

// runScan lists the targets of each --scan binary within --timeout.
// With --json --entries the entry headers are written as they are read
// (a binary may have millions), never gathered.
func runScan(ctx context.Context, w io.Writer, o *probeOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	scanErr := func(f string, err error) error {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("probe --scan: %s: not read within --timeout %s", f, o.Timeout)
		}
		return fmt.Errorf("probe --scan: %w", err)
	}
	if o.JSON && o.Entries {
		bw := bufio.NewWriterSize(w, 64<<10)
		err := writeScanEntries(ctx, bw, o.Scan, scanErr)
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
		return err
	}
	var scans []*probe.BinaryScan
	for _, f := range o.Scan {
		s, err := probe.ScanFile(ctx, f, nil)
		if err != nil {
			return scanErr(f, err)
		}
		scans = append(scans, s)
	}
	if o.JSON {
		return WriteJSON(w, scans)
	}
	for _, s := range scans {
		fmt.Fprintf(w, "%s: %s (ELF%d), %d fatbin containers\n", s.Path, s.Kind, s.Class, s.Containers)
		fmt.Fprintf(w, "  cubins: %s\n", joinOrNone(s.Cubins))
		fmt.Fprintf(w, "  ptx:    %s\n", joinOrNone(s.PTX))
	}
	return nil
}

// writeScanEntries writes the JSON of --scan --json --entries: the array
// of scans, each with its entries streamed first and the targets, known
// once every entry is read, after them.
func writeScanEntries(ctx context.Context, w io.Writer, files []string, scanErr func(string, error) error) error {
	marshal := func(v any) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(v)
		return strings.TrimSuffix(b.String(), "\n")
	}
	// A first pass without entries finds what is wrong with a file before
	// anything is written (the scan is a few milliseconds a binary).
	for _, f := range files {
		if _, err := probe.ScanFile(ctx, f, nil); err != nil {
			return scanErr(f, err)
		}
	}
	io.WriteString(w, "[\n")
	for i, f := range files {
		fmt.Fprintf(w, "  {\n    \"path\": %s,\n    \"entries\": [", marshal(f))
		n := 0
		s, err := probe.ScanFile(ctx, f, func(e probe.FatbinEntry) error {
			if n > 0 {
				io.WriteString(w, ",")
			}
			n++
			_, err := fmt.Fprintf(w, "\n      %s", marshal(e))
			return err
		})
		if err != nil {
			return scanErr(f, err)
		}
		if n > 0 {
			io.WriteString(w, "\n    ")
		}
		fmt.Fprintf(w, "],\n    \"kind\": %s,\n    \"elf_class\": %d,\n    \"cubins\": %s,\n    \"ptx\": %s,\n    \"containers\": %d\n  }",
			marshal(s.Kind), s.Class, marshal(s.Cubins), marshal(s.PTX), s.Containers)
		if i < len(files)-1 {
			io.WriteString(w, ",")
		}
		io.WriteString(w, "\n")
	}
	_, err := io.WriteString(w, "]\n")
	return err
}

func joinOrNone(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, " ")
}

// printReport writes the report for people.
func printReport(w io.Writer, r *probe.Report, from string, all bool, cw io.Writer, p painter) {
	if r.Host != nil {
		printHost(w, r)
	}
	printPython(w, r, from)
	if r.FlashInfer != nil {
		printFlashInfer(w, r, all)
	}
	if len(r.Findings) > 0 {
		fmt.Fprintln(w, "Findings:")
		for _, f := range r.Findings {
			fmt.Fprintf(cw, "  %s %s: %s\n", p.okWord(f.OK), p.text(f.Requirement), p.text(f.Evidence))
		}
	}
	if len(r.Unknown) > 0 {
		fmt.Fprintln(w, "Unknown:")
		keys := slices.Sorted(maps.Keys(r.Unknown))
		for _, k := range keys {
			fmt.Fprintf(w, "  %s: %s\n", k, r.Unknown[k])
		}
	}
}

// printHost writes the GPUs, the driver, P2P and the CUDA toolkit.
func printHost(w io.Writer, r *probe.Report) {
	h := r.Host
	if why, ok := r.Unknown["host.gpus"]; ok && len(h.GPUs) == 0 {
		// nvidia-smi hung, printed garbage or is absent: that says
		// nothing about whether there are GPUs.
		fmt.Fprintf(w, "GPUs: unknown (%s)\n", why)
	} else if len(h.GPUs) == 0 {
		fmt.Fprintf(w, "GPUs: none (%s listed none)\n", h.GPUSource)
	} else {
		fmt.Fprintf(w, "GPUs (%s):\n", h.GPUSource)
		for _, g := range h.GPUs {
			fmt.Fprintf(w, "  %s\n", gpuCSV(g, h.Driver))
		}
		if why, ok := r.Unknown["host.gpus.sm"]; ok {
			fmt.Fprintf(w, "  compute capability unknown: %s\n", why)
		}
	}
	if h.Driver != "" {
		fmt.Fprintf(w, "Driver: %s\n", h.Driver)
	}
	if h.P2P != nil {
		fmt.Fprintf(w, "P2P reads (nvidia-smi topo -p2p r): %s\n", p2pSummary(h.P2P))
	} else if why, ok := r.Unknown["host.p2p"]; ok {
		fmt.Fprintf(w, "P2P reads: unknown (%s)\n", why)
	}
	printPCIe(w, r)
	printIOMMU(w, r)
	printDriver(w, r)
	tk := h.CUDAToolkit
	if tk == nil {
		fmt.Fprintf(w, "CUDA toolkit: none (%s)\n", r.Unknown["host.cuda_toolkit"])
		return
	}
	if tk.Version == "" {
		fmt.Fprintf(w, "CUDA toolkit: at %s, version unknown (%s)\n", tk.Root, r.Unknown["host.cuda_toolkit.version"])
	} else {
		fmt.Fprintf(w, "CUDA toolkit: %s at %s (%s)\n", tk.Version, tk.Root, orDash(tk.VersionFrom))
	}
	if tk.NVCC != "" {
		fmt.Fprintf(w, "  nvcc: %s\n", tk.NVCC)
	}
	if len(tk.Arches) > 0 {
		fmt.Fprintf(w, "  arches: %s … %s (%d)\n", tk.Arches[0], tk.Arches[len(tk.Arches)-1], len(tk.Arches))
	}
}

// printPython writes the interpreter, its site-packages and the packages
// read there.
func printPython(w io.Writer, r *probe.Report, from string) {
	if py := r.Python; py != nil {
		label := py.Executable
		if label == "" {
			label = from
		}
		if py.Version != "" {
			label += " (Python " + py.Version + ")"
		}
		fmt.Fprintf(w, "Python: %s\n", label)
		for _, sp := range py.SitePackages {
			fmt.Fprintf(w, "  %s\n", sp)
		}
		if why, ok := r.Unknown["python"]; ok {
			fmt.Fprintf(w, "  unknown: %s\n", why)
		}
	}
	if why, ok := r.Unknown["python"]; ok && len(r.Packages) == 0 && len(pySitePackages(r.Python)) == 0 {
		// Nothing was read: that says nothing about what is installed.
		fmt.Fprintf(w, "Packages: unknown (no site-packages read: %s)\n", why)
	} else {
		fmt.Fprintln(w, "Packages:")
	}
	if len(r.Packages) == 0 && len(pySitePackages(r.Python)) > 0 {
		fmt.Fprintln(w, "  none of "+strings.Join(probe.Dists, ", "))
	}
	names := append([]string(nil), probe.Dists...)
	for _, n := range slices.Sorted(maps.Keys(r.Packages)) {
		if !slices.Contains(names, n) {
			names = append(names, n) // flashinfer-jit-cache-sm120f ...
		}
	}
	for _, name := range names {
		p := r.Packages[name]
		if p == nil {
			continue
		}
		extra := ""
		if p.CUDA != "" {
			extra += "  cuda " + p.CUDA
		}
		fmt.Fprintf(w, "  %-22s %-16s %s%s\n", name, p.Version, p.Location, extra)
		if len(p.Arches) > 0 {
			fmt.Fprintf(w, "  %-22s arches: %s\n", "", strings.Join(p.Arches, " "))
		}
		printPackageExtras(w, p)
	}
}

// printFlashInfer writes what the flashinfer read admits: its header
// exclusions, and the comm modules' gates and verdicts (every module's
// with all).
func printFlashInfer(w io.Writer, r *probe.Report, all bool) {
	fi := r.FlashInfer
	fmt.Fprintf(w, "flashinfer %s (%s layout, %s)\n", orDash(fi.Version), fi.Layout, fi.Root)
	if fi.SM12CUDAMin != "" {
		fmt.Fprintf(w, "  SM 12.x needs CUDA >= %s (%s)\n", fi.SM12CUDAMin, fi.SM12CUDAMinFrom)
	}
	if fi.ArchList != "" {
		fmt.Fprintf(w, "  FLASHINFER_CUDA_ARCH_LIST=%q replaces device detection\n", fi.ArchList)
	}
	excl := map[string][]int{}
	var files []string
	for _, h := range fi.HeaderExclusions {
		if _, ok := excl[h.File]; !ok {
			files = append(files, h.File)
		}
		excl[h.File] = append(excl[h.File], h.Line)
	}
	for _, f := range files {
		fmt.Fprintf(w, "  header exclusions: %d in %s (lines %s)\n", len(excl[f]), f, lineList(excl[f]))
	}
	names := slices.Sorted(maps.Keys(fi.Modules))
	majors := shownMajors(r)
	fmt.Fprintf(w, "  comm module gates and verdicts (SM %s):\n", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(majors)), ", "), "[]"))
	counts := map[string]int{}
	others := 0
	for _, n := range names {
		m := fi.Modules[n]
		if !all && !isCommModule(n, m) {
			others++
			for _, mj := range majors {
				counts[probe.ModuleVerdict(fi, n, mj).Verdict]++
			}
			continue
		}
		gate := m.Gate
		if m.SMMajors != nil {
			gate = fmt.Sprint(m.SMMajors)
		}
		fmt.Fprintf(w, "    %-22s gate %-12s %s\n", n, gate, m.Source)
		for _, mj := range majors {
			v := probe.ModuleVerdict(fi, n, mj)
			fmt.Fprintf(w, "      SM %-3d %-18s %s\n", mj, v.Verdict, strings.Join(v.Reasons, "; "))
		}
	}
	if others > 0 {
		var parts []string
		for _, k := range []string{probe.Supported, probe.UnsupportedGate, probe.UnsupportedHeader, probe.Unknown} {
			if counts[k] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
			}
		}
		fmt.Fprintf(w, "  %d other modules (module × major): %s (--json or --verbose for each)\n", others, strings.Join(parts, ", "))
	}
}

// gpuCSV prints a GPU the way nvidia-smi --query-gpu=index,name,uuid,
// compute_cap,driver_version,memory.total --format=csv,noheader does.
func gpuCSV(g probe.GPU, driver string) string {
	mem := "[N/A]"
	if g.MemoryMiB > 0 {
		mem = strconv.Itoa(g.MemoryMiB) + " MiB"
	}
	return strings.Join([]string{strconv.Itoa(g.Index), g.Name, orNA(g.UUID), orNA(g.SM), orNA(driver), mem}, ", ")
}

func orNA(s string) string {
	if s == "" {
		return "[N/A]"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func isCommModule(name string, m *probe.Module) bool {
	if strings.Contains(name, "comm") || strings.Contains(name, "allreduce") {
		return true
	}
	for _, s := range m.Sources {
		if strings.Contains(s, "allreduce") {
			return true
		}
	}
	return false
}

// shownMajors are the majors of the visible GPUs, or the default set.
func shownMajors(r *probe.Report) []int {
	set := map[int]bool{}
	if r.Host != nil {
		for _, g := range r.Host.GPUs {
			if m := g.Major(); m >= 0 {
				set[m] = true
			}
		}
	}
	if len(set) == 0 {
		for _, m := range []int{9, 10, 12} {
			set[m] = true
		}
	}
	var ms []int
	for m := range set {
		ms = append(ms, m)
	}
	sort.Ints(ms)
	return ms
}

func lineList(ls []int) string {
	var parts []string
	for i, l := range ls {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("… %d more", len(ls)-6))
			break
		}
		parts = append(parts, strconv.Itoa(l))
	}
	return strings.Join(parts, ", ")
}

func p2pSummary(m [][]string) string {
	var bad []string
	for i, row := range m {
		for j, s := range row {
			if i != j && s != "OK" {
				bad = append(bad, fmt.Sprintf("GPU%d→GPU%d %s", i, j, s))
			}
		}
	}
	if len(bad) == 0 {
		return fmt.Sprintf("all pairs OK (%d GPUs)", len(m))
	}
	if len(bad) > 6 {
		return fmt.Sprintf("%d pairs not OK: %s …", len(bad), strings.Join(bad[:6], ", "))
	}
	return fmt.Sprintf("%d pairs not OK: %s", len(bad), strings.Join(bad, ", "))
}
