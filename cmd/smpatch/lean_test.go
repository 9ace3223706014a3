package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/internal/cli"
	"github.com/smpatch/smpatch/internal/cli/full"
)

// notLinked are the packages smpatch must not link (exact import path, or
// a prefix ending in "/"): every package's init runs at start-up, and
// these are what smpatch-full is for. Prefixes name whole trees.
var notLinked = []string{
	// go-git, all of it: a checkout's version tag is read by smpatch-full
	// (its object store and object decoding bring a config reader, gob and
	// OpenPGP code; its Repository API, every transport and net/http).
	"github.com/go-git/",
	"github.com/ProtonMail/",
	"net/http",
	"net/http/",
	"k8s.io/",
	"sigs.k8s.io/",
	"github.com/google/go-containerregistry/",
	"gonum.org/",
	"github.com/smpatch/smpatch/launch",
	"github.com/smpatch/smpatch/launch/",
	"github.com/smpatch/smpatch/matrix",
	"github.com/smpatch/smpatch/matrix/",
	"github.com/smpatch/smpatch/image",
	"github.com/smpatch/smpatch/image/",
	"github.com/smpatch/smpatch/upstream",
	"github.com/smpatch/smpatch/upstream/",
	"github.com/smpatch/smpatch/source/gitrepo",
	"github.com/smpatch/smpatch/internal/cli/full",
}

func forbidden(pkg string) bool {
	for _, f := range notLinked {
		if pkg == f || strings.HasSuffix(f, "/") && strings.HasPrefix(pkg, f) {
			return true
		}
	}
	return false
}

// importGraph is `go list -deps` of pkg: each package's imports.
func importGraph(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.Bytes())
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		g[f[0]] = f[1:]
	}
	return g
}

