package launch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/matrix"
)

// Verdict is what triage concludes about one log.
type Verdict struct {
	File string `json:"file"`
	// Known is true when a fatal signature matched; Cause is then the
	// first fatal line in time that is not a consequence of another one.
	Known bool   `json:"known"`
	Cause *Match `json:"cause,omitempty"`
	// Fatal is every fatal line (at most maxFatals), ordered by time; those
	// after Cause that a dead peer produces are marked Consequence.
	Fatal []Match `json:"fatal_lines,omitempty"`
	// Notes are the non-fatal matches (at most maxNotes, first ones first).
	Notes []Match `json:"notes"`
	// Tail is the last lines of the log, shown when the cause is unknown.
	Tail      []string `json:"tail"`
	TailStart int      `json:"tail_start"` // line number of Tail[0]
	Lines     int      `json:"lines"`      // lines read
	// LastLine is the last line the server itself wrote (smpatch's
	// "### smpatch:" notes left out; of a line redrawn with carriage
	// returns, the last text drawn). Shown when the cause is unknown.
	LastLine *LogLine `json:"last_line,omitempty"`
}

// LogLine is one line of a log and its 1-based number.
type LogLine struct {
	Line int    `json:"line"`
	Text string `json:"text"`
}

const (
	tailLines = 20
	maxNotes  = 10
	maxFatals = 64
)

// stamp is when a line was written, as far as its prefix says.
type stamp struct {
	t       time.Time
	ok      bool
	hasYear bool
}

// before orders two stamps; a stamp without a year (glog's MMDD) is
// compared on month, day and clock only.
func (a stamp) before(b stamp) bool {
	if !a.ok || !b.ok {
		return a.ok && !b.ok // lines with a time come first
	}
	if a.hasYear && b.hasYear {
		return a.t.Before(b.t)
	}
	return noYear(a.t).Before(noYear(b.t))
}

func noYear(t time.Time) time.Time { return t.AddDate(2000-t.Year(), 0, 0) }

var (
	// [2026-03-02 10:14:12 TP3] or [2026-03-02 10:14:12.123 DP0 TP3]
	sglangPrefixRe = lazyre.New(`^\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)([^\]]*)\]`)
	// [rank3]:[E1201 12:00:00.123456 ProcessGroupNCCL.cpp:...]
	torchPrefixRe = lazyre.New(`^\[rank(\d+)\]:\[[EWIF](\d\d)(\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)`)
	tpRankRe      = lazyre.New(`\bTP(\d+)\b`)
	pgRankRe      = lazyre.New(`\[PG [^\]]*?Rank (\d+)\]`)
	fileRankRe    = lazyre.New(`(?i)(?:rank|tp)[-_.]?(\d+)`)
)

// lineStamp reads the time and rank a line's prefix states.
func lineStamp(line []byte) (st stamp, text, rank string) {
	if len(line) > 256 {
		line = line[:256]
	}
	if len(line) == 0 || line[0] != '[' {
		return stamp{}, "", ""
	}
	if m := sglangPrefixRe().FindSubmatch(line); m != nil {
		text = string(m[1])
		norm := strings.Replace(strings.Replace(text, "T", " ", 1), ",", ".", 1)
		if t, err := time.Parse("2006-01-02 15:04:05.999999999", norm); err == nil {
			st = stamp{t: t, ok: true, hasYear: true}
		}
		if r := tpRankRe().FindSubmatch(m[2]); r != nil {
			rank = string(r[1])
		}
	} else if m := torchPrefixRe().FindSubmatch(line); m != nil {
		rank = string(m[1])
		text = string(m[2]) + "-" + string(m[3]) + " " + string(m[4])
		if t, err := time.Parse("2006-01-02 15:04:05.999999999", "2000-"+text); err == nil {
			st = stamp{t: t, ok: true}
		}
	}
	if rank == "" {
		if r := pgRankRe().FindSubmatch(line); r != nil {
			rank = string(r[1])
		}
	}
	return st, text, rank
}

