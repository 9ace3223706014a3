// Command compatgen writes the compatibility table
// (upstream/compat/compat.json) and docs/compatibility.md from sglang's and
// flashinfer's histories; make coverage runs it (scripts/compat.sh).
//
//	go run ./scripts/compatgen -sglang DIR -flashinfer DIR [-sglang-main DIR -main-branch main] \
//	    -json upstream/compat/compat.json -md docs/compatibility.md
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5"

	"github.com/smpatch/smpatch/source/gitrepo"
	"github.com/smpatch/smpatch/upstream"
)

func main() {
	var (
		sglang      = flag.String("sglang", "", "git directory (or checkout) of sglang with its release tags")
		sglangMain  = flag.String("sglang-main", "", "git directory holding sglang's main branch (default: -sglang)")
		mainBranch  = flag.String("main-branch", "main", "the branch read as sglang's main (\"\": none)")
		flashinfer  = flag.String("flashinfer", "", "git directory (or checkout) of flashinfer with its release tags")
		fiBranch    = flag.String("flashinfer-branch", "main", "the branch read as flashinfer's main (\"\": none)")
		sgFirst     = flag.String("sglang-first", "0.5.8", "the oldest sglang release read")
		fiFirst     = flag.String("flashinfer-first", "0.6.0rc1", "the oldest flashinfer release read")
		since       = flag.String("since", "2026-01-01", "read main's pin changes from this date (\"\": not)")
		jsonOut     = flag.String("json", "", "write the table here")
		mdOut       = flag.String("md", "", "write docs/compatibility.md here")
		unreachable = flag.String("unreachable", "", "releases known upstream that these histories do not have, for the freshness line")
	)
	flag.Parse()
	if *sglang == "" || *flashinfer == "" {
		fmt.Fprintln(os.Stderr, "compatgen: -sglang and -flashinfer are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *sglang, *sglangMain, *mainBranch, *flashinfer, *fiBranch, *sgFirst, *fiFirst, *since, *jsonOut, *mdOut, *unreachable); err != nil {
		fmt.Fprintln(os.Stderr, "compatgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, sglang, sglangMain, mainBranch, flashinfer, fiBranch, sgFirst, fiFirst, since, jsonOut, mdOut, unreachable string) error {
	src := upstream.CompatSources{MainBranch: mainBranch, FlashInferBranch: fiBranch, SGLangFirst: sgFirst, FlashInferFirst: fiFirst, Progress: os.Stderr}
	var err error
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	open := func(dir string) (*git.Repository, error) {
		r, c, err := openRepo(dir)
		if c != nil {
			closers = append(closers, c)
		}
		return r, err
	}
	if src.SGLang, err = open(sglang); err != nil {
		return err
	}
	if sglangMain != "" {
		if src.SGLangMain, err = open(sglangMain); err != nil {
			return err
		}
	}
	if src.FlashInfer, err = open(flashinfer); err != nil {
		return err
	}
	if since != "" {
		if src.Since, err = time.Parse(time.DateOnly, since); err != nil {
			return fmt.Errorf("-since: %w", err)
		}
	}
	t, err := upstream.GenerateCompat(ctx, src)
	if err != nil {
		return err
	}
	if jsonOut != "" {
		data, err := t.Marshal()
		if err != nil {
			return err
		}
		if err := writeFile(jsonOut, data); err != nil {
			return err
		}
	}
	if mdOut != "" {
		if err := writeFile(mdOut, upstream.CompatMarkdown(t, unreachable)); err != nil {
			return err
		}
	}
	return nil
}

// openRepo opens the git repository at dir (a checkout, its .git, or a bare
// repository) for reading, its objects read straight from the packs.
func openRepo(dir string) (*git.Repository, func() error, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	// gitrepo.Open reads a checkout: a directory whose .git names the
	// repository, which works for a bare one without a config too.
	tmp, err := os.MkdirTemp("", "compatgen-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	gitDir := abs
	if st, err := os.Stat(filepath.Join(abs, ".git")); err == nil && st.IsDir() {
		gitDir = filepath.Join(abs, ".git")
	}
	if err := os.WriteFile(filepath.Join(tmp, ".git"), []byte("gitdir: "+gitDir+"\n"), 0o644); err != nil {
		return nil, nil, err
	}
	repo, err := gitrepo.Open(tmp)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	cache := gitrepo.NewRevisionCache(64 << 20)
	if shared := cache.ReadPacks(repo); shared != nil {
		return shared, cache.Close, nil
	}
	return repo, cache.Close, nil
}

// writeFile writes data to name through a temporary file beside it.
func writeFile(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