// chain is the shortest import path from root to pkg.
func chain(g map[string][]string, root, pkg string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == pkg {
			var out []string
			for ; p != ""; p = prev[p] {
				out = append(out, p)
			}
			slices.Reverse(out)
			return out
		}
		for _, q := range g[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

// TestLeanLinksNoHeavyPackage: smpatch links none of notLinked, so its
// start-up runs none of their package inits (Kubernetes' scheme, the
// registry client, go-git's transports, the plot fonts). A failure names
// the package and the chain of imports that brings it in.
func TestLeanLinksNoHeavyPackage(t *testing.T) {
	const root = "github.com/smpatch/smpatch/cmd/smpatch"
	g := importGraph(t, root)
	if len(g) < 10 || g["github.com/smpatch/smpatch/internal/cli"] == nil {
		t.Fatalf("go list -deps %s gave %d packages, without internal/cli", root, len(g))
	}
	var bad []string
	for p := range g {
		if forbidden(p) {
			bad = append(bad, p)
		}
	}
	slices.Sort(bad)
	for _, p := range bad {
		t.Errorf("smpatch links %s: %s", p, strings.Join(chain(g, root, p), " -> "))
	}
	// The rule itself bites: smpatch-full links what smpatch must not.
	gf := importGraph(t, "github.com/smpatch/smpatch/cmd/smpatch-full")
	for _, want := range []string{"github.com/go-git/go-git/v5", "github.com/go-git/go-git/v5/storage/filesystem", "net/http", "k8s.io/api/batch/v1", "github.com/smpatch/smpatch/launch"} {
		if _, ok := gf[want]; !ok || !forbidden(want) {
			t.Errorf("smpatch-full does not link %s, or the rule misses it", want)
		}
	}
}

// TestLeanHelpListsEveryCommand: smpatch --help lists the commands of
// smpatch-full, each with the same line of help, and the ones it hands
// over are exactly cli.Delegated.
func TestLeanHelpListsEveryCommand(t *testing.T) {
	list := func(p cli.Program) map[string]string {
		var out, errb bytes.Buffer
		if code := p.Run([]string{"--help"}, &out, &errb); code != 0 {
			t.Fatalf("%s --help: exit %d: %s", p.Name, code, errb.String())
		}
		m := map[string]string{}
		in := false
		for _, l := range strings.Split(out.String(), "\n") {
			switch {
			case strings.HasPrefix(l, "Available Commands:"):
				in = true
			case in && strings.HasPrefix(l, "  "):
				name, short, _ := strings.Cut(strings.TrimSpace(l), " ")
				m[name] = strings.TrimSpace(short)
			case in:
				in = false
			}
		}
		return m
	}
	lean := list(cli.Lean)
	fp := full.Program()
	fp.Name = "smpatch"
	all := list(fp)
	if len(all) < 10 {
		t.Fatalf("smpatch-full --help lists %d commands: %v", len(all), all)
	}
	for name, short := range all {
		if lean[name] != short {
			t.Errorf("smpatch --help: %s %q, smpatch-full: %q", name, lean[name], short)
		}
	}
	for name := range lean {
		if _, ok := all[name]; !ok {
			t.Errorf("smpatch --help lists %s, smpatch-full does not", name)
		}
	}
	root := fp.NewRoot(&cli.Globals{}, &bytes.Buffer{}, &bytes.Buffer{})
	for _, d := range cli.Delegated {
		if c, _, err := root.Find([]string{d.Name}); err != nil || c.Name() != d.Name || c.Annotations["smpatch-full"] != "" {
			t.Errorf("smpatch-full has no command %s of its own", d.Name)
		}
	}
}

// linkBinary puts this test binary at dir/name (a hard link, else a copy):
// run under a registered name, it is that program.
func linkBinary(t *testing.T, dir, name string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	if err := os.Link(self, dst); err == nil {
		return dst
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// runBinary runs path with args and PATH, and returns its exit code and
// standard error.
func runBinary(t *testing.T, path, pathEnv string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "PATH="+pathEnv, "GORACE=atexit_sleep_ms=0", "XDG_CONFIG_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	case err != nil:
		t.Fatalf("%s: %v", path, err)
	}
	return 0, stderr.String()
}

// TestHandOverFindsCompanion: smpatch finds smpatch-full beside its own
// executable (through links, "-full" after the smpatch prefix, as the
// static builds are named), else on PATH; missing, one line names both
// places and how to install it, exit 1.
func TestHandOverFindsCompanion(t *testing.T) {
	// `matrix nosuch` is a usage error only smpatch-full can judge: exit 2
	// and its message, under smpatch's name, prove it ran.
	const want = `smpatch: unknown command "nosuch" for "smpatch matrix"`
	static := t.TempDir()
	lean := linkBinary(t, static, "smpatch-linux-amd64")
	linkBinary(t, static, "smpatch-full-linux-amd64")
	if code, errs := runBinary(t, lean, "", "matrix", "nosuch"); code != 2 || !strings.Contains(errs, want) {
		t.Errorf("beside, static names: exit %d, stderr %q", code, errs)
	}
	links := t.TempDir()
	if err := os.Symlink(lean, filepath.Join(links, "smpatch")); err != nil {
		t.Fatal(err)
	}
	if code, errs := runBinary(t, filepath.Join(links, "smpatch"), "", "matrix", "nosuch"); code != 2 || !strings.Contains(errs, want) {
		t.Errorf("through a link: exit %d, stderr %q", code, errs)
	}

	alone := t.TempDir()
	lonely := linkBinary(t, alone, "smpatch")
	onPath := t.TempDir()
	linkBinary(t, onPath, "smpatch-full")
	if code, errs := runBinary(t, lonely, onPath, "--catalog", alone, "matrix", "nosuch"); code != 2 || !strings.Contains(errs, want) {
		t.Errorf("on PATH: exit %d, stderr %q", code, errs)
	}

	for _, args := range [][]string{{"matrix", "expand", "m.toml"}, {"probe", "--image", "oci:x"}, {"help", "check"}} {
		code, errs := runBinary(t, lonely, alone, args...)
		what := args[0]
		if what == "help" {
			what = args[1]
		}
		if args[0] == "probe" {
			what = "probe --image"
		}
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		if code != 1 || len(lines) != 1 || !strings.HasPrefix(errs, "smpatch: "+what+" is run by smpatch-full, and there is no ") ||
			!strings.Contains(errs, filepath.Join(alone, "smpatch-full")) || !strings.Contains(errs, "smpatch-full on PATH") || !strings.Contains(errs, "make install") {
			t.Errorf("%v without smpatch-full: exit %d, stderr %q", args, code, errs)
		}
	}
	// smpatch installed under smpatch-full's name is refused, not run
	// again and again.
	loop := t.TempDir()
	looping := linkBinary(t, loop, "smpatch-loop")
	linkBinary(t, loop, "smpatch-full-loop")
	if code, errs := runBinary(t, looping, "", "matrix", "nosuch"); code != 1 || !strings.Contains(errs, "started as smpatch-full, is smpatch") {
		t.Errorf("smpatch as smpatch-full: exit %d, stderr %q", code, errs)
	}

	// What smpatch runs itself needs no companion.
	if code, errs := runBinary(t, lonely, alone, "version"); code != 0 {
		t.Errorf("version without smpatch-full: exit %d, %s", code, errs)
	}
}

func TestFullName(t *testing.T) {
	for in, want := range map[string]string{
		"smpatch":             "smpatch-full",
		"smpatch-linux-amd64": "smpatch-full-linux-amd64",
		"smpatch.exe":         "smpatch-full.exe",
		"sm":                  "",
		"my-smpatch":          "",
	} {
		if got := cli.FullName(in); got != want {
			t.Errorf("FullName(%q) = %q, want %q", in, got, want)
		}
	}
}
