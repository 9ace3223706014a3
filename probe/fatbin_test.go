package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The binaries below are generated here, shaped like nvcc 13.0 output: a host
// ELF whose .nv_fatbin section holds fatbin containers (16-byte header, then
// entries of a 64-byte header, longer for sm_100 and later, and a payload),
// and bare cubins (ELF for EM_CUDA). Flag values are those nvcc 13.0 wrote
// for -gencode lists with sm_90a, sm_100f and sm_120a targets.

type tEntry struct {
	kind    uint16
	arch    uint32
	flags   uint64
	hdr     uint32 // header size; 64 when zero
	payload int
}

const (
	fl64Linux = 0x11
	flA       = 0x100000
	flF       = 0x200000
	flLong    = 0x1000000
)

func fatbinContainer(es ...tEntry) []byte {
	var body bytes.Buffer
	le := binary.LittleEndian
	for _, e := range es {
		hs := e.hdr
		if hs == 0 {
			hs = 64
		}
		h := make([]byte, hs)
		le.PutUint16(h[0:], e.kind)
		le.PutUint16(h[2:], 0x0101)
		le.PutUint32(h[4:], hs)
		pay := (e.payload + 7) &^ 7
		le.PutUint64(h[8:], uint64(pay))
		le.PutUint32(h[16:], uint32(e.payload))
		le.PutUint32(h[28:], e.arch)
		le.PutUint64(h[40:], e.flags)
		body.Write(h)
		p := make([]byte, pay)
		for i := range p {
			p[i] = 0xAB // payloads are opaque: never parsed
		}
		body.Write(p)
	}
	out := make([]byte, 16)
	le.PutUint32(out[0:], fatbinMagic)
	le.PutUint16(out[4:], 1)
	le.PutUint16(out[6:], 16)
	le.PutUint64(out[8:], uint64(body.Len()))
	return append(out, body.Bytes()...)
}

type tSection struct {
	name string
	typ  uint32
	data []byte
}

// hostELF builds an ELF of the given class (32 or 64) with the sections,
// section headers at the end, the way linkers lay out shared libraries.
func hostELF(class int, machine uint16, flags uint32, abi byte, secs ...tSection) []byte {
	le := binary.LittleEndian
	ehsize, shentsize := 64, 64
	if class == 32 {
		ehsize, shentsize = 52, 40
	}
	var strtab bytes.Buffer
	strtab.WriteByte(0)
	names := make([]uint32, len(secs))
	for i, s := range secs {
		names[i] = uint32(strtab.Len())
		strtab.WriteString(s.name)
		strtab.WriteByte(0)
	}
	shstrName := uint32(strtab.Len())
	strtab.WriteString(".shstrtab\x00")
	buf := make([]byte, ehsize)
	offs := make([]int, len(secs))
	for i, s := range secs {
		for len(buf)%8 != 0 {
			buf = append(buf, 0)
		}
		offs[i] = len(buf)
		buf = append(buf, s.data...)
	}
	strOff := len(buf)
	buf = append(buf, strtab.Bytes()...)
	for len(buf)%8 != 0 {
		buf = append(buf, 0)
	}
	shoff := len(buf)
	n := len(secs) + 2
	sh := make([]byte, n*shentsize)
	put := func(i int, name, typ uint32, off, size int) {
		b := sh[i*shentsize:]
		le.PutUint32(b[0:], name)
		le.PutUint32(b[4:], typ)
		if class == 64 {
			le.PutUint64(b[24:], uint64(off))
			le.PutUint64(b[32:], uint64(size))
		} else {
			le.PutUint32(b[16:], uint32(off))
			le.PutUint32(b[20:], uint32(size))
		}
	}
	for i, s := range secs {
		typ := s.typ
		if typ == 0 {
			typ = 1
		}
		put(i+1, names[i], typ, offs[i], len(s.data))
	}
	put(n-1, shstrName, 3, strOff, strtab.Len())
	buf = append(buf, sh...)
	copy(buf[0:], "\x7fELF")
	buf[5], buf[6], buf[8] = 1, 1, abi
	if class == 64 {
		buf[4] = 2
		le.PutUint16(buf[16:], 3)
		le.PutUint16(buf[18:], machine)
		le.PutUint64(buf[40:], uint64(shoff))
		le.PutUint32(buf[48:], flags)
		le.PutUint16(buf[52:], uint16(ehsize))
		le.PutUint16(buf[58:], uint16(shentsize))
		le.PutUint16(buf[60:], uint16(n))
		le.PutUint16(buf[62:], uint16(n-1))
	} else {
		buf[4] = 1
		le.PutUint16(buf[16:], 3)
		le.PutUint16(buf[18:], machine)
		le.PutUint32(buf[32:], uint32(shoff))
		le.PutUint32(buf[36:], flags)
		le.PutUint16(buf[40:], uint16(ehsize))
		le.PutUint16(buf[46:], uint16(shentsize))
		le.PutUint16(buf[48:], uint16(n))
		le.PutUint16(buf[50:], uint16(n-1))
	}
	return buf
}

