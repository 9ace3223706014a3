package gitrepo

import (
	"bufio"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/storage/filesystem"
)

// A fetched pack is read entry by entry as it arrives, before go-git's
// pack writer sees it: go-git inflates every object of a new pack whole
// into memory to index it, so one blob of gigabytes of zeros (a few MiB
// compressed) would take the machine's memory. Each entry's declared size,
// and a delta's result size, must be at most objectLimit, and an entry
// must not inflate past what it declares; the first entry past a bound
// ends the fetch, go-git's writer getting only the pack up to it (which it
// discards as cut short).

// objectLimit is maxObjectBytes, lowered by tests.
var objectLimit int64 = maxObjectBytes

// maxPackObjects bounds the objects of one fetched pack (sglang's whole
// history is well under a million).
const maxPackObjects = 1 << 24

// ObjectTooLargeError is a fetched or stored object past maxObjectBytes.
type ObjectTooLargeError struct {
	What string // "pack entry 12 (a blob)", "python/x.bin"
	Size int64
}

func (e *ObjectTooLargeError) Error() string {
	return fmt.Sprintf("%s: %d bytes, more than the %d bytes smpatch reads of one object", e.What, e.Size, objectLimit)
}

// guardedStorage is a cache's object store whose incoming packs are read
// through a packGuard.
type guardedStorage struct {
	*filesystem.Storage
	root string // the repository directory
}

func (s *guardedStorage) PackfileWriter() (io.WriteCloser, error) {
	w, err := s.Storage.PackfileWriter()
	if err != nil {
		return nil, err
	}
	return newPackGuard(w, s.root, objectLimit), nil
}

// packGuard passes a pack on to dst as far as scanPack has read it.
type packGuard struct {
	dst  io.WriteCloser
	root string
	pw   *io.PipeWriter
	done chan struct{}
	err  error // scanPack's, once done is closed
	// stopped is set by Write once the scan ended before the pack did.
	stopped bool
}

func newPackGuard(dst io.WriteCloser, root string, max int64) *packGuard {
	pr, pw := io.Pipe()
	g := &packGuard{dst: dst, root: root, pw: pw, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		br := bufio.NewReaderSize(io.TeeReader(pr, dst), 64<<10)
		g.err = scanPack(br, max)
		if g.err == nil {
			// The trailer (the pack's checksum), passed on too.
			_, g.err = io.Copy(io.Discard, io.LimitReader(br, 1<<20))
		}
		pr.CloseWithError(cmpErr(g.err, io.ErrClosedPipe))
	}()
	return g
}

func cmpErr(err, or error) error {
	if err != nil {
		return err
	}
	return or
}

// Write passes p on to the scan. Once the scan has refused the pack, the
// rest of it is read and dropped: the remote (git-upload-pack) must be
// read to its end before go-git can wait for it to exit.
func (g *packGuard) Write(p []byte) (int, error) {
	if g.stopped {
		return len(p), nil
	}
	if _, err := g.pw.Write(p); err != nil {
		<-g.done
		g.stopped = true
		if g.err == nil {
			g.err = errors.New("pack: data past its end")
		}
	}
	return len(p), nil
}

func (g *packGuard) Close() error {
	g.pw.Close()
	<-g.done
	cerr := g.dst.Close()
	if g.err != nil {
		// go-git leaves the pack it was cut short of behind.
		tmps, _ := filepath.Glob(filepath.Join(g.root, "objects", "pack", "tmp_pack_*"))
		for _, t := range tmps {
			os.Remove(t)
		}
		return g.err
	}
	return cerr
}

var packTypes = map[int]string{1: "commit", 2: "tree", 3: "blob", 4: "tag", 6: "delta", 7: "delta"}

// scanPack reads a pack's header and every entry, inflating each to its end
// (nothing is kept), and refuses the first entry past max.
func scanPack(br *bufio.Reader, max int64) error {
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		if err == io.EOF {
			return nil // nothing sent
		}
		return fmt.Errorf("pack header: %w", err)
	}
	if string(hdr[:4]) != "PACK" {
		return errors.New("pack header: not a pack")
	}
	count := binary.BigEndian.Uint32(hdr[8:])
	if count > maxPackObjects {
		return fmt.Errorf("pack header: %d objects, more than the %d smpatch fetches in one pack", count, maxPackObjects)
	}
	var zr io.ReadCloser
	for i := uint32(0); i < count; i++ {
		b, err := br.ReadByte()
		if err != nil {
			return fmt.Errorf("pack entry %d: %w", i, unexpected(err))
		}
		typ, size, shift := int(b>>4&7), int64(b&15), 4
		for b&0x80 != 0 {
			if b, err = br.ReadByte(); err != nil {
				return fmt.Errorf("pack entry %d: %w", i, unexpected(err))
			}
			if shift > 56 {
				return fmt.Errorf("pack entry %d: size too long", i)
			}
			size |= int64(b&0x7f) << shift
			shift += 7
		}
		what := fmt.Sprintf("pack entry %d (a %s)", i, packTypes[typ])
		switch typ {
		case 1, 2, 3, 4:
		case 6: // the base's offset
			for b = 0x80; b&0x80 != 0; {
				if b, err = br.ReadByte(); err != nil {
					return fmt.Errorf("pack entry %d: %w", i, unexpected(err))
				}
			}
		case 7: // the base's hash
			if _, err := br.Discard(20); err != nil {
				return fmt.Errorf("pack entry %d: %w", i, unexpected(err))
			}
		default:
			return fmt.Errorf("pack entry %d: object type %d", i, typ)
		}
		if size > max || size < 0 {
			return &ObjectTooLargeError{What: what, Size: size}
		}
		if zr == nil {
			zr, err = zlib.NewReader(br)
		} else {
			err = zr.(zlib.Resetter).Reset(br, nil)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if typ >= 6 {
			// A delta begins with its base's size and its result's.
			lr := &countReader{r: zr}
			var result uint64
			for range 2 { // the base's size, then the result's
				if result, err = binary.ReadUvarint(lr); err != nil {
					return fmt.Errorf("%s: delta header: %w", what, unexpected(err))
				}
			}
			if result > uint64(max) {
				return &ObjectTooLargeError{What: what + " builds", Size: int64(min(result, 1<<62))}
			}
			size -= lr.n
		}
		n, err := io.Copy(io.Discard, io.LimitReader(zr, size+1))
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case n != size:
			return fmt.Errorf("%s: inflates to %d bytes where it declares %d", what, n, size)
		}
	}
	return nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// countReader counts the bytes read through it, a byte at a time for
// binary.ReadUvarint.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) ReadByte() (byte, error) {
	var b [1]byte
	if _, err := io.ReadFull(c.r, b[:]); err != nil {
		return 0, err
	}
	c.n++
	return b[0], nil
}