// Scanner feeds a log line by line and keeps what a Verdict needs. It is what
// the runner uses while a server is starting: Line reports a fatal match the
// moment it is seen.
type Scanner struct {
	sigs   *Signatures
	n      int
	fatals []Match
	notes  []Match
	tail   [tailLines]string // ring of the last lines
	tailN  int               // lines put into the ring
	last   LogLine
	// the time and rank of the last line that stated them, for lines
	// (a traceback's) that do not
	ctxStamp stamp
	ctxTime  string
	ctxRank  string
	// stop, when set, reports that the scan was cancelled; the loops over a
	// block ask it every few thousand pieces, so a stop is heard within a
	// block and not only between reads.
	stop func() bool
}

// stopped reports whether the scan was cancelled, asking stop once every
// 1024 calls.
func (sc *Scanner) stopped(i int) bool {
	return sc.stop != nil && i&1023 == 0 && sc.stop()
}

// NewScanner starts a scan of one log.
func (s *Signatures) NewScanner() *Scanner { return &Scanner{sigs: s} }

// NotePrefix starts the lines the matrix runner writes into a cell's log;
// triage never matches them.
const NotePrefix = matrix.NotePrefix

// Line feeds the next line (without its newline). It returns the match when
// this line holds the log's first fatal one, else nil. A line redrawn with
// carriage returns (a progress bar) is matched piece by piece.
func (sc *Scanner) Line(text string) *Match {
	sc.Skip(text)
	if strings.HasPrefix(text, NotePrefix) {
		return nil // the runner's own line, not the server's
	}
	return sc.segments(sc.n, text, true)
}

// Partial feeds the start of a line that is not finished yet and is too
// long to keep (a progress bar redrawn with carriage returns for
// megabytes): its pieces are matched now, as part of the next line.
func (sc *Scanner) Partial(text string) *Match {
	return sc.segments(sc.n+1, text, false)
}

func (sc *Scanner) segments(n int, text string, whole bool) *Match {
	if whole && len(text) > 0 && text[0] == '[' {
		if st, t, r := lineStamp([]byte(text)); st.ok || r != "" {
			sc.ctxStamp, sc.ctxTime, sc.ctxRank = st, t, r
		}
	}
	var first *Match
	for len(text) > 0 {
		seg := text
		if i := strings.IndexByte(text, '\r'); i >= 0 {
			seg, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		if m := sc.segment(n, seg); m != nil && first == nil {
			first = m
		}
	}
	return first
}

// segment matches one piece of a line; it returns the match when it is
// the log's first fatal one.
func (sc *Scanner) segment(n int, seg string) *Match {
	clean := strings.TrimSpace(cleanLine(seg))
	if clean == "" {
		return nil
	}
	sc.last = LogLine{Line: n, Text: clean}
	m := sc.sigs.MatchLine(n, clean)
	if m == nil {
		return nil
	}
	return sc.record(m)
}

// record keeps a match; it returns it when it is the first fatal one.
func (sc *Scanner) record(m *Match) *Match {
	if !m.Fatal {
		if len(sc.notes) < maxNotes {
			sc.notes = append(sc.notes, *m)
		}
		return nil
	}
	m.at, m.Time, m.Rank = sc.ctxStamp, sc.ctxTime, sc.ctxRank
	if len(sc.fatals) < maxFatals {
		sc.fatals = append(sc.fatals, *m)
	}
	if len(sc.fatals) == 1 {
		return m
	}
	return nil
}

// Skip counts a line (and keeps it for the tail) without matching it: the
// runner's own notes in a log.
func (sc *Scanner) Skip(text string) {
	sc.n++
	sc.tail[sc.tailN%tailLines] = text
	sc.tailN++
}

// Verdict is the conclusion so far.
func (sc *Scanner) Verdict(file string) *Verdict {
	v := &Verdict{File: file, Lines: sc.n, Notes: append([]Match{}, sc.notes...), Tail: []string{}}
	k := min(sc.tailN, tailLines)
	for i := sc.tailN - k; i < sc.tailN; i++ {
		v.Tail = append(v.Tail, truncate(cleanLine(sc.tail[i%tailLines]), maxLineText))
	}
	v.TailStart = sc.n - len(v.Tail) + 1
	if v.Lines == 0 {
		v.TailStart = 0
	}
	if sc.last.Line > 0 {
		v.LastLine = &LogLine{Line: sc.last.Line, Text: truncate(sc.last.Text, maxLineText)}
	}
	v.Fatal = orderFatal(append([]Match{}, sc.fatals...))
	v.setCause()
	return v
}

// orderFatal sorts fatal lines by time (lines without one keep their place
// after those with one), stably, and marks consequences: lines of a
// consequence signature that follow the cause.
func orderFatal(ms []Match) []Match {
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].at.before(ms[j].at) })
	cause := -1
	for i := range ms {
		ms[i].Consequence = false
		if cause < 0 && (ms[i].Signature == nil || !ms[i].Signature.Consequence) {
			cause = i
		}
	}
	if cause < 0 && len(ms) > 0 {
		cause = 0
	}
	for i := cause + 1; i < len(ms) && cause >= 0; i++ {
		if ms[i].Signature != nil && ms[i].Signature.Consequence {
			ms[i].Consequence = true
		}
	}
	return ms
}

