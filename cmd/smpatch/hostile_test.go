package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/BurntSushi/toml"
)

// The hostile corpus (testdata/hostile/AREA/CASE/): inputs a careless or
// hostile party could hand smpatch (a cloned repository's journal, an
// image, a matrix file, a log), each with what smpatch must do about it.
// A case is a directory of files and case.toml:
//
//	summary  = "what the input is"
//	symlinks = ["tree/.smpatch -> ../outside"]      # made before the steps
//	generate = ["big-file tree/.smpatch/state.json 64"] # inputs too big to keep
//	[[step]]
//	args    = ["status", "--repo", "$TREE"]   # $CASE, $TREE (= $CASE/tree)
//	exit    = 1
//	stderr  = 'regexp'                        # also stdout; "" checks nothing
//	changes = ["tree/python/x.py"]            # files this step may change
//
// Every file is copied to a fresh directory first; a path component
// "dot-git" becomes ".git" and "dot-smpatch" ".smpatch" (a repository
// cannot hold those names). After each step, every file of the copy
// (journal directories aside) and of a directory beside it, "outside", is
// byte for byte what it was, except the step's changes.

type hostileCase struct {
	Summary  string
	Symlinks []string
	Generate []string
	Step     []hostileStep
}

type hostileStep struct {
	Args    []string
	Exit    int
	Stderr  string
	Stdout  string
	Changes []string
}

// hostileGenerators make inputs too large to keep in the repository:
// NAME PATH ARGS...
var hostileGenerators = map[string]func(path string, args []string) error{
	// big-file PATH MIB: a JSON object of MIB mebibytes.
	"big-file": func(path string, args []string) error {
		mib, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprint(f, `{"format": 1, "patches": [], "pad": "`)
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for i := 0; i < mib; i++ {
			f.Write(chunk)
		}
		_, err = fmt.Fprint(f, "\"}\n")
		return err
	},
	// tar-claim PATH NAME SIZE: a tar whose one entry NAME claims SIZE
	// bytes and holds 512.
	"tar-claim": func(path string, args []string) error {
		size, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: args[0], Mode: 0o644, Size: size, Format: tar.FormatGNU}); err != nil {
			return err
		}
		w.Write(make([]byte, 512))
		return os.WriteFile(path, b.Bytes(), 0o644)
	},
	// tar-many PATH N: a tar of N empty entries.
	"tar-many": func(path string, args []string) error {
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		for i := 0; i < n; i++ {
			w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("f%d", i), Mode: 0o644})
		}
		w.Close()
		return os.WriteFile(path, b.Bytes(), 0o644)
	},
	// files DIR N: a directory of N empty files.
	"files": func(path string, args []string) error {
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		if err := os.MkdirAll(path, 0o755); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := os.WriteFile(filepath.Join(path, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
				return err
			}
		}
		return nil
	},
	// sparse-fatbin PATH GIB [ENTRIES]: a host ELF whose .nv_fatbin holds a
	// container of ENTRIES (default 1) sm_120a cubin headers, GIB gibibytes
	// of zero padding left as a hole, and a container of one sm_90 cubin.
	"sparse-fatbin": func(path string, args []string) error {
		gib, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil {
			return err
		}
		entries := 1
		if len(args) > 1 {
			if entries, err = strconv.Atoi(args[1]); err != nil {
				return err
			}
		}
		return writeSparseFatbin(path, gib<<30, entries)
	},
	// unclosed-calls PATH N: a flashinfer JIT generator of N
	// get_nvcc_flags_list( calls that never close.
	"unclosed-calls": func(path string, args []string) error {
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		src := "# Synthetic flashinfer JIT module for smpatch's hostile-input tests.\ndef gen_trtllm_comm_module():\n    " + strings.Repeat("get_nvcc_flags_list(", n) + "\n"
		return os.WriteFile(path, []byte(src), 0o644)
	},
	// fifo PATH: a named pipe nobody writes to.
	"fifo": func(path string, args []string) error {
		return syscall.Mkfifo(path, 0o644)
	},
	// copy PATH SRC: the case's file SRC (relative to PATH's directory, as
	// in tar-of) at PATH, a name a repository should not hold (255 bytes).
	"copy": func(path string, args []string) error {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(path), args[0]))
		if err != nil {
			return err
		}
		return os.WriteFile(path, data, 0o644)
	},
	// tar-of PATH NAME=SRC...: a tar of the case's files SRC under NAME.
	"tar-of": func(path string, args []string) error {
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		for _, a := range args {
			name, src, _ := strings.Cut(a, "=")
			data, err := os.ReadFile(filepath.Join(filepath.Dir(path), src))
			if err != nil {
				return err
			}
			w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))})
			w.Write(data)
		}
		w.Close()
		return os.WriteFile(path, b.Bytes(), 0o644)
	},
}

