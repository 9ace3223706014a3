package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/smver"
)

// The reader below lists the SM targets of CUDA binaries without loading
// them: the ELF header and section headers of a host library (either ELF
// class), then every fatbin container in its .nv_fatbin section, reading
// each entry's header and seeking over its payload. A 450 MB libtorch_cuda.so
// is read in a few thousand small reads. A bare cubin (an ELF for EM_CUDA)
// gives its target from e_flags. Every read hears the caller's context,
// zero padding between containers is skipped a block at a time, entries are
// handed to the caller one by one rather than kept, and a binary naming more
// than maxTargets distinct targets is refused: memory stays small and time
// is the caller's bound, whatever the file holds.

const (
	fatbinMagic   = 0xBA55ED50
	emCUDA        = 190
	maxSections   = 1 << 16
	maxStrtab     = 16 << 20
	entryBaseSize = 64
	maxEntryHdr   = 4096
	// maxTargets bounds the distinct targets of one binary (a CUDA build
	// has a few dozen at most).
	maxTargets = 256
	// padBlock is how much zero padding is read at a time.
	padBlock = 64 << 10
)

// Fatbin entry kinds.
const (
	KindPTX   = 1
	KindCubin = 2
)

// FatbinEntry is one entry of a fatbin container.
type FatbinEntry struct {
	Offset     int64  `json:"offset"`      // file offset of the entry header
	Kind       uint16 `json:"kind"`        // 1 PTX, 2 cubin
	HeaderSize uint32 `json:"header_size"` // 64 and more
	Payload    uint64 `json:"payload"`     // bytes after the header
	Arch       uint32 `json:"arch"`        // 90 for sm_90
	Flags      uint64 `json:"flags"`
	// Target is sm_90, sm_90a, sm_100f for a cubin, compute_90a for PTX.
	// cuobjdump --list-elf names a family cubin (sm_100f) sm_100, and
	// --list-ptx names PTX sm_90a: a family cubin under its plain name, PTX under sm_.
	Target string `json:"target"`
	// Ext holds the header bytes past the first 64, hex.
	Ext string `json:"ext,omitempty"`
}

// BinaryScan is what the reader found in one file.
type BinaryScan struct {
	Path   string   `json:"path"`
	Kind   string   `json:"kind"` // "host-elf" or "cubin"
	Class  int      `json:"elf_class"`
	Cubins []string `json:"cubins"` // distinct targets, sorted
	PTX    []string `json:"ptx"`
	// Entries is filled by the caller that wants them (smpatch probe
	// --scan --entries streams them instead); ScanBinary hands them out.
	Entries []FatbinEntry `json:"entries,omitempty"`
	// Containers is the number of fatbin containers read.
	Containers int `json:"containers"`
}

// Targets is every distinct target of the scan: cubins then PTX.
func (s *BinaryScan) Targets() []string {
	return append(append([]string(nil), s.Cubins...), s.PTX...)
}

type elfHeader struct {
	class     int
	order     binary.ByteOrder
	abi       byte
	machine   uint16
	flags     uint32
	shoff     uint64
	shentsize uint16
	shnum     uint32
	shstrndx  uint32
}

type elfSection struct {
	name   uint32
	typ    uint32
	offset uint64
	size   uint64
	link   uint32
}

func readELFHeader(r io.ReaderAt, size int64) (*elfHeader, error) {
	var id [64]byte
	n, err := r.ReadAt(id[:], 0)
	if n < 16 {
		if err == nil || err == io.EOF {
			err = errors.New("too short for an ELF header")
		}
		return nil, err
	}
	if !bytes.Equal(id[:4], []byte("\x7fELF")) {
		return nil, errors.New("not an ELF file")
	}
	h := &elfHeader{abi: id[8]}
	switch id[5] {
	case 1:
		h.order = binary.LittleEndian
	case 2:
		h.order = binary.BigEndian
	default:
		return nil, fmt.Errorf("ELF data encoding %d", id[5])
	}
	switch id[4] {
	case 1:
		if n < 52 {
			return nil, errors.New("truncated ELF32 header")
		}
		h.class = 32
		h.machine = h.order.Uint16(id[18:])
		h.shoff = uint64(h.order.Uint32(id[32:]))
		h.flags = h.order.Uint32(id[36:])
		h.shentsize = h.order.Uint16(id[46:])
		h.shnum = uint32(h.order.Uint16(id[48:]))
		h.shstrndx = uint32(h.order.Uint16(id[50:]))
	case 2:
		if n < 64 {
			return nil, errors.New("truncated ELF64 header")
		}
		h.class = 64
		h.machine = h.order.Uint16(id[18:])
		h.shoff = h.order.Uint64(id[40:])
		h.flags = h.order.Uint32(id[48:])
		h.shentsize = h.order.Uint16(id[58:])
		h.shnum = uint32(h.order.Uint16(id[60:]))
		h.shstrndx = uint32(h.order.Uint16(id[62:]))
	default:
		return nil, fmt.Errorf("ELF class %d", id[4])
	}
	return h, nil
}

