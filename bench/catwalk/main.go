package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing/fstest"
	"time"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
	"github.com/smpatch/smpatch/upstream"
)

func main() {
	gitDir := flag.String("git", "", "bare repository (or .git directory) of sglang")
	from := flag.String("from", "", "first revision of the range (exclusive)")
	to := flag.String("to", "", "last revision of the range")
	set := flag.String("patches", "all", "which patches: all, one (the first of -one), copies:N (N copies of -one), each (one walk per patch of the catalog)")
	one := flag.String("one", "sm120-fusion", "the patch of 'one' and 'copies:N'")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "catwalk:", err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *gitDir == "" || *from == "" || *to == "" {
		fmt.Fprintln(os.Stderr, "catwalk: -git, -from and -to are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *gitDir, *from, *to, *set, *one); err != nil {
		fmt.Fprintln(os.Stderr, "catwalk:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, gitDir, from, to, set, one string) error {
	cat, err := catalog.New(catalog.Builtin(), nil)
	if err != nil {
		return err
	}
	var walks [][]*patches.Patch
	switch {
	case set == "all":
		walks = append(walks, cat.ForProject(source.SGLang))
	case set == "each":
		for _, p := range cat.ForProject(source.SGLang) {
			walks = append(walks, []*patches.Patch{p})
		}
	case set == "one":
		p, err := cat.Get(one)
		if err != nil {
			return err
		}
		walks = append(walks, []*patches.Patch{p})
	case strings.HasPrefix(set, "copies:"):
		n, err := strconv.Atoi(strings.TrimPrefix(set, "copies:"))
		if err != nil || n < 1 {
			return fmt.Errorf("-patches %s: want copies:N, N >= 1", set)
		}
		ps, err := copies(one, n)
		if err != nil {
			return err
		}
		walks = append(walks, ps)
	default:
		return fmt.Errorf("-patches %q: want all, one, each or copies:N", set)
	}
	// gitrepo.Open reads a checkout: a directory whose .git file names
	// the repository (a bare mirror may have no config of its own).
	dir, err := os.MkdirTemp("", "catwalk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(dir+"/.git", []byte("gitdir: "+gitDir+"\n"), 0o644); err != nil {
		return err
	}
	repo, err := gitrepo.Open(dir)
	if err != nil {
		return err
	}
	var hs [2][20]byte
	for i, rev := range []string{from, to} {
		h, err := gitrepo.ResolveRevision(repo, rev)
		if err != nil {
			return err
		}
		hs[i] = h
	}
	start := time.Now()
	planned, npatch := 0, 0
	var commits int
	for _, ps := range walks {
		rs, err := upstream.Range(ctx, repo, gitDir, source.SGLang, hs[0], hs[1], [2]string{from, to}, ps, upstream.Options{})
		if err != nil {
			return err
		}
		for _, r := range rs {
			planned += r.Range.Planned
			commits = r.Range.Commits
			npatch++
		}
	}
	fmt.Printf("%-9s %d walk(s), %2d patch(es), %d commits, %5d states planned, %6.2f s\n", set+":", len(walks), npatch, commits, planned, time.Since(start).Seconds())
	return nil
}

var nameRe = regexp.MustCompile(`(?m)^name = "[^"]*"`)

// copies loads n copies of the built-in patch one, named one-c1 ... one-cN,
// each parsed from its own file (as n distinct patches of the same shape).
func copies(one string, n int) ([]*patches.Patch, error) {
	src := catalog.Builtin()
	data, err := fs.ReadFile(src, one+".toml")
	if err != nil {
		return nil, err
	}
	m := fstest.MapFS{}
	err = fs.WalkDir(src, one, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("%s-c%d", one, i)
		loc := nameRe.FindIndex(data)
		b := append(append(append([]byte(nil), data[:loc[0]]...), `name = "`+name+`"`...), data[loc[1]:]...)
		m[name+".toml"] = &fstest.MapFile{Data: b}
	}
	return catalog.LoadFS(m, "copies", "copies")
}
