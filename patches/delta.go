package patches

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// The patched copy of a file that has an original is kept, when that is
// clearly smaller, as an exact byte delta against the original: a tar
// entry PATH.delta in NAME.patched.tar instead of PATH. A delta is text
// headed, then a list of operations:
//
//	smpatch-delta 1 OLDLEN NEWLEN\n
//	C OFF LEN\n          LEN bytes of the original from OFF
//	I LEN\n BYTES        LEN bytes given literally
//
// Numbers are decimal without sign or leading zeros. Copies go forward
// through the original (each starts at or after the end of the one
// before; the bytes between are left out), so a delta makes at most
// OLDLEN bytes plus its own length, and every length is checked before
// anything is copied or allocated.

const (
	deltaMagic  = "smpatch-delta 1 "
	deltaSuffix = ".delta"

	// The encoder's resync search, after a mismatch: needles of
	// deltaNeedle bytes taken from the original at the mismatch and at the
	// line starts after it (at most deltaLines of them, within deltaSpan
	// bytes), each looked for in the next deltaSpan*2 bytes of the new
	// file; then, farther, one needle at the mismatch looked for as far as
	// the insert budget allows in the new file, one of the new file looked
	// for in the rest of the original, and needles at line starts of the
	// original 2, 4, 8 ... times deltaSpan on.
	deltaNeedle = 32
	deltaLines  = 64
	deltaSpan   = 8 << 10
)

