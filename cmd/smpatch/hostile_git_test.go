package main

import (
	"bytes"
	"compress/flate"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild"
)

// Generators of the hostile corpus that build git repositories with
// go-git (a case cannot hold a .git directory of its own).
func init() {
	// git-checkout TREE TAG: commits every file of TREE into a new
	// repository there and tags the commit TAG, as a user's git would.
	hostileGenerators["git-checkout"] = func(path string, args []string) error {
		if len(args) != 1 {
			return errors.New("usage: git-checkout TREE TAG")
		}
		repo, err := git.PlainInit(path, false)
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
		sig := &object.Signature{Name: "Dev", Email: "dev@example.org", When: time.Unix(1767225600, 0)}
		h, err := wt.Commit("commit", &git.CommitOptions{Author: sig})
		if err != nil {
			return err
		}
		_, err = repo.CreateTag(args[0], h, nil)
		return err
	}
	// git-fifo TREE loose|pack: replaces the HEAD commit's loose object, or
	// (after a repack) the one pack, of TREE's repository by a named pipe.
	hostileGenerators["git-fifo"] = func(path string, args []string) error {
		repo, err := git.PlainOpen(path)
		if err != nil || len(args) != 1 {
			return fmt.Errorf("usage: git-fifo TREE loose|pack: %v", err)
		}
		head, err := repo.Head()
		if err != nil {
			return err
		}
		h := head.Hash().String()
		p := filepath.Join(path, ".git", "objects", h[:2], h[2:])
		switch args[0] {
		case "loose":
		case "pack":
			if err := repo.RepackObjects(&git.RepackConfig{}); err != nil {
				return err
			}
			packs, _ := filepath.Glob(filepath.Join(path, ".git", "objects", "pack", "*.pack"))
			if len(packs) != 1 {
				return fmt.Errorf("packs after a repack: %v", packs)
			}
			p = packs[0]
		default:
			return fmt.Errorf("git-fifo: %q is neither loose nor pack", args[0])
		}
		if err := os.Remove(p); err != nil {
			return err
		}
		return syscall.Mkfifo(p, 0o644)
	}
	// git-tag-tree TREE TAG: a lightweight tag TAG naming the tree of
	// TREE's HEAD commit, not the commit.
	hostileGenerators["git-tag-tree"] = func(path string, args []string) error {
		repo, err := git.PlainOpen(path)
		if err != nil || len(args) != 1 {
			return fmt.Errorf("usage: git-tag-tree TREE TAG: %v", err)
		}
		head, err := repo.Head()
		if err != nil {
			return err
		}
		c, err := repo.CommitObject(head.Hash())
		if err != nil {
			return err
		}
		return repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewTagReferenceName(args[0]), c.TreeHash))
	}
	// git-big-blob DIR TAG MIB: a bare upstream at DIR whose one commit,
	// tagged TAG, holds an sglang version file and MIB mebibytes of zeros
	// (a loose object of a few hundred kilobytes).
	hostileGenerators["git-big-blob"] = func(path string, args []string) error {
		if len(args) != 2 {
			return errors.New("usage: git-big-blob DIR TAG MIB")
		}
		mib, err := strconv.Atoi(args[1])
		if err != nil {
			return err
		}
		b, err := gitbuild.New(path)
		if err != nil {
			return err
		}
		h, err := writeZeroBlob(path, int64(mib)<<20)
		if err != nil {
			return err
		}
		b.Put("python/sglang/zeros.bin", h)
		if _, err := b.Commit("import", map[string][]byte{
			"python/sglang/__init__.py": {},
			"python/sglang/version.py":  []byte("__version__ = \"0.5.9\"\n"),
		}); err != nil {
			return err
		}
		return b.Tag(args[0], false)
	}
}

// writeZeroBlob writes a loose object of n zero bytes into the bare
// repository dir without compressing n bytes (which takes seconds under
// the race detector): its zlib stream is one deflate segment of the
// header and one of 1 MiB of zeros repeated, each ended by a sync flush,
// so that no back-reference crosses a segment.
func writeZeroBlob(dir string, n int64) (plumbing.Hash, error) {
	const chunk = 1 << 20
	if n%chunk != 0 {
		return plumbing.ZeroHash, fmt.Errorf("%d bytes: not whole mebibytes", n)
	}
	hdr := []byte(fmt.Sprintf("blob %d\x00", n))
	segment := func(data []byte) []byte {
		var buf bytes.Buffer
		w, _ := flate.NewWriter(&buf, flate.BestCompression)
		w.Write(data)
		w.Flush()
		return buf.Bytes()
	}
	zeros := make([]byte, chunk)
	head, body := segment(hdr), segment(zeros)
	var last bytes.Buffer
	w, _ := flate.NewWriter(&last, flate.BestCompression)
	w.Close() // the final, empty block

	sum := sha1.New()
	sum.Write(hdr)
	for i := int64(0); i < n/chunk; i++ {
		sum.Write(zeros)
	}
	h := plumbing.Hash(sum.Sum(nil))
	// Adler-32 over the header, then extended by n zero bytes: a zero
	// leaves the first sum as it is and adds it to the second.
	ad := adler32.Checksum(hdr)
	a, s2 := int64(ad&0xffff), int64(ad>>16)
	s2 = (s2 + n%65521*a) % 65521
	var out bytes.Buffer
	out.Write([]byte{0x78, 0xda})
	out.Write(head)
	for i := int64(0); i < n/chunk; i++ {
		out.Write(body)
	}
	out.Write(last.Bytes())
	out.Write(binary.BigEndian.AppendUint32(nil, uint32(s2<<16|a)))
	p := filepath.Join(dir, "objects", h.String()[:2], h.String()[2:])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return plumbing.ZeroHash, err
	}
	return h, os.WriteFile(p, out.Bytes(), 0o444)
}