// torchLike is a library shaped like libtorch_cuda.so: several containers,
// plain and arch-specific cubins, no PTX.
func torchLike(class int) []byte {
	c1 := fatbinContainer(
		tEntry{kind: KindCubin, arch: 75, flags: fl64Linux, payload: 100},
		tEntry{kind: KindCubin, arch: 80, flags: fl64Linux, payload: 33},
		tEntry{kind: KindCubin, arch: 90, flags: fl64Linux, payload: 8},
		tEntry{kind: KindCubin, arch: 100, flags: fl64Linux | flLong, hdr: 96, payload: 17},
		tEntry{kind: KindCubin, arch: 120, flags: fl64Linux | flLong, hdr: 96, payload: 17},
	)
	c2 := fatbinContainer(
		tEntry{kind: KindCubin, arch: 90, flags: fl64Linux | flA, payload: 40},
		tEntry{kind: KindCubin, arch: 100, flags: fl64Linux | flA | flLong, hdr: 112, payload: 41},
		tEntry{kind: KindCubin, arch: 103, flags: fl64Linux | flA | flLong, hdr: 112, payload: 41},
		tEntry{kind: KindCubin, arch: 120, flags: fl64Linux | flA | flLong, hdr: 96, payload: 3},
		tEntry{kind: KindCubin, arch: 121, flags: fl64Linux | flA | flLong, hdr: 96, payload: 3},
	)
	fat := append(c1, make([]byte, (8-len(c1)%8)%8)...) // containers sit 8-byte aligned
	fat = append(fat, c2...)
	return hostELF(class, 62, 0, 0,
		tSection{name: ".text", data: []byte("code")},
		tSection{name: ".nv_fatbin", data: fat},
		tSection{name: ".bss", typ: 8},
	)
}

// variantsLike is a library built with -gencode for sm_80, sm_90, sm_90a,
// sm_100a, sm_100f, sm_120a, sm_120f and PTX compute_90a, compute_100,
// compute_120f.
func variantsLike() []byte {
	c := fatbinContainer(
		tEntry{kind: KindCubin, arch: 80, flags: fl64Linux, payload: 10},
		tEntry{kind: KindCubin, arch: 90, flags: fl64Linux, payload: 10},
		tEntry{kind: KindCubin, arch: 90, flags: fl64Linux | flA, payload: 10},
		tEntry{kind: KindCubin, arch: 100, flags: fl64Linux | flA | flLong, hdr: 96, payload: 10},
		tEntry{kind: KindCubin, arch: 100, flags: fl64Linux | flF | flLong, hdr: 96, payload: 10},
		tEntry{kind: KindCubin, arch: 120, flags: fl64Linux | flA | flLong, hdr: 96, payload: 10},
		tEntry{kind: KindCubin, arch: 120, flags: fl64Linux | flF | flLong, hdr: 96, payload: 10},
		tEntry{kind: KindPTX, arch: 90, flags: fl64Linux | flA | 0x8000, hdr: 80, payload: 264},
		tEntry{kind: KindPTX, arch: 100, flags: fl64Linux | 0x8000, hdr: 80, payload: 264},
		tEntry{kind: KindPTX, arch: 120, flags: fl64Linux | flF | 0x8000, hdr: 80, payload: 264},
	)
	return hostELF(64, 62, 0, 0, tSection{name: ".nv_fatbin", data: c})
}

// tkinfo is a .note.nv.tkinfo section as ptxas writes it into a cubin.
func tkinfo(arch string) tSection {
	desc := "\x00\x00Tool Name: ptxas\x00Tool Version: 13.0\x00Tool Command Line Arguments: -arch " + arch + " -m 64 \x00"
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, [3]uint32{8, uint32(len(desc)), 2000})
	b.WriteString("NVIDIA\x00\x00")
	b.WriteString(desc)
	return tSection{name: ".note.nv.tkinfo", typ: 7, data: b.Bytes()}
}