func (h *elfHeader) sections(r io.ReaderAt, size int64) ([]elfSection, error) {
	if h.shoff == 0 {
		return nil, nil
	}
	want := uint16(64)
	if h.class == 32 {
		want = 40
	}
	if h.shentsize < want {
		return nil, fmt.Errorf("section header size %d", h.shentsize)
	}
	readOne := func(i uint64) (elfSection, error) {
		var b [64]byte
		off := h.shoff + i*uint64(h.shentsize)
		if off > uint64(size) || off+uint64(want) > uint64(size) {
			return elfSection{}, fmt.Errorf("section header %d past the end of the file", i)
		}
		if _, err := r.ReadAt(b[:want], int64(off)); err != nil {
			return elfSection{}, err
		}
		var s elfSection
		if h.class == 64 {
			s = elfSection{name: h.order.Uint32(b[0:]), typ: h.order.Uint32(b[4:]), offset: h.order.Uint64(b[24:]), size: h.order.Uint64(b[32:]), link: h.order.Uint32(b[40:])}
		} else {
			s = elfSection{name: h.order.Uint32(b[0:]), typ: h.order.Uint32(b[4:]), offset: uint64(h.order.Uint32(b[16:])), size: uint64(h.order.Uint32(b[20:])), link: h.order.Uint32(b[24:])}
		}
		return s, nil
	}
	num, strndx := uint64(h.shnum), h.shstrndx
	if num == 0 || strndx == 0xffff {
		s0, err := readOne(0)
		if err != nil {
			return nil, err
		}
		if num == 0 {
			num = s0.size
		}
		if strndx == 0xffff {
			strndx = s0.link
		}
	}
	if num > maxSections || h.shoff+num*uint64(h.shentsize) > uint64(size) {
		return nil, fmt.Errorf("%d section headers at %d do not fit in %d bytes", num, h.shoff, size)
	}
	secs := make([]elfSection, 0, num)
	for i := uint64(0); i < num; i++ {
		s, err := readOne(i)
		if err != nil {
			return nil, err
		}
		secs = append(secs, s)
	}
	h.shstrndx = strndx
	return secs, nil
}

func sectionName(r io.ReaderAt, size int64, secs []elfSection, strndx uint32, s elfSection) string {
	if int(strndx) >= len(secs) {
		return ""
	}
	st := secs[strndx]
	if st.size > maxStrtab || st.offset > uint64(size) || st.offset+st.size > uint64(size) || uint64(s.name) >= st.size {
		return ""
	}
	n := st.size - uint64(s.name)
	if n > 256 {
		n = 256
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, int64(st.offset+uint64(s.name))); err != nil && err != io.EOF {
		return ""
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf)
}

