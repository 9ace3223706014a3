package probe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/source"
)

// What the probe reads of the packages beside sglang, past their
// versions: the version NCCL's library states, triton's bundled ptxas,
// and the per-architecture flashinfer-jit-cache packages.

// splitJITCachePrefix is how the names of flashinfer's per-architecture
// jit-cache packages begin (flashinfer-jit-cache-sm120f, ...-sm121a).
const splitJITCachePrefix = "flashinfer-jit-cache-sm"

// splitJITCacheDists are the per-architecture jit-cache distributions in
// dirs, by PEP 503 name, sorted.
func splitJITCacheDists(fsys fs.FS, dirs []string) []string {
	set := map[string]bool{}
	for _, d := range dirs {
		ents, err := fs.ReadDir(fsys, d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			base, ok := strings.CutSuffix(e.Name(), ".dist-info")
			if !ok {
				continue
			}
			name, _, _ := strings.Cut(base, "-")
			if n := source.NormalizeDistName(name); strings.HasPrefix(n, splitJITCachePrefix) {
				set[n] = true
			}
		}
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// distFiles are the files of a distribution's RECORD (slash paths on fsys)
// whose base name satisfies keep; nil when it has no RECORD.
func distFiles(fsys fs.FS, d *source.Dist, keep func(base string) bool) []string {
	data, err := fs.ReadFile(fsys, path.Join(fsPath(d.DistInfo), "RECORD"))
	if err != nil {
		return nil
	}
	loc := fsPath(d.Location)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f, _, _ := strings.Cut(line, ",")
		f = strings.Trim(strings.TrimSpace(f), `"`)
		if f == "" || path.IsAbs(f) || !keep(path.Base(f)) {
			continue
		}
		p := path.Join(loc, f)
		if p != loc && strings.HasPrefix(p, loc+"/") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// ncclLibs are where the NCCL wheels put the library, relative to
// site-packages, when RECORD does not say.
var ncclLibs = []string{"nvidia/nccl/lib/libnccl.so.2", "nvidia/cu13/lib/libnccl.so.2"}

// readNCCLLib sets p.LibVersion from the NCCL library of the wheel.
func readNCCLLib(ctx context.Context, r *Report, fsys fs.FS, name string, d *source.Dist, p *Package) {
	files := distFiles(fsys, d, func(b string) bool { return strings.HasPrefix(b, "libnccl.so") })
	if files == nil {
		for _, l := range ncclLibs {
			f := path.Join(fsPath(d.Location), l)
			if _, err := fs.Stat(fsys, f); err == nil {
				files = []string{f}
				break
			}
		}
	}
	if len(files) == 0 {
		r.unknown("packages."+name+".lib_version", "no libnccl.so in its RECORD or at "+strings.Join(ncclLibs, ", ")+" under "+p.Location)
		return
	}
	v, off, err := ncclVersionFS(ctx, fsys, files[0])
	if err != nil {
		r.unknown("packages."+name+".lib_version", "/"+files[0]+": "+err.Error())
		return
	}
	p.LibVersion, p.LibVersionFrom = v, fmt.Sprintf("/%s@%d", files[0], off)
}

// maxRodata bounds the read-only data section searched for NCCL's version
// (a few MiB in libnccl.so.2, which is hundreds of MiB in all).
const maxRodata = 64 << 20

var ncclVersionRe = lazyre.New(`NCCL version (\d+\.\d+\.\d+[0-9A-Za-z.+-]*)`)

func ncclVersionFS(ctx context.Context, fsys fs.FS, name string) (string, int64, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !fi.Mode().IsRegular() {
		return "", 0, ErrNotRegular
	}
	ra, ok := f.(io.ReaderAt)
	if !ok {
		return "", 0, fmt.Errorf("not seekable")
	}
	return NCCLVersion(ctxReaderAt{ctx, ra}, fi.Size())
}

// NCCLVersion finds the "NCCL version X.Y.Z+cudaA.B" string NCCL builds
// into its library and returns the version and its file offset. Only the
// ELF's .rodata section is searched, at most 64 MiB of it.
func NCCLVersion(r io.ReaderAt, size int64) (string, int64, error) {
	h, err := readELFHeader(r, size)
	if err != nil {
		return "", 0, err
	}
	secs, err := h.sections(r, size)
	if err != nil {
		return "", 0, err
	}
	for _, s := range secs {
		if sectionName(r, size, secs, h.shstrndx, s) != ".rodata" || s.typ == 8 {
			continue
		}
		if s.offset > uint64(size) || s.size > uint64(size)-s.offset {
			return "", 0, fmt.Errorf(".rodata at %d+%d past the end of the file (%d bytes)", s.offset, s.size, size)
		}
		if s.size > maxRodata {
			return "", 0, fmt.Errorf(".rodata is %d bytes, more than the %d the probe searches", s.size, maxRodata)
		}
		return findString(r, int64(s.offset), int64(s.size), ncclVersionRe())
	}
	return "", 0, fmt.Errorf("no .rodata section")
}

// findString searches [off, off+n) of r for re in chunks that overlap by
// 256 bytes, and returns its first submatch and where the match starts.
func findString(r io.ReaderAt, off, n int64, re *regexp.Regexp) (string, int64, error) {
	const chunk, overlap = 1 << 20, 256
	buf := make([]byte, chunk+overlap)
	for pos := int64(0); pos < n; pos += chunk {
		want := min(int64(len(buf)), n-pos)
		got, err := r.ReadAt(buf[:want], off+pos)
		if err != nil && err != io.EOF {
			return "", 0, err
		}
		if m := re.FindSubmatchIndex(buf[:got]); m != nil {
			return string(buf[m[2]:m[3]]), off + pos + int64(m[0]), nil
		}
		if int64(got) < want {
			break
		}
	}
	return "", 0, fmt.Errorf("no %q string in .rodata", "NCCL version")
}

// tritonPTXAS is where a triton wheel keeps its ptxas.
const tritonPTXAS = "triton/backends/nvidia/bin/ptxas"

// readTritonPTXAS finds triton's bundled ptxas and, when live (this
// machine, not an image), asks it its version and targets.
func readTritonPTXAS(ctx context.Context, r *Report, fsys fs.FS, p *Package, live bool) {
	f := path.Join(fsPath(p.Location), tritonPTXAS)
	fi, err := fs.Stat(fsys, f)
	if err != nil {
		r.unknown("packages.triton.ptxas", "/"+f+": "+errText(err))
		return
	}
	if !fi.Mode().IsRegular() {
		r.unknown("packages.triton.ptxas", fmt.Sprintf("/%s: %v (%s)", f, ErrNotRegular, fi.Mode().Type()))
		return
	}
	pt := &PTXAS{Path: "/" + f}
	p.PTXAS = pt
	if !live {
		r.unknown("packages.triton.ptxas.version", "not run: the probe reads an image's files and runs none of them")
		return
	}
	var wg sync.WaitGroup
	var vout, hout []byte
	var verr, herr error
	wg.Add(2)
	go func() { defer wg.Done(); vout, verr = runTool(ctx, pt.Path, "--version") }()
	go func() { defer wg.Done(); hout, herr = runTool(ctx, pt.Path, "--help") }()
	wg.Wait()
	if verr != nil {
		r.unknown("packages.triton.ptxas.version", verr.Error())
	} else if v := ParsePTXASVersion(vout); v == "" {
		r.unknown("packages.triton.ptxas.version", pt.Path+" --version: no \"V12.8.93\"-like version in "+fmt.Sprintf("%q", clip(lastLine(string(vout)), 80)))
	} else {
		pt.Version, pt.VersionFrom = v, pt.Path+" --version"
	}
	if herr != nil {
		r.unknown("packages.triton.ptxas.targets", herr.Error())
	} else if ts := ParsePTXASTargets(hout); len(ts) == 0 {
		r.unknown("packages.triton.ptxas.targets", pt.Path+" --help: no allowed values listed for --gpu-name")
	} else {
		pt.Targets, pt.TargetsFrom = ts, pt.Path+" --help (--gpu-name allowed values)"
	}
}

var ptxasVersionRe = lazyre.New(`(?m)\bV(\d+\.\d+\.\d+)\b`)

// ParsePTXASVersion reads `ptxas --version` ("Cuda compilation tools,
// release 12.8, V12.8.93"): "12.8.93", or "" when there is none.
func ParsePTXASVersion(out []byte) string {
	if m := ptxasVersionRe().FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

var smValueRe = lazyre.New(`'(sm_\d+[a-z]?)'`)

// ParsePTXASTargets reads the values `ptxas --help` allows for
// --gpu-name: its option text says "Allowed values for this option:
// 'sm_100','sm_100a',...", up to "Default value" or the next option.
func ParsePTXASTargets(out []byte) []string {
	i := bytes.Index(out, []byte("--gpu-name"))
	if i < 0 {
		return nil
	}
	rest := out[i+len("--gpu-name"):]
	if j := bytes.Index(rest, []byte("\n--")); j >= 0 {
		rest = rest[:j]
	}
	j := bytes.Index(rest, []byte("Allowed values for this option:"))
	if j < 0 {
		return nil
	}
	list := rest[j:]
	if k := bytes.Index(list, []byte("Default value")); k >= 0 {
		list = list[:k]
	}
	set := map[string]bool{}
	for _, v := range smValueRe().FindAllSubmatch(list, -1) {
		set[string(v[1])] = true
	}
	return sortedTargets(set)
}

func errText(err error) string {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
