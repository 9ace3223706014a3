// Command hand-edit makes a git checkout to try `smpatch new` on: the
// bundled sample sglang tree committed and tagged v0.5.17 (go-git), then
// the two-line edit of the fused all-reduce gate that a person would make
// by hand in python/sglang/srt/layers/communicator.py.
//
// usage: go run ./examples/hand-edit [-sample DIR] DIR
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

func main() {
	sample := flag.String("sample", "examples/sample/sglang", "the tree to commit")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: go run ./examples/hand-edit [-sample DIR] DIR")
		os.Exit(2)
	}
	if err := run(*sample, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "hand-edit:", err)
		os.Exit(1)
	}
}

func run(sample, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists: give a new directory", dir)
	}
	err := filepath.WalkDir(sample, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(sample, p)
		if d.IsDir() {
			if d.Name() == ".smpatch" || d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		return err
	}
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		return err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return err
	}
	sig := &object.Signature{Name: "Sample", Email: "sample@example.org", When: time.Unix(1767225600, 0)}
	h, err := wt.Commit("sample sglang tree", &git.CommitOptions{Author: sig})
	if err != nil {
		return err
	}
	if _, err := repo.CreateTag("v0.5.17", h, nil); err != nil {
		return err
	}
	// The hand edit: a flag for SM12x, and the gate that admits it.
	f := filepath.Join(dir, "python", "sglang", "srt", "layers", "communicator.py")
	b, err := os.ReadFile(f)
	if err != nil {
		return err
	}
	for _, r := range [][2]string{
		{"_is_sm100_supported = _is_cuda and is_sm100_supported()\n", "_is_sm100_supported = _is_cuda and is_sm100_supported()\n_is_sm120_supported = _is_cuda and torch.cuda.get_device_capability()[0] == 12\n"},
		{"(_is_sm90_supported or _is_sm100_supported)\n", "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)\n"},
	} {
		if !bytes.Contains(b, []byte(r[0])) {
			return fmt.Errorf("%s: %q not found", f, r[0])
		}
		b = bytes.Replace(b, []byte(r[0]), []byte(r[1]), 1)
	}
	if err := os.WriteFile(f, b, 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: sample sglang committed as v0.5.17, with a two-line hand edit of %s\n", dir, "python/sglang/srt/layers/communicator.py")
	return nil
}