// ScanBinary lists the SM targets in r (size bytes): the fatbins of a host
// ELF's .nv_fatbin section, or the target of a bare cubin. Every read is
// made while ctx lasts; each, when not nil, is called with every entry
// header in file order (its error stops the scan), and nothing of them is
// kept.
func ScanBinary(ctx context.Context, r io.ReaderAt, size int64, each func(FatbinEntry) error) (*BinaryScan, error) {
	r = ctxReaderAt{ctx, r}
	h, err := readELFHeader(r, size)
	if err != nil {
		return nil, err
	}
	scan := &BinaryScan{Class: h.class, Cubins: []string{}, PTX: []string{}}
	if h.machine == emCUDA {
		scan.Kind = "cubin"
		target := CubinTarget(h.abi, h.flags)
		// nvcc 13.0 writes the same e_flags for sm_120, sm_120a and
		// sm_120f; the tool note keeps the -arch it was built for.
		if secs, err := h.sections(r, size); err == nil {
			if a := cubinNoteArch(r, size, secs, h.shstrndx); a != "" && strings.TrimRight(a, "af") == strings.TrimRight(target, "af") {
				target = a
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		scan.Cubins = []string{target}
		return scan, nil
	}
	scan.Kind = "host-elf"
	secs, err := h.sections(r, size)
	if err != nil {
		return nil, err
	}
	cubins, ptx := map[string]bool{}, map[string]bool{}
	for _, s := range secs {
		if sectionName(r, size, secs, h.shstrndx, s) != ".nv_fatbin" {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			continue
		}
		if s.typ == 8 { // SHT_NOBITS
			continue
		}
		if s.offset > uint64(size) || s.size > uint64(size)-s.offset {
			return nil, fmt.Errorf(".nv_fatbin at %d+%d past the end of the file (%d bytes)", s.offset, s.size, size)
		}
		err := scanFatbins(r, int64(s.offset), int64(s.offset+s.size), func(e FatbinEntry) error {
			set := cubins
			if e.Kind == KindPTX {
				set = ptx
			}
			if !set[e.Target] && len(cubins)+len(ptx) >= maxTargets {
				return fmt.Errorf("fatbin entry at %d: more than %d distinct targets: not a CUDA build", e.Offset, maxTargets)
			}
			set[e.Target] = true
			if each != nil {
				return each(e)
			}
			return nil
		}, &scan.Containers)
		if err != nil {
			return nil, err
		}
	}
	scan.Cubins = sortedTargets(cubins)
	scan.PTX = sortedTargets(ptx)
	return scan, nil
}

// scanFatbins walks the containers in [start, end).
func scanFatbins(r io.ReaderAt, start, end int64, fn func(FatbinEntry) error, containers *int) error {
	pos := start
	var hdr [16]byte
	var pad []byte
	for pos+16 <= end {
		if _, err := r.ReadAt(hdr[:], pos); err != nil {
			return fmt.Errorf("fatbin header at %d: %w", pos, err)
		}
		if binary.LittleEndian.Uint32(hdr[0:]) != fatbinMagic {
			// Containers are 8-byte aligned; zero padding may sit
			// between them: skip it a block at a time.
			if binary.LittleEndian.Uint64(hdr[0:]) == 0 {
				if pad == nil {
					pad = make([]byte, padBlock)
				}
				next, err := skipZeros(r, pos, end, pad)
				if err != nil {
					return err
				}
				pos = next
				continue
			}
			return fmt.Errorf("no fatbin header at offset %d (magic %#x)", pos, binary.LittleEndian.Uint32(hdr[0:]))
		}
		hsize := int64(binary.LittleEndian.Uint16(hdr[6:]))
		fat := binary.LittleEndian.Uint64(hdr[8:])
		if hsize < 16 || fat > uint64(end-pos-hsize) {
			return fmt.Errorf("fatbin at offset %d: %d bytes of entries do not fit in the section", pos, fat)
		}
		cend := pos + hsize + int64(fat)
		*containers++
		epos := pos + hsize
		for epos+entryBaseSize <= cend {
			e, err := readEntry(r, epos, cend)
			if err != nil {
				return err
			}
			if err := fn(e); err != nil {
				return err
			}
			epos += int64(e.HeaderSize) + int64(e.Payload)
		}
		pos = cend
		if rem := (pos - start) % 8; rem != 0 {
			pos += 8 - rem
		}
	}
	return nil
}

// zeroBlock is what a block of padding is compared with.
var zeroBlock [padBlock]byte

// skipZeros is the offset of the first 8-byte word at or after pos (pos
// is 8-aligned from the section start) that is not zero, end when the
// rest of the section is zeros; it reads len(buf) bytes at a time.
func skipZeros(r io.ReaderAt, pos, end int64, buf []byte) (int64, error) {
	// A sparse file's holes are zeros nobody needs to read.
	var f *os.File
	if cr, ok := r.(ctxReaderAt); ok {
		f, _ = cr.ra.(*os.File)
	}
	for pos < end {
		if f != nil {
			if d, ok := nextData(f, pos, end); ok && d > pos {
				if d >= end {
					return end, nil
				}
				pos += (d - pos) &^ 7
			}
		}
		n := min(int64(len(buf)), end-pos)
		got, err := r.ReadAt(buf[:n], pos)
		if int64(got) < n {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("fatbin padding at %d: %w", pos, err)
		}
		if !bytes.Equal(buf[:n], zeroBlock[:n]) {
			for i := int64(0); i+8 <= n; i += 8 {
				if binary.LittleEndian.Uint64(buf[i:]) != 0 {
					return pos + i, nil
				}
			}
		}
		if n%8 != 0 {
			// A tail shorter than a word: fewer than 16 bytes remain.
			return end, nil
		}
		pos += n
	}
	return end, nil
}

func readEntry(r io.ReaderAt, off, cend int64) (FatbinEntry, error) {
	var b [entryBaseSize]byte
	if _, err := r.ReadAt(b[:], off); err != nil {
		return FatbinEntry{}, fmt.Errorf("fatbin entry at %d: %w", off, err)
	}
	le := binary.LittleEndian
	e := FatbinEntry{
		Offset:     off,
		Kind:       le.Uint16(b[0:]),
		HeaderSize: le.Uint32(b[4:]),
		Payload:    le.Uint64(b[8:]),
		Arch:       le.Uint32(b[28:]),
		Flags:      le.Uint64(b[40:]),
	}
	if e.HeaderSize < entryBaseSize || e.HeaderSize > maxEntryHdr {
		return e, fmt.Errorf("fatbin entry at %d: header size %d", off, e.HeaderSize)
	}
	if e.Payload > uint64(cend-off) || int64(e.HeaderSize)+int64(e.Payload) > cend-off {
		return e, fmt.Errorf("fatbin entry at %d: %d payload bytes run past its container", off, e.Payload)
	}
	var ext []byte
	if e.HeaderSize > entryBaseSize {
		ext = make([]byte, e.HeaderSize-entryBaseSize)
		if _, err := r.ReadAt(ext, off+entryBaseSize); err != nil {
			return e, fmt.Errorf("fatbin entry at %d: %w", off, err)
		}
		e.Ext = fmt.Sprintf("%x", ext)
	}
	e.Target = entryTarget(e, ext)
	return e, nil
}

// entryTarget names an entry's target the way cuobjdump does.
func entryTarget(e FatbinEntry, ext []byte) string {
	prefix := "sm_"
	if e.Kind == KindPTX {
		prefix = "compute_"
	}
	return prefix + strconv.FormatUint(uint64(e.Arch), 10) + archSuffix(e.Flags)
}

// archSuffix is "a" for an arch-specific target, "f" for a family target.
func archSuffix(flags uint64) string {
	switch {
	case flags&flagArchSpecific != 0:
		return "a"
	case flags&flagFamily != 0:
		return "f"
	}
	return ""
}

// Entry flag bits that mark sm_XYa and sm_XYf targets, read from nvcc 13.0
// output for known -gencode lists (0x11 is 64-bit | Linux; bit 24 comes with
// the longer headers of sm_100 and later).
const (
	flagArchSpecific = 1 << 20
	flagFamily       = 1 << 21
)

var noteArchRe = lazyre.New(`-arch[ =](sm_\d+[af]?)\b`)

// cubinNoteArch reads "-arch sm_120a" from a cubin's .note.nv.tkinfo.
func cubinNoteArch(r io.ReaderAt, size int64, secs []elfSection, strndx uint32) string {
	for _, s := range secs {
		if s.size == 0 || s.size > 64<<10 || s.offset > uint64(size) || s.size > uint64(size)-s.offset {
			continue
		}
		if sectionName(r, size, secs, strndx, s) != ".note.nv.tkinfo" {
			continue
		}
		buf := make([]byte, s.size)
		if _, err := r.ReadAt(buf, int64(s.offset)); err != nil && err != io.EOF {
			return ""
		}
		if m := noteArchRe().FindSubmatch(buf); m != nil {
			return string(m[1])
		}
	}
	return ""
}

// CubinTarget names a cubin's target from its ELF header: before ABI version
// 8 the SM is the low byte of e_flags with 0x800 marking "a"; from ABI
// version 8 (CUDA 13) the SM is bits 8..15 with 0x8 marking "a" (nvcc 13.0
// leaves that bit clear even for sm_90a: the tool note says more).
func CubinTarget(abi byte, flags uint32) string {
	if abi >= 8 {
		s := "sm_" + strconv.Itoa(int(flags>>8&0xff))
		if flags&0x8 != 0 {
			s += "a"
		}
		return s
	}
	s := "sm_" + strconv.Itoa(int(flags&0xff))
	if flags&0x800 != 0 {
		s += "a"
	}
	return s
}

func sortedTargets(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		a, ea := smver.ParseArch(out[i])
		b, eb := smver.ParseArch(out[j])
		if ea == nil && eb == nil {
			if c := smver.Compare(a, b); c != 0 {
				return c < 0
			}
		}
		return out[i] < out[j]
	})
	return out
}
