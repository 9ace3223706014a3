package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/smpatch/smpatch/internal/treetest"
)

func TestOpenCheckoutDetect(t *testing.T) {
	ctx := context.Background()
	root := treetest.SGLangCheckout(t, "0.5.6.post2")
	tr, err := OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Project() != SGLang || tr.Kind() != KindCheckout {
		t.Fatalf("project %s kind %s", tr.Project(), tr.Kind())
	}
	v, from, err := tr.Version(ctx)
	if err != nil || v == nil || VersionString(v) != "0.5.6.post2" || from != "python/sglang/version.py:1" {
		t.Fatalf("version %v from %q err %v", v, from, err)
	}
	fi := t.TempDir()
	treetest.Write(t, fi, map[string]string{"flashinfer/__init__.py": "", "include/flashinfer/comm/x.cuh": ""})
	if tr, err := OpenCheckout(fi); err != nil || tr.Project() != FlashInfer {
		t.Fatalf("flashinfer: %v %v", tr, err)
	}
	if _, err := OpenCheckout(t.TempDir()); !errors.Is(err, ErrUnknownProject) {
		t.Fatalf("empty dir: %v", err)
	}
}

func TestPathsConfined(t *testing.T) {
	root := treetest.SGLangCheckout(t, "0.5.6")
	outside := t.TempDir()
	treetest.Write(t, outside, map[string]string{"secret.py": "s\n"})
	if err := os.Symlink(outside, filepath.Join(root, "python", "sglang", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "python", "sglang", "srt"), filepath.Join(root, "python", "sglang", "inside")); err != nil {
		t.Fatal(err)
	}
	tr, err := OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"../x", "python/../../x", "/etc/passwd", "python/sglang/link/secret.py", "python/sglang/link/new.py", "", "a\\b"} {
		if _, err := tr.ReadFile(rel); err == nil || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadFile(%q): %v, want a confinement error", rel, err)
		}
		if err := tr.WriteFiles(map[string][]byte{rel: []byte("x")}); err == nil {
			t.Errorf("WriteFiles(%q) succeeded", rel)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret.py")); err != nil || string(b) != "s\n" {
		t.Fatal("file outside the tree changed")
	}
	if _, err := tr.ReadFile("python/sglang/inside/layers/comm.py"); err != nil {
		t.Errorf("symlink inside the tree: %v", err)
	}
	if _, err := tr.ReadFile("python/sglang/missing.py"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestWriteFilesKeepsMode(t *testing.T) {
	root := treetest.SGLangCheckout(t, "0.5.6")
	p := filepath.Join(root, "python/sglang/srt/layers/comm.py")
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	asRoot := os.Geteuid() == 0
	if asRoot {
		if err := os.Chown(p, 1234, 1234); err != nil {
			t.Fatal(err)
		}
	}
	tr, _ := OpenCheckout(root)
	if err := tr.WriteFiles(map[string][]byte{"python/sglang/srt/layers/comm.py": []byte("y = 2\n"), "python/sglang/srt/new/mod.py": []byte("z\n")}); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v", st.Mode())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); asRoot && ok && sys.Uid != 1234 {
		t.Fatalf("owner not kept: uid %d", sys.Uid)
	}
	if b, _ := tr.ReadFile("python/sglang/srt/new/mod.py"); string(b) != "z\n" {
		t.Fatal("new file not written")
	}
	if err := tr.WriteFiles(map[string][]byte{"python/sglang/srt/new/mod.py": nil}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.ReadFile("python/sglang/srt/new/mod.py"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("nil did not remove: %v", err)
	}
	files, err := tr.ListFiles("python/sglang/srt")
	if err != nil || strings.Join(files, ",") != "python/sglang/srt/layers/__init__.py,python/sglang/srt/layers/comm.py" {
		t.Fatalf("ListFiles: %v %v", files, err)
	}
}

func TestPackagePaths(t *testing.T) {
	for _, tt := range []struct {
		p         Project
		repo, pkg string
		ok        bool
	}{
		{SGLang, "python/sglang/srt/layers/communicator.py", "sglang/srt/layers/communicator.py", true},
		{SGLang, "python/sglang", "sglang", true},
		{SGLang, "setup.py", "", false},
		{SGLang, "python/sglang_router/x.py", "", false},
		{FlashInfer, "flashinfer/jit/comm.py", "flashinfer/jit/comm.py", true},
		{FlashInfer, "include/flashinfer/comm/trtllm_allreduce.cuh", "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh", true},
		{FlashInfer, "csrc/trtllm_allreduce.cu", "flashinfer/data/csrc/trtllm_allreduce.cu", true},
		{FlashInfer, "setup.py", "", false},
	} {
		got, ok := RepoToPackagePath(tt.p, tt.repo)
		if got != tt.pkg || ok != tt.ok {
			t.Errorf("RepoToPackagePath(%s, %q) = %q, %v", tt.p, tt.repo, got, ok)
		}
		if ok {
			back, ok := PackageToRepoPath(tt.p, got)
			if !ok || back != tt.repo {
				t.Errorf("PackageToRepoPath(%s, %q) = %q, %v", tt.p, got, back, ok)
			}
		}
	}
}

// An installed sglang: site-packages/sglang/... and its dist-info, as pip
// lays out a wheel of a setuptools-scm release (no version literal).
func TestOpenSitePackages(t *testing.T) {
	ctx := context.Background()
	sp := filepath.Join(t.TempDir(), "lib", "python3.12", "site-packages")
	treetest.Write(t, sp, map[string]string{
		"sglang/__init__.py":              "",
		"sglang/srt/layers/comm.py":       "x = 1\n",
		"sglang-0.5.9.dist-info/METADATA": "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.9\n",
		"other/__init__.py":               "",
	})
	tr, err := OpenSitePackages(sp, SGLang)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := tr.ReadFile("python/sglang/srt/layers/comm.py"); err != nil || string(b) != "x = 1\n" {
		t.Fatalf("ReadFile: %q %v", b, err)
	}
	if _, err := tr.ReadFile("other/__init__.py"); err == nil {
		t.Fatal("read a file outside the package")
	}
	files, err := tr.ListFiles("")
	if err != nil || strings.Join(files, ",") != "python/sglang/__init__.py,python/sglang/srt/layers/comm.py" {
		t.Fatalf("ListFiles: %v %v", files, err)
	}
	v, from, err := tr.Version(ctx)
	if err != nil || v == nil || VersionString(v) != "0.5.9" || !strings.Contains(from, "METADATA") {
		t.Fatalf("version %v %q %v", v, from, err)
	}
	if _, err := OpenSitePackages(sp, FlashInfer); err == nil {
		t.Fatal("flashinfer is not installed there")
	}
	// Resolve with an explicit site-packages dir.
	rt, err := Resolve(ctx, sp, SGLang, "")
	if err != nil || rt.Kind() != KindSitePackages {
		t.Fatalf("Resolve: %v %v", rt, err)
	}
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	root := treetest.SGLangCheckout(t, "0.5.6")
	t.Setenv("SMPATCH_REPO", root)
	tr, err := Resolve(ctx, "", SGLang, "")
	if err != nil || tr.Root() == "" {
		t.Fatalf("SMPATCH_REPO: %v", err)
	}
	if _, err := Resolve(ctx, "", FlashInfer, ""); err == nil || !strings.Contains(err.Error(), "checkout of sglang, not flashinfer") {
		t.Fatalf("wrong project: %v", err)
	}
	t.Setenv("SMPATCH_REPO", "")
	// The current directory (a subdirectory of a checkout).
	t.Chdir(filepath.Join(root, "python", "sglang", "srt"))
	tr, err = Resolve(ctx, "", SGLang, "")
	if err != nil || tr.Kind() != KindCheckout {
		t.Fatalf("cwd: %v", err)
	}
	// The installed package, found by asking a (fake) interpreter for sys.path.
	sp := filepath.Join(t.TempDir(), "lib", "python3.12", "site-packages")
	treetest.Write(t, sp, map[string]string{
		"sglang/__init__.py":              "",
		"sglang-0.5.9.dist-info/METADATA": "Name: sglang\nVersion: 0.5.9\n",
	})
	py := filepath.Join(t.TempDir(), "python3")
	script := "#!/bin/sh\necho '[\"" + sp + "\"]'\n"
	if err := os.WriteFile(py, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	tr, err = Resolve(ctx, "", SGLang, py)
	if err != nil {
		t.Fatalf("installed: %v", err)
	}
	if tr.Kind() != KindSitePackages {
		t.Fatalf("kind %s", tr.Kind())
	}
}

// PendingWrites leaves the tree as it was until Commit, and Cleanup takes
// the temporary files away again.
func TestPendingWrites(t *testing.T) {
	root := treetest.SGLangCheckout(t, "0.5.6")
	tr, err := OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	pt := tr.(interface {
		PrepareWrites([]string, map[string][]byte) (*PendingWrites, error)
	})
	rels := []string{"python/sglang/srt/layers/comm.py", "python/sglang/srt/layers/__init__.py", "python/sglang/srt/new/mod.py"}
	files := map[string][]byte{rels[0]: []byte("y = 2\n"), rels[1]: nil, rels[2]: []byte("z\n")}
	listAll := func() []string {
		var out []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil {
				r, _ := filepath.Rel(root, p)
				out = append(out, filepath.ToSlash(r))
			}
			return nil
		})
		return out
	}
	before := strings.Join(listAll(), ",")

	pw, err := pt.PrepareWrites(rels, files)
	if err != nil {
		t.Fatal(err)
	}
	if err := pw.SyncTemps(nil, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := tr.ReadFile(rels[0]); string(b) != "x = 1\n" {
		t.Fatalf("changed before Commit: %q", b)
	}
	temps := 0
	for _, f := range listAll() {
		if strings.HasPrefix(filepath.Base(f), ".comm.py") || strings.HasPrefix(filepath.Base(f), ".mod.py") {
			temps++
		}
	}
	if temps != 2 {
		t.Fatalf("%d temporary files, want 2: %v", temps, listAll())
	}
	// The new directory's entry is synced in its parent.
	dirs := strings.Join(pw.Dirs(), ",")
	for _, d := range []string{"python/sglang/srt", "python/sglang/srt/layers", "python/sglang/srt/new"} {
		if !strings.Contains(dirs+",", filepath.Join(root, d)+",") {
			t.Errorf("Dirs %s lacks %s", dirs, d)
		}
	}
	pw.Cleanup()
	if got := strings.Join(listAll(), ","); got != before {
		t.Fatalf("after Cleanup:\n%s\nwant\n%s", got, before)
	}

	pw, err = pt.PrepareWrites(rels, files)
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Cleanup()
	if err := pw.SyncTemps(nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < pw.Len(); i++ {
		if err := pw.Commit(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := pw.SyncDirs(); err != nil {
		t.Fatal(err)
	}
	if b, _ := tr.ReadFile(rels[0]); string(b) != "y = 2\n" {
		t.Fatalf("comm.py: %q", b)
	}
	if _, err := tr.ReadFile(rels[1]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("__init__.py not removed: %v", err)
	}
	if b, _ := tr.ReadFile(rels[2]); string(b) != "z\n" {
		t.Fatalf("mod.py: %q", b)
	}
}

// ReadFile refuses what is not a regular file without waiting on it.
func TestReadFileNotRegular(t *testing.T) {
	root := treetest.SGLangCheckout(t, "0.5.6")
	if err := syscall.Mkfifo(filepath.Join(root, "python/sglang/fifo.py"), 0o644); err != nil {
		t.Skip(err)
	}
	tr, _ := OpenCheckout(root)
	// Opening a FIFO for reading would wait for a writer forever.
	if _, err := tr.ReadFile("python/sglang/fifo.py"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("fifo: %v", err)
	}
	if _, err := tr.ReadFile("python/sglang/srt"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
}

// The kernel's resolution (openat2 beneath the root, where there is one)
// and the check component by component give the same answer for every
// path: the same bytes, the same error text. ResolvedPath resolves as
// ResolveExisting does.
func TestOpenFileKernelAndPathCheckAgree(t *testing.T) {
	root := treetest.SGLangCheckout(t, "0.5.6")
	outside := t.TempDir()
	treetest.Write(t, outside, map[string]string{"secret.py": "s\n"})
	links := map[string]string{
		"python/sglang/abs-out":  outside,
		"python/sglang/abs-in":   filepath.Join(root, "python", "sglang", "srt"),
		"python/sglang/rel-in":   "srt/layers",
		"python/sglang/rel-out":  "../../../" + filepath.Base(outside),
		"python/sglang/dotdotin": "../sglang/srt",
		"python/sglang/file-in":  "srt/layers/comm.py",
		"python/sglang/dangling": "srt/nothing/here.py",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(outside, ".."), filepath.Join(root, "python", "up")); err != nil {
		t.Fatal(err)
	}
	tr, err := OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	rels := []string{
		"python/sglang/srt/layers/comm.py", "python/sglang/missing.py", "python/sglang/srt/none/x.py",
		"python/sglang/abs-out/secret.py", "python/sglang/abs-out/new.py",
		"python/sglang/abs-in/layers/comm.py", "python/sglang/abs-in/layers/new.py",
		"python/sglang/rel-in/comm.py", "python/sglang/rel-in/new.py",
		"python/sglang/rel-out/secret.py", "python/sglang/rel-out/new.py",
		"python/sglang/dotdotin/layers/comm.py", "python/sglang/file-in", "python/sglang/dangling",
		"python/up/x.py", "python/sglang/srt/layers/comm.py/x", "../x", "",
	}
	read := func() []string {
		var out []string
		for _, rel := range rels {
			b, err := tr.ReadFile(rel)
			out = append(out, fmt.Sprintf("%s: %q %v %v", rel, b, err, errors.Is(err, fs.ErrNotExist)))
		}
		return out
	}
	dt := tr.(*dirTree)
	for _, rel := range rels {
		abs, resolved, err := dt.ResolvedPath(rel)
		wantAbs, wantErr := dt.AbsPath(rel)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || abs != wantAbs {
			t.Errorf("ResolvedPath(%q) = %q, %v; AbsPath: %q, %v", rel, abs, err, wantAbs, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if want, _ := ResolveExisting(wantAbs); resolved != want {
			t.Errorf("ResolvedPath(%q) resolved %q, ResolveExisting %q", rel, resolved, want)
		}
		checkPathSeen(t, dt, rel)
	}
	for rel, exists := range map[string]bool{"python/sglang/srt/layers/comm.py": true, "python/sglang/missing.py": false} {
		if pc, _ := dt.CheckPath(rel); !pc.Seen || (pc.File != nil) != exists || pc.Dir == nil {
			t.Errorf("CheckPath(%q): seen %v file %v dir %v", rel, pc.Seen, pc.File, pc.Dir)
		}
	}
	kernel := read()
	dt.HoldRoot()
	held := read()
	dt.ReleaseRoot()
	for i := range rels {
		if kernel[i] != held[i] {
			t.Errorf("root opened each time: %s\nroot held:           %s", kernel[i], held[i])
		}
	}
	noOpenat2.Store(true)
	defer noOpenat2.Store(false)
	paths := read()
	for i := range rels {
		if kernel[i] != paths[i] {
			t.Errorf("kernel:     %s\npath check: %s", kernel[i], paths[i])
		}
	}
	for _, s := range paths {
		if strings.Contains(s, `"s\n"`) {
			t.Errorf("read outside the tree: %s", s)
		}
	}
}

// checkPathSeen: what CheckPath says it saw is what Lstat of the file and
// Stat of its directory say now, with no symlink on the way.
func checkPathSeen(t *testing.T, dt *dirTree, rel string) {
	t.Helper()
	pc, err := dt.CheckPath(rel)
	if err != nil || !pc.Seen {
		return
	}
	if pc.Resolved != pc.Abs {
		t.Errorf("CheckPath(%q): seen, but resolved %q differs from %q", rel, pc.Resolved, pc.Abs)
	}
	st, err := os.Lstat(pc.Abs)
	switch {
	case pc.File == nil && !errors.Is(err, fs.ErrNotExist):
		t.Errorf("CheckPath(%q): seen missing, Lstat: %v", rel, err)
	case pc.File != nil && (err != nil || !os.SameFile(st, pc.File) || st.Mode() != pc.File.Mode()):
		t.Errorf("CheckPath(%q): seen %v, Lstat: %v %v", rel, pc.File.Mode(), st, err)
	}
	dst, err := os.Stat(filepath.Dir(pc.Abs))
	if err != nil || !os.SameFile(dst, pc.Dir) || !pc.Dir.IsDir() {
		t.Errorf("CheckPath(%q): directory seen %v, Stat: %v %v", rel, pc.Dir, dst, err)
	}
}

// OpenRead's Stat is os.Lstat's answer for what it opened (O_NOFOLLOW),
// and it reads what os.ReadFile reads.
func TestOpenReadStat(t *testing.T) {
	dir := t.TempDir()
	treetest.Write(t, dir, map[string]string{"a.py": "abc\n"})
	if err := os.Chmod(filepath.Join(dir, "a.py"), 0o640|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	names := []string{"a.py", "."}
	if syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600) == nil {
		names = append(names, "fifo")
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		f, err := OpenRead(p, syscall.O_NONBLOCK|syscall.O_NOFOLLOW)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := os.Lstat(p)
		if got.Mode() != want.Mode() || got.Size() != want.Size() || !got.ModTime().Equal(want.ModTime()) || got.Name() != want.Name() || !sameInode(got, want) {
			t.Errorf("%s: %v %d %v %q, os.Lstat: %v %d %v %q", n, got.Mode(), got.Size(), got.ModTime(), got.Name(), want.Mode(), want.Size(), want.ModTime(), want.Name())
		}
		if got.Mode().IsRegular() {
			b, err := io.ReadAll(f)
			if string(b) != "abc\n" || err != nil {
				t.Errorf("read %q %v", b, err)
			}
		}
		if err := f.Close(); err != nil {
			t.Error(err)
		}
		if err := f.Close(); err == nil {
			t.Error("second Close: no error")
		}
	}
	if _, err := OpenRead(filepath.Join(dir, "none"), 0); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "none") {
		t.Errorf("missing: %v", err)
	}
	if err := os.Symlink("a.py", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRead(filepath.Join(dir, "link"), syscall.O_NOFOLLOW); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("symlink with O_NOFOLLOW: %v", err)
	}
}

func sameInode(a, b fs.FileInfo) bool {
	x, ok1 := a.Sys().(*syscall.Stat_t)
	y, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && x.Dev == y.Dev && x.Ino == y.Ino
}

// While held (HoldRoot), reads start from the root as it was opened; once
// released, from the root path again, so a tree kept by a long-lived
// caller follows a root replaced meanwhile. Reads racing holds and
// releases are safe (-race).
func TestHoldRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "tree")
	treetest.Write(t, root, map[string]string{"python/sglang/__init__.py": "", "python/sglang/v.py": "old\n"})
	tr, err := OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	dt := tr.(*dirTree)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				dt.HoldRoot()
				if b, err := tr.ReadFile("python/sglang/v.py"); string(b) != "old\n" || err != nil {
					t.Errorf("held: %q %v", b, err)
				}
				dt.ReleaseRoot()
				if b, err := tr.ReadFile("python/sglang/v.py"); string(b) != "old\n" || err != nil {
					t.Errorf("released: %q %v", b, err)
				}
			}
		}()
	}
	wg.Wait()
	dt.HoldRoot()
	if err := os.Rename(root, filepath.Join(base, "old")); err != nil {
		t.Fatal(err)
	}
	treetest.Write(t, root, map[string]string{"python/sglang/__init__.py": "", "python/sglang/v.py": "new\n"})
	want := "old\n"
	if noOpenat2.Load() {
		want = "new\n" // no descriptor is held without openat2
	}
	if b, _ := tr.ReadFile("python/sglang/v.py"); string(b) != want {
		t.Errorf("held across a replaced root: %q, want %q", b, want)
	}
	dt.ReleaseRoot()
	dt.ReleaseRoot() // one too many: nothing happens
	if b, _ := tr.ReadFile("python/sglang/v.py"); string(b) != "new\n" {
		t.Errorf("released, the root path replaced: read %q", b)
	}
}