func (v *Verdict) setCause() {
	v.Cause, v.Known = nil, false
	for i := range v.Fatal {
		if !v.Fatal[i].Consequence && (v.Fatal[i].Signature == nil || !v.Fatal[i].Signature.Consequence) {
			c := v.Fatal[i]
			v.Cause = &c
			break
		}
	}
	if v.Cause == nil && len(v.Fatal) > 0 {
		c := v.Fatal[0]
		v.Cause = &c
	}
	v.Known = v.Cause != nil
}

// MergeRanks reads per-rank logs of one job as one: their fatal lines
// ordered by time, the first that is not a consequence the cause, and the
// rank that wrote it named (from the line, else from the file name:
// rank3.log, tp3.log; else the log's position among the files).
func MergeRanks(vs []*Verdict) *Verdict {
	out := &Verdict{File: "ranks", Notes: []Match{}, Tail: []string{}}
	for i, v := range vs {
		out.Lines += v.Lines
		for _, m := range v.Fatal {
			m.File = v.File
			if m.Rank == "" {
				if r := fileRankRe().FindStringSubmatch(filepath.Base(v.File)); r != nil {
					m.Rank = r[1]
				} else {
					m.Rank = fmt.Sprint(i)
				}
			}
			out.Fatal = append(out.Fatal, m)
		}
		for _, n := range v.Notes {
			n.File = v.File
			if len(out.Notes) < maxNotes {
				out.Notes = append(out.Notes, n)
			}
		}
	}
	out.Fatal = orderFatal(out.Fatal)
	out.setCause()
	return out
}

// maxLineBytes bounds the piece of one line matched at a time; a longer
// line without carriage returns is matched in pieces of this size.
const maxLineBytes = 1 << 20

// scanBlocks reads r in blocks of whole lines and calls fn on each. A line
// longer than maxLineBytes is handed over in pieces (cut after its last
// carriage return, else at the limit); cont is then true for the block
// that carries on the line the previous one began.
func scanBlocks(r io.Reader, fn func(region []byte, cont bool)) error {
	const block = 1 << 20
	buf := make([]byte, 0, 32<<10) // grows for long logs and long lines
	cont := false
	for {
		if len(buf) == cap(buf) && cap(buf) < maxLineBytes+block {
			nb := make([]byte, len(buf), min(2*cap(buf), maxLineBytes+block))
			copy(nb, buf)
			buf = nb
		}
		n, err := io.ReadFull(r, buf[len(buf):min(cap(buf), len(buf)+block)])
		buf = buf[:len(buf)+n]
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !eof {
			return err
		}
		end := len(buf)
		next := false
		if !eof {
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				end = i + 1
			} else if len(buf) >= maxLineBytes {
				if i := bytes.LastIndexByte(buf, '\r'); i >= 0 {
					end = i + 1
				}
				next = true
			} else {
				continue
			}
		}
		if end > 0 {
			fn(buf[:end], cont)
		}
		cont = next
		rest := copy(buf, buf[end:])
		buf = buf[:rest]
		if rest == 0 && cap(buf) < block {
			buf = make([]byte, 0, 2*cap(buf)) // a long log: read more at a time
		}
		if eof {
			return nil
		}
	}
}

// prefilter finds, in one pass over a block, where a line that some
// signature may match begins: every signature's pattern requires one of a
// few literals, and a Wu-Manber scan (a shift table over pairs of bytes,
// then a hash of the first w bytes of each literal) finds their
// occurrences, mostly skipping w-1 bytes at a time.
type prefilter struct {
	w      int
	shift  [1 << 16]uint8
	byHash map[uint64][][]byte // first w bytes -> literals
}