// encodeDelta returns a delta that makes new from old, and whether it is
// worth keeping: ok is false when the two differ too much (the bytes given
// literally would be over a quarter of new, or the delta over half its
// size). A delta it returns is checked against new before it is returned.
func encodeDelta(old, new []byte) ([]byte, bool) {
	budget := len(new) / 4 // bytes given literally, all together
	d := make([]byte, 0, 512)
	d = append(d, deltaMagic...)
	d = strconv.AppendInt(d, int64(len(old)), 10)
	d = append(d, ' ')
	d = strconv.AppendInt(d, int64(len(new)), 10)
	d = append(d, '\n')
	i, k, inserted := 0, 0, 0
	for {
		if n := commonPrefix(old[i:], new[k:]); n > 0 {
			d = append(d, 'C', ' ')
			d = strconv.AppendInt(d, int64(i), 10)
			d = append(d, ' ')
			d = strconv.AppendInt(d, int64(n), 10)
			d = append(d, '\n')
			i, k = i+n, k+n
		}
		if k == len(new) {
			break // what is left of old is left out
		}
		s, p, found := resync(old, new, i, k, budget-inserted)
		if !found {
			s, p = len(old), len(new)
		}
		if p > k {
			inserted += p - k
			if inserted > budget {
				return nil, false
			}
			d = append(d, 'I', ' ')
			d = strconv.AppendInt(d, int64(p-k), 10)
			d = append(d, '\n')
			d = append(d, new[k:p]...)
		}
		i, k = s, p
	}
	if len(d) > len(new)/2 {
		return nil, false
	}
	// Checked as it will be read: parsed, each piece compared with new.
	pos := 0
	_, err := walkDelta(old, d, len(new), func(seg []byte) error {
		if !bytes.Equal(seg, new[pos:pos+len(seg)]) {
			return errors.New("differs")
		}
		pos += len(seg)
		return nil
	})
	if err != nil || pos != len(new) {
		return nil, false
	}
	return d, true
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+4096 <= n && bytes.Equal(a[i:i+4096], b[i:i+4096]) {
		i += 4096
	}
	for i+64 <= n && bytes.Equal(a[i:i+64], b[i:i+64]) {
		i += 64
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// resync finds, after a mismatch at old[i] and new[k], the nearest place
// (s >= i, p >= k, fewest bytes left out plus given literally) where a
// needle of old is found in new, giving at most budget bytes literally.
// old[s:] and new[p:] then start with at least the needle's bytes.
func resync(old, new []byte, i, k, budget int) (s, p int, found bool) {
	best := -1
	maxIns := min(budget, len(new)-k)
	if maxIns < 0 {
		return 0, 0, false
	}
	var bs, bp int
	consider := func(cs, cp int) {
		for cs > i && cp > k && old[cs-1] == new[cp-1] {
			cs, cp = cs-1, cp-1
		}
		if c := (cs - i) + (cp - k); best < 0 || c < best {
			best, bs, bp, found = c, cs, cp, true
		}
	}
	// Close by: the mismatch and the line starts after it.
	for n, at := 0, i; at < len(old) && at-i <= deltaSpan && n < deltaLines; n++ {
		if best >= 0 && at-i >= best {
			break
		}
		needle := old[at:min(at+deltaNeedle, len(old))]
		win := min(maxIns, 2*deltaSpan)
		if best >= 0 {
			win = min(win, best-(at-i)-1)
		}
		if idx := bytes.Index(new[k:min(k+win+len(needle), len(new))], needle); idx >= 0 && idx <= win {
			consider(at, k+idx)
		}
		nl := bytes.IndexByte(old[at:], '\n')
		if nl < 0 {
			break
		}
		at += nl + 1
	}
	// A long insertion: the original at the mismatch, further on in new.
	if needle := old[i:min(i+deltaNeedle, len(old))]; len(needle) > 0 {
		win := maxIns
		if best >= 0 {
			win = min(win, best-1)
		}
		if win > 2*deltaSpan {
			if idx := bytes.Index(new[k:min(k+win+len(needle), len(new))], needle); idx >= 0 && idx <= win {
				consider(i, k+idx)
			}
		}
	}
	// A long deletion: new at the mismatch, further on in the original.
	if needle := new[k:min(k+deltaNeedle, len(new))]; len(needle) > 0 && i < len(old) {
		win := len(old) - i
		if best >= 0 {
			win = min(win, best-1)
		}
		if win > deltaSpan {
			if idx := bytes.Index(old[i:min(i+win+len(needle), len(old))], needle); idx >= 0 && idx <= win {
				consider(i+idx, k)
			}
		}
	}
	// A long replacement: line starts of the original further and further
	// on, each looked for in new as far as the bytes between may reach;
	// a match is moved back to where the two start to agree.
	for dist := 2 * deltaSpan; !found && i+dist < len(old); dist *= 2 {
		nl := bytes.IndexByte(old[i+dist:], '\n')
		if nl < 0 {
			break
		}
		at := i + dist + nl + 1
		needle := old[at:min(at+deltaNeedle, len(old))]
		win := min(maxIns+(at-i), len(new)-k)
		if idx := bytes.Index(new[k:min(k+win+len(needle), len(new))], needle); idx >= 0 && idx <= win {
			consider(at, k+idx)
		}
	}
	return bs, bp, found
}

// decodeDelta makes the bytes delta describes from old; it refuses a
// delta that would make more than max bytes, and any delta that is not
// exactly in the format, before allocating more than it can make.
func decodeDelta(old, delta []byte, max int) ([]byte, error) {
	newLen, _, err := deltaHeader(old, delta, max)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, newLen)
	if _, err := walkDelta(old, delta, max, func(seg []byte) error {
		out = append(out, seg...)
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// deltaHeader reads the delta's first line: the length it makes, and
// where its operations start.
func deltaHeader(old, delta []byte, max int) (newLen, pos int, err error) {
	line, next, ok := deltaLine(delta, 0)
	rest, okMagic := bytes.CutPrefix(line, []byte(deltaMagic))
	if !ok || !okMagic {
		return 0, 0, errors.New("not a delta (no \"smpatch-delta 1\" header line)")
	}
	a, b, ok := bytes.Cut(rest, []byte{' '})
	oldLen, ok1 := deltaNum(a)
	newLen, ok2 := deltaNum(b)
	if !ok || !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("delta header %q: not two lengths", line)
	}
	switch {
	case oldLen != len(old):
		return 0, 0, fmt.Errorf("delta made against an original of %d bytes, the original has %d", oldLen, len(old))
	case newLen > max:
		return 0, 0, fmt.Errorf("delta makes %d bytes, more than the %d a copy may have", newLen, max)
	case newLen > len(old)+len(delta):
		return 0, 0, fmt.Errorf("delta claims %d bytes, more than its original and its own %d bytes can make", newLen, len(delta))
	}
	return newLen, next, nil
}

// walkDelta checks delta against old and max and calls emit with each
// piece of what it makes, in order; it returns the length made.
func walkDelta(old, delta []byte, max int, emit func([]byte) error) (int, error) {
	newLen, pos, err := deltaHeader(old, delta, max)
	if err != nil {
		return 0, err
	}
	made, copied := 0, 0 // bytes made; end of the last copy in old
	for pos < len(delta) {
		at := pos
		line, next, ok := deltaLine(delta, pos)
		if !ok {
			return 0, fmt.Errorf("delta byte %d: operation line not ended", at)
		}
		pos = next
		var seg []byte
		switch {
		case bytes.HasPrefix(line, []byte("C ")):
			a, b, ok := bytes.Cut(line[2:], []byte{' '})
			off, ok1 := deltaNum(a)
			n, ok2 := deltaNum(b)
			switch {
			case !ok || !ok1 || !ok2 || n == 0:
				return 0, fmt.Errorf("delta byte %d: bad copy %q", at, line)
			case off < copied:
				return 0, fmt.Errorf("delta byte %d: copy from %d goes back before %d", at, off, copied)
			case off > len(old) || n > len(old)-off:
				return 0, fmt.Errorf("delta byte %d: copy of %d bytes from %d runs past the original's %d", at, n, off, len(old))
			}
			seg, copied = old[off:off+n], off+n
		case bytes.HasPrefix(line, []byte("I ")):
			n, ok := deltaNum(line[2:])
			switch {
			case !ok || n == 0:
				return 0, fmt.Errorf("delta byte %d: bad insert %q", at, line)
			case n > len(delta)-pos:
				return 0, fmt.Errorf("delta byte %d: insert of %d bytes, %d left", at, n, len(delta)-pos)
			}
			seg, pos = delta[pos:pos+n], pos+n
		default:
			return 0, fmt.Errorf("delta byte %d: unknown operation %q", at, line)
		}
		if len(seg) > newLen-made {
			return 0, fmt.Errorf("delta byte %d: makes more than the %d bytes its header says", at, newLen)
		}
		if err := emit(seg); err != nil {
			return 0, fmt.Errorf("delta byte %d: %w", at, err)
		}
		made += len(seg)
	}
	if made != newLen {
		return 0, fmt.Errorf("delta makes %d bytes, its header says %d", made, newLen)
	}
	return made, nil
}

// deltaLine is the line of delta at pos without its newline (at most 64
// bytes: no line of the format is longer) and where the next one starts.
func deltaLine(delta []byte, pos int) ([]byte, int, bool) {
	rest := delta[pos:]
	rest = rest[:min(len(rest), 64)]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 {
		return nil, 0, false
	}
	return rest[:nl], pos + nl + 1, true
}

// deltaNum reads a decimal length: digits only, no leading zero, at most
// 15 digits.
func deltaNum(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 15 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// writePatched adds the patched copy of rel to bw: a delta against orig
// when rel has an original and the delta is clearly smaller, else the
// bytes as they are. taken says that rel+".delta" is itself a file the
// entry records: that name is then its copy's, and rel is kept whole.
func (bw *blobWriter) writePatched(name, rel string, orig, patched []byte, taken bool) error {
	if orig != nil && !taken {
		if d, ok := encodeDelta(orig, patched); ok {
			return bw.write("patched", name, rel+deltaSuffix, d, false)
		}
	}
	return bw.write("patched", name, rel, patched, false)
}

// patchedCopy finds the patched copy of rec (the file rel of the entry
// called name) in set, its patched tar file: the bytes kept whole, or
// made from its delta and the original copy (read and checked against
// its hash first). found is false when there is neither. The caller checks
// the result against the patched hash.
func (j *journal) patchedCopy(name, rel string, rec *FileRecord, set map[string][]byte) (b []byte, found bool, err error) {
	b, found = set[rel]
	if rec == nil || rec.Original == "" || deltaNameTaken(j.state.Get(name), rel) {
		return b, found, nil
	}
	d, isDelta := set[rel+deltaSuffix]
	where := j.blobTar("patched", name)
	switch {
	case !isDelta:
		return b, found, nil
	case found:
		return nil, false, &JournalError{Path: where, Msg: fmt.Sprintf("%q and %q both present: one copy of %s, kept whole or as a delta", rel, rel+deltaSuffix, displayLine(rel))}
	}
	orig, err := j.readBlob("orig", name, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, &JournalError{Path: where, Msg: fmt.Sprintf("the copy of %s is a delta against its original, and the journal has no copy of the original", displayLine(rel))}
	}
	if err != nil {
		return nil, false, err
	}
	if b, err = decodeDelta(orig, d, maxCopyBytes); err != nil {
		return nil, false, &JournalError{Path: where, Msg: fmt.Sprintf("the copy of %s: %v", displayLine(rel), err)}
	}
	return b, true, nil
}

// deltaNameTaken reports whether the entry e records a file at rel+".delta"
// (the name rel's delta would have).
func deltaNameTaken(e *Entry, rel string) bool {
	if e == nil {
		return false
	}
	for _, f := range e.Files {
		if len(f.Path) == len(rel)+len(deltaSuffix) && strings.HasPrefix(f.Path, rel) && strings.HasSuffix(f.Path, deltaSuffix) {
			return true
		}
	}
	return false
}

// itemPaths is the set of paths the entry of it records.
func itemPaths(it *applyItem) map[string]bool {
	paths := make(map[string]bool, len(it.changes)+len(it.carry))
	for _, c := range it.changes {
		paths[c.fp.Path] = true
	}
	for _, c := range it.carry {
		paths[c.rec.Path] = true
	}
	return paths
}