// TestHostileCorpus replays every case of testdata/hostile (make
// test-hostile runs only this).
func TestHostileCorpus(t *testing.T) {
	cases, err := filepath.Glob("../../testdata/hostile/*/*/case.toml")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no hostile cases: %v", err)
	}
	for _, c := range cases {
		dir := filepath.Dir(c)
		name := filepath.Base(filepath.Dir(dir)) + "/" + filepath.Base(dir)
		t.Run(name, func(t *testing.T) { runHostileCase(t, dir) })
	}
}

func runHostileCase(t *testing.T, src string) {
	var hc hostileCase
	md, err := toml.DecodeFile(filepath.Join(src, "case.toml"), &hc)
	if err != nil {
		t.Fatal(err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		t.Fatalf("case.toml: unknown keys %v", u)
	}
	if hc.Summary == "" || len(hc.Step) == 0 {
		t.Fatal("case.toml: a case needs a summary and at least one step")
	}
	base := t.TempDir()
	cs := filepath.Join(base, "case")
	outside := filepath.Join(base, "outside")
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "keep"), []byte("outside the tree\n"), 0o644)
	if err := copyCase(src, cs); err != nil {
		t.Fatal(err)
	}
	for _, l := range hc.Symlinks {
		from, to, ok := strings.Cut(l, " -> ")
		if !ok {
			t.Fatalf("symlink %q: want FROM -> TO", l)
		}
		p := filepath.Join(cs, filepath.FromSlash(caseName(from)))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(caseName(to), p); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range hc.Generate {
		f := strings.Fields(g)
		gen := hostileGenerators[f[0]]
		if gen == nil || len(f) < 2 {
			t.Fatalf("generate %q: unknown generator", g)
		}
		p := filepath.Join(cs, filepath.FromSlash(caseName(f[1])))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := gen(p, f[2:]); err != nil {
			t.Fatalf("generate %q: %v", g, err)
		}
	}
	t.Setenv("XDG_STATE_HOME", filepath.Join(base, "state"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(base, "cache"))
	t.Setenv("HOME", filepath.Join(base, "home"))
	t.Setenv("SMPATCH_CATALOG", "")
	t.Setenv("SMPATCH_REPO", "")
	for i, st := range hc.Step {
		before := hashFiles(t, base)
		args := make([]string, len(st.Args))
		for k, a := range st.Args {
			a = strings.ReplaceAll(a, "$TREE", filepath.Join(cs, "tree"))
			args[k] = strings.ReplaceAll(a, "$CASE", cs)
		}
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		where := fmt.Sprintf("step %d (%s)", i+1, strings.Join(st.Args, " "))
		if code != st.Exit {
			t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", where, code, st.Exit, stdout.String(), stderr.String())
		}
		for _, m := range []struct{ name, re, got string }{{"stdout", st.Stdout, stdout.String()}, {"stderr", st.Stderr, stderr.String()}} {
			if m.re == "" {
				continue
			}
			ok, err := regexp.MatchString("(?m)"+m.re, m.got)
			if err != nil {
				t.Fatalf("%s: %s regexp: %v", where, m.name, err)
			}
			if !ok {
				t.Fatalf("%s: %s does not match %q:\n%s", where, m.name, m.re, m.got)
			}
		}
		if strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 && code != 0 {
			t.Errorf("%s: more than one line on stderr:\n%s", where, stderr.String())
		}
		after := hashFiles(t, base)
		allowed := map[string]bool{}
		for _, c := range st.Changes {
			allowed["case/"+caseName(c)] = true
		}
		for p, h := range before {
			if after[p] != h && !allowed[p] {
				t.Errorf("%s: %s changed", where, p)
			}
		}
		for p := range after {
			if _, ok := before[p]; !ok && !allowed[p] {
				t.Errorf("%s: %s created", where, p)
			}
		}
	}
}

// caseName maps the stored names of a case to the names they stand for.
func caseName(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		switch s {
		case "dot-git":
			parts[i] = ".git"
		case "dot-smpatch":
			parts[i] = ".smpatch"
		}
	}
	return strings.Join(parts, "/")
}