func (s *Signatures) prefilter() *prefilter {
	s.preOnce.Do(func() {
		var lits []string
		for _, sig := range s.list {
			if sig.lits == nil {
				return // a signature the prefilter cannot serve: check every line
			}
			lits = append(lits, sig.lits...)
		}
		w := 16
		for _, l := range lits {
			w = min(w, len(l))
		}
		if w < 3 || len(lits) == 0 {
			return
		}
		p := &prefilter{w: w, byHash: map[uint64][][]byte{}}
		for i := range p.shift {
			p.shift[i] = uint8(w - 1)
		}
		for _, l := range lits {
			for j := 1; j < w; j++ {
				blk := uint16(l[j-1])<<8 | uint16(l[j])
				p.shift[blk] = min(p.shift[blk], uint8(w-1-j))
			}
			k := prefixKey([]byte(l[:w]))
			p.byHash[k] = append(p.byHash[k], []byte(l))
		}
		s.pre = p
	})
	return s.pre
}

// prefixKey packs (up to 16) bytes into a map key.
func prefixKey(b []byte) uint64 {
	var k uint64
	for _, c := range b {
		k = k*1099511628211 ^ uint64(c)
	}
	return k
}

// next returns where the first literal occurrence at or after from begins,
// or -1.
func (p *prefilter) next(b []byte, from int) int {
	w := p.w
	for i := from + w - 1; i < len(b); {
		sh := p.shift[uint16(b[i-1])<<8|uint16(b[i])]
		if sh > 0 {
			i += int(sh)
			continue
		}
		start := i - w + 1
		for _, l := range p.byHash[prefixKey(b[start:i+1])] {
			if bytes.HasPrefix(b[start:], l) {
				return start
			}
		}
		i++
	}
	return -1
}

// Triage reads a whole log and returns its verdict; name is how the log is
// reported. It reads the log once, in blocks, and matches only the pieces
// of lines where some signature's literal occurs.
func (s *Signatures) Triage(name string, r io.Reader) (*Verdict, error) {
	return s.triage(context.Background(), name, r)
}

