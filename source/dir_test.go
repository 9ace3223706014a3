package source

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/smpatch/smpatch/internal/testkit/treetest"
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
	if err := os.Symlink("srt", filepath.Join(root, "python", "sglang", "inside")); err != nil {
		t.Fatal(err)
	}
	// An absolute symlink counts as leading outside, wherever it points.
	if err := os.Symlink(filepath.Join(root, "python", "sglang", "srt"), filepath.Join(root, "python", "sglang", "abs")); err != nil {
		t.Fatal(err)
	}
	tr, err := OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"../x", "python/../../x", "/etc/passwd", "python/sglang/link/secret.py", "python/sglang/link/new.py", "python/sglang/abs/layers/comm.py", "", "a\\b"} {
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
	pt := tr
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
	if b, _ := tr.ReadFile(rels[0]); string(b) != "x = 1\n" {
		t.Fatalf("changed before Commit: %q", b)
	}
	temps := 0
	for _, f := range listAll() {
		if IsTempOf(filepath.Base(f), "comm.py") || IsTempOf(filepath.Base(f), "mod.py") {
			temps++
		}
	}
	if temps != 2 {
		t.Fatalf("%d temporary files, want 2: %v", temps, listAll())
	}
	// The new directory's entry is synced in its parent.
	dirs := strings.Join(pw.dirs, ",")
	for _, d := range []string{"python/sglang/srt", "python/sglang/srt/layers", "python/sglang/srt/new"} {
		if !strings.Contains(dirs+",", d+",") {
			t.Errorf("dirs %s lacks %s", dirs, d)
		}
	}
	pw.Close()
	if got := strings.Join(listAll(), ","); got != before {
		t.Fatalf("after Close:\n%s\nwant\n%s", got, before)
	}

	pw, err = pt.PrepareWrites(rels, files)
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
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

// No write lands in .git or the journal directory: not by its name, not
// through a symlink of the tree, not even into a directory still to be
// made below one. Nothing is written when one path of a set is refused.
func TestWritesNeverLandInReserved(t *testing.T) {
	root := treetest.SGLangCheckout(t, "0.5.6")
	treetest.Write(t, root, map[string]string{".git/config": "[core]\n", ".smpatch/state.json": "{}"})
	for link, to := range map[string]string{"python/sglang/evil": "../../.git", "python/sglang/journal": "../../.smpatch"} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{
		".git/config":                      "inside .git",
		"python/.GIT./x":                   "inside .git",
		"python/sglang/.smpatch/x":         "inside .smpatch",
		"python/sglang/evil/config":        "leads into .git",
		"python/sglang/evil/hooks/new/x":   "leads into .git",
		"python/sglang/journal/state.json": "leads into .smpatch",
	} {
		err := tr.WriteFiles(map[string][]byte{"python/sglang/srt/layers/comm.py": []byte("y\n"), rel: []byte("x\n")})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("WriteFiles(%q): %v, want %q", rel, err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, ".git/config")); string(b) != "[core]\n" {
		t.Fatalf(".git/config: %q", b)
	}
	if b, _ := tr.ReadFile("python/sglang/srt/layers/comm.py"); string(b) != "x = 1\n" {
		t.Fatalf("comm.py written beside a refused path: %q", b)
	}
	if _, err := os.Stat(filepath.Join(root, ".git/hooks")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a directory was made in .git: %v", err)
	}
}

// Writing keeps no temporary file anywhere, and a refused read-only file
// changes nothing.
func TestWriteFilesReadOnly(t *testing.T) {
	root := treetest.SGLangCheckout(t, "0.5.6")
	p := filepath.Join(root, "python/sglang/srt/layers/comm.py")
	if err := os.Chmod(p, 0o444); err != nil {
		t.Fatal(err)
	}
	tr, _ := OpenCheckout(root)
	err := tr.WriteFiles(map[string][]byte{"python/sglang/srt/layers/comm.py": []byte("y\n")})
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("read-only file: %v", err)
	}
	if err := tr.CheckWrites([]string{"python/sglang/srt/layers/comm.py"}); err == nil {
		t.Fatal("CheckWrites passed a read-only file")
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// A file whose name is as long as a name may be (255 bytes) is written
// like any other: the temporary name beside it does not grow with it (one
// that did failed with "file name too long"). Modes are kept, a new file
// gets 0644 whatever the umask, and nothing else is left beside it.
func TestWriteLongName(t *testing.T) {
	root := treetest.SGLangCheckout(t, "0.5.6")
	tr, err := OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	long := "python/sglang/srt/" + strings.Repeat("n", 252) + ".py"
	if len(filepath.Base(long)) != 255 {
		t.Fatal(len(filepath.Base(long)))
	}
	if err := tr.WriteFiles(map[string][]byte{long: []byte("a\n")}); err != nil {
		t.Fatalf("create: %v", err)
	}
	p := filepath.Join(root, filepath.FromSlash(long))
	os.Chmod(p, 0o640)
	if err := tr.WriteFiles(map[string][]byte{long: []byte("b\n")}); err != nil {
		t.Fatalf("replace: %v", err)
	}
	st, err := os.Stat(p)
	if b, _ := os.ReadFile(p); err != nil || string(b) != "b\n" || st.Mode().Perm() != 0o640 {
		t.Fatalf("%q %v", b, st.Mode())
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("left %s", e.Name())
		}
	}
	if n := TempName(filepath.Base(long)); len(n) != 38 || !IsTempOf(n, filepath.Base(long)) || IsTempOf(n, "other.py") {
		t.Fatalf("temp name %q", n)
	}
}