func copyCase(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "case.toml" || d.IsDir() {
			return nil
		}
		out := filepath.Join(dst, filepath.FromSlash(caseName(filepath.ToSlash(rel))))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
}

// hashFiles hashes every regular file under base, not following symlinks
// and leaving out journal directories, the journal key and caches.
func hashFiles(t *testing.T, base string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (d.Name() == ".smpatch" || rel == "state" || rel == "cache" || rel == "home") {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Size() > 256<<20 {
			// A generated sparse file of gigabytes: its size and time.
			out[rel] = fmt.Sprintf("%d bytes, modified %s", fi.Size(), fi.ModTime())
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		out[rel] = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeSparseFatbin writes sparse-fatbin's ELF: headers, then .nv_fatbin,
// the last section, to the end of the file.
func writeSparseFatbin(path string, pad int64, entries int) error {
	le := binary.LittleEndian
	container := func(n int, arch uint32, flags uint64) []byte {
		c := make([]byte, 16+64*n)
		le.PutUint32(c[0:], 0xBA55ED50)
		le.PutUint16(c[4:], 1)
		le.PutUint16(c[6:], 16)
		le.PutUint64(c[8:], uint64(64*n))
		for i := range n {
			e := c[16+64*i:]
			le.PutUint16(e[0:], 2) // a cubin
			le.PutUint32(e[4:], 64)
			le.PutUint32(e[28:], arch)
			le.PutUint64(e[40:], flags)
		}
		return c
	}
	a, b := container(entries, 120, 0x11|1<<20), container(1, 90, 0x11)
	shstr := []byte("\x00.shstrtab\x00.nv_fatbin\x00")
	shoff := 64 + len(shstr)
	fat := shoff + 3*64
	h := make([]byte, fat)
	copy(h, "\x7fELF\x02\x01\x01")
	le.PutUint16(h[16:], 3)
	le.PutUint16(h[18:], 62)
	le.PutUint64(h[40:], uint64(shoff))
	le.PutUint16(h[52:], 64)
	le.PutUint16(h[58:], 64)
	le.PutUint16(h[60:], 3)
	le.PutUint16(h[62:], 1)
	copy(h[64:], shstr)
	s1, s2 := h[shoff+64:], h[shoff+128:]
	le.PutUint32(s1[0:], 1)
	le.PutUint32(s1[4:], 3)
	le.PutUint64(s1[24:], 64)
	le.PutUint64(s1[32:], uint64(len(shstr)))
	le.PutUint32(s2[0:], 11)
	le.PutUint32(s2[4:], 1)
	le.PutUint64(s2[24:], uint64(fat))
	le.PutUint64(s2[32:], uint64(len(a))+uint64(pad)+uint64(len(b)))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	f.Write(append(h, a...))
	f.WriteAt(b, int64(fat+len(a))+pad)
	return f.Close()
}