// triage is Triage that stops within a block when ctx is done.
func (s *Signatures) triage(ctx context.Context, name string, r io.Reader) (*Verdict, error) {
	sc := s.NewScanner()
	if ctx.Done() != nil {
		sc.stop = func() bool { return ctx.Err() != nil }
	}
	pre := s.prefilter()
	var tw tailWindow
	err := scanBlocks(r, func(region []byte, cont bool) {
		tw.add(region, cont)
		if pre == nil || bytes.IndexByte(region, 0x1b) >= 0 {
			sc.everyLine(region, cont)
			return
		}
		sc.hits(pre, region, cont)
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	v := sc.Verdict(name)
	v.Tail, v.TailStart, v.LastLine = tw.lines(sc.n)
	return v, nil
}

// everyLine matches every line of a block (no prefilter).
func (sc *Scanner) everyLine(region []byte, cont bool) {
	for i, first := 0, true; len(region) > 0; i, first = i+1, false {
		if sc.stopped(i) {
			return
		}
		line := region
		if i := bytes.IndexByte(region, '\n'); i >= 0 {
			line, region = region[:i], region[i+1:]
		} else {
			region = nil
		}
		l := string(line)
		if cont && first {
			sc.segments(sc.n, l, false) // the rest of a line a previous block began
			continue
		}
		sc.n++
		if !strings.HasPrefix(l, NotePrefix) {
			sc.segments(sc.n, l, true)
		}
	}
}

// hits matches the pieces of lines where a literal occurs. It reads the
// block once: where the next piece's line begins and how many lines came
// before it are carried forward from the piece before, never searched for
// again from the block's start (a line redrawn 80,000 times with carriage
// returns once took each piece a scan back over the line).
func (sc *Scanner) hits(p *prefilter, region []byte, cont bool) {
	base := sc.n // lines before the block
	pos, counted := 0, 0
	ls := 0     // where the line of the next piece begins
	ctxAt := -1 // the line whose context (time, rank) is set
	for i := 1; ; i++ {
		if sc.stopped(i) {
			return
		}
		at := p.next(region, pos)
		if at < 0 {
			break
		}
		// the piece: between the carriage returns or newlines around at
		s := pos
		if i := bytes.LastIndexAny(region[pos:at], "\r\n"); i >= 0 {
			s = pos + i + 1
		}
		e := len(region)
		if i := bytes.IndexAny(region[at:], "\r\n"); i >= 0 {
			e = at + i
		}
		counted += bytes.Count(region[pos:s], []byte{'\n'})
		n := base + counted + 1
		atStart := !(cont && counted == 0)
		if !atStart {
			n = base // still the line an earlier block began
		}
		if i := bytes.LastIndexByte(region[pos:s], '\n'); i >= 0 {
			ls = pos + i + 1
		}
		if !(atStart && bytes.HasPrefix(region[ls:], []byte(NotePrefix))) {
			seg := region[s:e]
			if len(seg) > maxLineBytes {
				lo := max(s, at-maxLineBytes/2)
				seg = region[lo:min(e, lo+maxLineBytes)]
			}
			if m := sc.sigs.MatchLine(n, string(seg)); m != nil {
				// The context of a line is read once, and only while
				// its fatal lines are still kept.
				if m.Fatal && ctxAt != ls && len(sc.fatals) < maxFatals {
					sc.contextOf(region, ls, atStart)
					ctxAt = ls
				}
				sc.record(m)
			}
		}
		pos = e
		if e < len(region) && region[e] == '\r' {
			pos = e + 1
		}
	}
	// Lines are counted when they begin: a block that carries on a line
	// does not count it again.
	counted += bytes.Count(region[pos:], []byte{'\n'})
	if len(region) > 0 && region[len(region)-1] != '\n' {
		counted++
	}
	if cont {
		counted--
	}
	sc.n = base + counted
}

// contextOf sets the time and rank for a fatal line at ls: its own prefix,
// else that of the nearest line above it (within 64 KiB) that has one.
func (sc *Scanner) contextOf(region []byte, ls int, atStart bool) {
	sc.ctxStamp, sc.ctxTime, sc.ctxRank = stamp{}, "", ""
	lo := max(0, ls-64<<10)
	for start := ls; start >= lo; {
		if atStart || start < ls {
			if st, t, r := lineStamp(region[start:]); st.ok || r != "" {
				sc.ctxStamp, sc.ctxTime, sc.ctxRank = st, t, r
				return
			}
		}
		if start <= lo {
			return
		}
		// The line before, looked for only within the window.
		i := bytes.LastIndexByte(region[lo:start-1], '\n')
		if i < 0 && lo > 0 {
			return // it begins before the window
		}
		start = lo + i + 1
	}
}

// tailWindow keeps the end of the log read so far, enough for the last
// lines.
type tailWindow struct {
	buf  []byte
	full bool // buf begins at the start of a line
}

const tailWindowBytes = 256 << 10

func (t *tailWindow) add(region []byte, cont bool) {
	if len(region) >= tailWindowBytes {
		t.buf = append(t.buf[:0], region[len(region)-tailWindowBytes:]...)
		t.full = false
		return
	}
	if len(t.buf) == 0 {
		t.full = !cont
	}
	t.buf = append(t.buf, region...)
	if len(t.buf) > 2*tailWindowBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailWindowBytes:]...)
		t.full = false
	}
}

// lines returns the last lines (up to tailLines) and the number of the
// first, given the log's line count, and the server's last line.
func (t *tailWindow) lines(total int) ([]string, int, *LogLine) {
	b := t.buf
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return []string{}, 0, nil
	}
	all := bytes.Split(b, []byte{'\n'})
	if !t.full {
		all = all[1:] // begins inside a line
	}
	var last *LogLine
	for i := len(all) - 1; i >= 0 && last == nil; i-- {
		l := all[i]
		if bytes.HasPrefix(l, []byte(NotePrefix)) {
			continue
		}
		segs := bytes.Split(l, []byte{'\r'})
		for j := len(segs) - 1; j >= 0; j-- {
			if c := strings.TrimSpace(cleanLine(string(segs[j]))); c != "" {
				last = &LogLine{Line: total - (len(all) - 1 - i), Text: truncate(c, maxLineText)}
				break
			}
		}
	}
	if len(all) > tailLines {
		all = all[len(all)-tailLines:]
	}
	out := make([]string, len(all))
	for i, l := range all {
		out[i] = truncate(cleanLine(string(l)), maxLineText)
	}
	return out, total - len(out) + 1, last
}