func TestScanBinary(t *testing.T) {
	tests := []struct {
		name       string
		data       []byte
		class      int
		cubins     []string
		ptx        []string
		containers int
	}{
		{"torch-like ELF64", torchLike(64), 64,
			[]string{"sm_75", "sm_80", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_103a", "sm_120", "sm_120a", "sm_121a"}, []string{}, 2},
		{"torch-like ELF32", torchLike(32), 32,
			[]string{"sm_75", "sm_80", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_103a", "sm_120", "sm_120a", "sm_121a"}, []string{}, 2},
		{"a and f kept apart", variantsLike(), 64,
			[]string{"sm_80", "sm_90", "sm_90a", "sm_100a", "sm_100f", "sm_120a", "sm_120f"}, []string{"compute_90a", "compute_100", "compute_120f"}, 1},
		{"no fatbin", hostELF(64, 62, 0, 0, tSection{name: ".text", data: []byte("x")}), 64, []string{}, []string{}, 0},
		{"cubin ABI 7 sm_90a", hostELF(64, emCUDA, 0x5a|0x800|0x400, 7), 64, []string{"sm_90a"}, []string{}, 0},
		{"cubin ABI 7 sm_80 ELF32", hostELF(32, emCUDA, 0x50, 7), 32, []string{"sm_80"}, []string{}, 0},
		{"cubin ABI 8 sm_120a", hostELF(64, emCUDA, 0x06007808, 8), 64, []string{"sm_120a"}, []string{}, 0},
		{"cubin ABI 8 sm_100", hostELF(64, emCUDA, 0x06006402, 8), 64, []string{"sm_100"}, []string{}, 0},
		// nvcc 13.0: the same e_flags for sm_120, sm_120a, sm_120f; the tool note tells.
		{"cubin ABI 8 sm_120a by its note", hostELF(64, emCUDA, 0x06007802, 8, tkinfo("sm_120a")), 64, []string{"sm_120a"}, []string{}, 0},
		{"cubin ABI 8 sm_100f by its note", hostELF(64, emCUDA, 0x06006402, 8, tkinfo("sm_100f")), 64, []string{"sm_100f"}, []string{}, 0},
		{"cubin ABI 8 sm_90a by its note", hostELF(64, emCUDA, 0x06005a04, 8, tkinfo("sm_90a")), 64, []string{"sm_90a"}, []string{}, 0},
		{"cubin note for another arch ignored", hostELF(64, emCUDA, 0x06005a04, 8, tkinfo("sm_120a")), 64, []string{"sm_90"}, []string{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ScanBinary(context.Background(), bytes.NewReader(tt.data), int64(len(tt.data)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if s.Class != tt.class || !reflect.DeepEqual(s.Cubins, tt.cubins) || !reflect.DeepEqual(s.PTX, tt.ptx) || s.Containers != tt.containers {
				t.Fatalf("got class %d cubins %q ptx %q containers %d; want %d %q %q %d", s.Class, s.Cubins, s.PTX, s.Containers, tt.class, tt.cubins, tt.ptx, tt.containers)
			}
		})
	}
}

// countingReader counts the bytes read, to show payloads are skipped.
type countingReader struct {
	r *bytes.Reader
	n int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += n
	return n, err
}

func TestScanBinarySkipsPayloads(t *testing.T) {
	big := fatbinContainer(
		tEntry{kind: KindCubin, arch: 90, flags: fl64Linux, payload: 4 << 20},
		tEntry{kind: KindCubin, arch: 100, flags: fl64Linux | flA | flLong, hdr: 112, payload: 4 << 20},
	)
	data := hostELF(64, 62, 0, 0, tSection{name: ".nv_fatbin", data: big})
	cr := &countingReader{r: bytes.NewReader(data)}
	var entries []FatbinEntry
	s, err := ScanBinary(context.Background(), cr, int64(len(data)), func(e FatbinEntry) error { entries = append(entries, e); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Cubins, []string{"sm_90", "sm_100a"}) || len(entries) != 2 {
		t.Fatalf("got %q, %d entries", s.Cubins, len(entries))
	}
	if cr.n > 4096 {
		t.Fatalf("read %d bytes of a %d-byte file: payloads were not skipped", cr.n, len(data))
	}
}

func TestScanBinaryErrors(t *testing.T) {
	good := torchLike(64)
	fat := fatbinContainer(tEntry{kind: KindCubin, arch: 90, flags: fl64Linux, payload: 64})
	overlong := append([]byte(nil), fat...)
	binary.LittleEndian.PutUint64(overlong[16+8:], 1<<40) // payload past the container
	badMagic := append([]byte(nil), fat...)
	binary.LittleEndian.PutUint32(badMagic, 0x12345678)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"not ELF", []byte("#!/bin/sh\necho hello world, not an ELF file at all\n"), "not an ELF"},
		{"truncated", good[:len(good)-100], "do not fit"},
		{"payload past container", hostELF(64, 62, 0, 0, tSection{name: ".nv_fatbin", data: overlong}), "run past its container"},
		{"bad magic", hostELF(64, 62, 0, 0, tSection{name: ".nv_fatbin", data: badMagic}), "no fatbin header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ScanBinary(context.Background(), bytes.NewReader(tt.data), int64(len(tt.data)), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestScanFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "libx.so")
	if err := os.WriteFile(p, variantsLike(), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ScanFile(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Path != p || len(s.Targets()) != 10 {
		t.Fatalf("got %+v", s)
	}
	if _, err := ScanFile(context.Background(), filepath.Join(t.TempDir(), "missing.so"), nil); err == nil {
		t.Fatal("missing file: no error")
	}
}

func FuzzScanBinary(f *testing.F) {
	f.Add(torchLike(64))
	f.Add(torchLike(32))
	f.Add(variantsLike())
	f.Add(hostELF(64, emCUDA, 0x06007808, 8))
	f.Add(hostELF(32, emCUDA, 0x5a, 7))
	f.Add(hostELF(64, emCUDA, 0x06007802, 8, tkinfo("sm_120a")))
	f.Add([]byte("\x7fELF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := ScanBinary(context.Background(), bytes.NewReader(data), int64(len(data)), func(e FatbinEntry) error {
			if e.Offset < 0 || e.Offset >= int64(len(data)) || int64(e.HeaderSize) > int64(len(data)) {
				t.Fatalf("entry outside the file: %+v", e)
			}
			return nil
		})
		if err != nil {
			return
		}
	})
}

// paddedELF is a virtual host ELF (headers, then .nv_fatbin last) whose
// section is container a, pad bytes of zeros, then container b: a file of
// gigabytes without holding them.
type paddedELF struct {
	head, tail []byte
	pad        int64
	reads      int
	onRead     func()
}

func newPaddedELF(a []byte, pad int64, b []byte) *paddedELF {
	le := binary.LittleEndian
	shstr := []byte("\x00.shstrtab\x00.nv_fatbin\x00")
	shoff := 64 + len(shstr)
	fat := shoff + 3*64
	hdr := make([]byte, fat)
	copy(hdr, "\x7fELF\x02\x01\x01")
	le.PutUint16(hdr[16:], 3)
	le.PutUint16(hdr[18:], 62)
	le.PutUint64(hdr[40:], uint64(shoff))
	le.PutUint16(hdr[52:], 64)
	le.PutUint16(hdr[58:], 64)
	le.PutUint16(hdr[60:], 3)
	le.PutUint16(hdr[62:], 1)
	copy(hdr[64:], shstr)
	s1 := hdr[shoff+64:]
	le.PutUint32(s1[0:], 1)
	le.PutUint32(s1[4:], 3)
	le.PutUint64(s1[24:], 64)
	le.PutUint64(s1[32:], uint64(len(shstr)))
	s2 := hdr[shoff+128:]
	le.PutUint32(s2[0:], 11)
	le.PutUint32(s2[4:], 1)
	le.PutUint64(s2[24:], uint64(fat))
	le.PutUint64(s2[32:], uint64(len(a))+uint64(pad)+uint64(len(b)))
	return &paddedELF{head: append(hdr, a...), tail: b, pad: pad}
}

func (p *paddedELF) size() int64 { return int64(len(p.head)) + p.pad + int64(len(p.tail)) }

func (p *paddedELF) ReadAt(b []byte, off int64) (int, error) {
	p.reads++
	if p.onRead != nil {
		p.onRead()
	}
	n := 0
	for n < len(b) {
		o := off + int64(n)
		switch {
		case o < int64(len(p.head)):
			n += copy(b[n:], p.head[o:])
		case o < int64(len(p.head))+p.pad:
			k := min(int64(len(b)-n), int64(len(p.head))+p.pad-o)
			clear(b[n : n+int(k)])
			n += int(k)
		case o < p.size():
			n += copy(b[n:], p.tail[o-int64(len(p.head))-p.pad:])
		default:
			return n, io.EOF
		}
	}
	return n, nil
}

// Gigabytes of zero padding in .nv_fatbin are skipped a block at a time:
// a few thousand reads, not one per 8-byte word.
func TestScanBinaryZeroPadding(t *testing.T) {
	a := fatbinContainer(tEntry{kind: KindCubin, arch: 90, flags: fl64Linux, payload: 64})
	b := fatbinContainer(tEntry{kind: KindCubin, arch: 120, flags: fl64Linux | flA | flLong, hdr: 112, payload: 64})
	p := newPaddedELF(a, 256<<20, b)
	s, err := ScanBinary(context.Background(), p, p.size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Cubins, []string{"sm_90", "sm_120a"}) || s.Containers != 2 {
		t.Fatalf("got %q, %d containers", s.Cubins, s.Containers)
	}
	if max := (256<<20)/padBlock + 100; p.reads > max {
		t.Fatalf("%d reads for 256 MiB of padding, want at most %d", p.reads, max)
	}
}

// Every read hears the context: a stop in the middle of the padding ends
// the scan at the next read.
func TestScanBinaryHearsContext(t *testing.T) {
	a := fatbinContainer(tEntry{kind: KindCubin, arch: 90, flags: fl64Linux, payload: 64})
	p := newPaddedELF(a, 64<<30, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.onRead = func() {
		if p.reads == 50 {
			cancel()
		}
	}
	_, err := ScanBinary(ctx, p, p.size(), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if p.reads > 51 {
		t.Fatalf("%d reads after the stop at read 50", p.reads)
	}
}

// A binary of more distinct targets than any CUDA build is refused, and
// entries handed out are not kept: memory does not grow with the file.
func TestScanBinaryBounds(t *testing.T) {
	var many []tEntry
	for i := range maxTargets + 1 {
		many = append(many, tEntry{kind: KindCubin, arch: uint32(1000 + i), flags: fl64Linux})
	}
	data := hostELF(64, 62, 0, 0, tSection{name: ".nv_fatbin", data: fatbinContainer(many...)})
	if _, err := ScanBinary(context.Background(), bytes.NewReader(data), int64(len(data)), nil); err == nil || !strings.Contains(err.Error(), "distinct targets") {
		t.Fatalf("error %v, want distinct targets", err)
	}

	const n = 200_000
	same := make([]tEntry, n)
	for i := range same {
		same[i] = tEntry{kind: KindCubin, arch: 90, flags: fl64Linux}
	}
	data = hostELF(64, 62, 0, 0, tSection{name: ".nv_fatbin", data: fatbinContainer(same...)})
	var before, at runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	seen := 0
	_, err := ScanBinary(context.Background(), bytes.NewReader(data), int64(len(data)), func(e FatbinEntry) error {
		if seen++; seen == n {
			runtime.GC()
			runtime.ReadMemStats(&at)
		}
		return nil
	})
	if err != nil || seen != n {
		t.Fatalf("%d entries, %v", seen, err)
	}
	if grew := int64(at.HeapAlloc) - int64(before.HeapAlloc); grew > 4<<20 {
		t.Fatalf("heap grew %d bytes over %d entries: entries are kept", grew, n)
	}
}

// A sparse file whose .nv_fatbin is a hole of gigabytes between two
// containers: the hole is skipped, not read (lseek SEEK_DATA).
func TestScanFileSparsePadding(t *testing.T) {
	a := fatbinContainer(tEntry{kind: KindCubin, arch: 90, flags: fl64Linux, payload: 64})
	b := fatbinContainer(tEntry{kind: KindCubin, arch: 120, flags: fl64Linux | flA | flLong, hdr: 112, payload: 64})
	v := newPaddedELF(a, 16<<30, b)
	p := filepath.Join(t.TempDir(), "libtorch_cuda.so")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(v.head)
	f.WriteAt(v.tail, int64(len(v.head))+v.pad)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := ScanFile(ctx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Cubins, []string{"sm_90", "sm_120a"}) {
		t.Fatalf("got %q", s.Cubins)
	}
}
