package launch

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"io"
	"os"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/tomlfile"
)

//go:embed signatures/default.toml
var builtinSignatures embed.FS

// DefaultSignaturesFile is the name the built-in signatures are reported under.
const DefaultSignaturesFile = "builtin:signatures/default.toml"

// Signature names one kind of log line: what it means and what to try.
type Signature struct {
	Label   string `toml:"label" json:"label"`
	Pattern string `toml:"pattern" json:"pattern"`
	Meaning string `toml:"meaning" json:"meaning"`
	Try     string `toml:"try" json:"try"`
	// Fatal means the server will not come up once this line is printed.
	Fatal bool `toml:"fatal" json:"fatal"`
	// Source is "file:line" of the signature's [[signature]] header.
	Source string `toml:"-" json:"source"`

	re *regexp.Regexp
	// lits holds literals of which a matching line must contain at least
	// one; nil when the pattern has no such literal. Checking them first
	// keeps triage of long logs fast.
	lits []string
}

// Match reports whether line matches the signature.
func (s *Signature) match(line string) bool {
	if s.lits != nil {
		found := false
		for _, l := range s.lits {
			if strings.Contains(line, l) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return s.re.MatchString(line)
}

// Signatures is an ordered set of signatures; the first that matches a line
// names it.
type Signatures struct {
	list []*Signature
}

// All returns the signatures in the order they are tried.
func (s *Signatures) All() []*Signature { return s.list }

type signatureFile struct {
	Signature []*Signature `toml:"signature"`
}

// ParseSignatures reads a signature file's bytes; name is used in errors
// ("name:line: ...").
func ParseSignatures(name string, data []byte) (*Signatures, error) {
	var f signatureFile
	md, err := tomlfile.Decode(name, data, &f)
	if err != nil {
		return nil, err
	}
	headers := headerLines(data, "[[signature]]")
	lineOf := func(i int) int {
		if i < len(headers) {
			return headers[i]
		}
		return 1
	}
	// Undecoded keys inside an array of tables do not say which element;
	// the first line that names the key stands for them.
	if err := tomlfile.UnknownError(name, md, nil, func(k toml.Key) int {
		if len(k) > 1 && k[0] == "signature" {
			return keyLine(data, k[len(k)-1], 0)
		}
		return 1
	}); err != nil {
		return nil, err
	}
	if len(f.Signature) == 0 {
		return nil, fmt.Errorf("%s:1: no [[signature]] entries", name)
	}
	seen := map[string]int{}
	for i, s := range f.Signature {
		line := lineOf(i)
		s.Source = fmt.Sprintf("%s:%d", name, line)
		switch {
		case strings.TrimSpace(s.Label) == "":
			return nil, fmt.Errorf("%s:%d: signature without a label", name, line)
		case s.Pattern == "":
			return nil, fmt.Errorf("%s:%d: signature %q without a pattern", name, line, s.Label)
		}
		if prev, ok := seen[s.Label]; ok {
			return nil, fmt.Errorf("%s:%d: label %q already used at line %d", name, line, s.Label, prev)
		}
		seen[s.Label] = line
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: signature %q: bad pattern: %w", name, keyLine(data, "pattern", line), s.Label, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("%s:%d: signature %q: pattern matches every line", name, keyLine(data, "pattern", line), s.Label)
		}
		s.re = re
		s.lits = requiredLiterals(s.Pattern)
	}
	return &Signatures{list: f.Signature}, nil
}

// requiredLiterals returns literals of which every match of pattern contains
// at least one, or nil when it cannot tell.
func requiredLiterals(pattern string) []string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	lits := literalsOf(re.Simplify())
	for _, l := range lits {
		if l == "" {
			return nil
		}
	}
	return lits
}

func literalsOf(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return []string{string(re.Rune)}
	case syntax.OpCapture:
		return literalsOf(re.Sub[0])
	case syntax.OpPlus:
		return literalsOf(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return literalsOf(re.Sub[0])
		}
	case syntax.OpConcat:
		// The child whose shortest required literal is longest.
		var best []string
		bestLen := 0
		for _, sub := range re.Sub {
			ls := literalsOf(sub)
			if ls == nil {
				continue
			}
			short := len(ls[0])
			for _, l := range ls {
				short = min(short, len(l))
			}
			if short > bestLen {
				best, bestLen = ls, short
			}
		}
		return best
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			ls := literalsOf(sub)
			if ls == nil {
				return nil
			}
			all = append(all, ls...)
		}
		return all
	}
	return nil
}

// headerLines returns the 1-based line numbers of lines equal to header.
func headerLines(data []byte, header string) []int {
	var out []int
	for i, l := range bytes.Split(data, []byte("\n")) {
		if strings.TrimSpace(string(l)) == header {
			out = append(out, i+1)
		}
	}
	return out
}

// keyLine is the first line after line from that starts with key followed
// by "=", or from itself (at least 1) when there is none.
func keyLine(data []byte, key string, from int) int {
	for i, l := range bytes.Split(data, []byte("\n")) {
		if i+1 <= from {
			continue
		}
		t := strings.TrimSpace(string(l))
		if strings.HasPrefix(t, key) && strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(t, key)), "=") {
			return i + 1
		}
	}
	return max(from, 1)
}

// DefaultSignatures returns the signatures shipped with smpatch.
func DefaultSignatures() *Signatures {
	data, err := builtinSignatures.ReadFile("signatures/default.toml")
	if err != nil {
		panic(err) // embedded at build time
	}
	s, err := ParseSignatures(DefaultSignaturesFile, data)
	if err != nil {
		panic(err) // TestDefaultSignatures keeps this from happening
	}
	return s
}

// LoadSignatures returns the user's signature files, in order, followed by
// the built-in ones: a user signature wins over a built-in that matches the
// same line.
func LoadSignatures(files []string) (*Signatures, error) {
	var all []*Signature
	builtin := DefaultSignatures().list
	labels := map[string]string{} // unique across every file, the built-in one too
	for _, sig := range builtin {
		labels[sig.Label] = sig.Source
	}
	for _, f := range files {
		data, err := tomlfile.ReadFile(nil, f)
		if err != nil {
			return nil, fmt.Errorf("signatures: %w", err)
		}
		s, err := ParseSignatures(f, data)
		if err != nil {
			return nil, err
		}
		for _, sig := range s.list {
			if prev, ok := labels[sig.Label]; ok {
				return nil, fmt.Errorf("%s: label %q already defined at %s", sig.Source, sig.Label, prev)
			}
			labels[sig.Label] = sig.Source
		}
		all = append(all, s.list...)
	}
	all = append(all, builtin...)
	return &Signatures{list: all}, nil
}

// Match is one log line that a signature names.
type Match struct {
	Signature *Signature `json:"-"`
	Label     string     `json:"label"`
	Fatal     bool       `json:"fatal"`
	Meaning   string     `json:"meaning"`
	Try       string     `json:"try"`
	Line      int        `json:"line"` // 1-based line number in the log
	Text      string     `json:"text"` // the line, colour codes removed, at most maxLineText bytes
}

// maxLineText caps the text kept from one log line.
const maxLineText = 400

var ansiRE = lazyre.New(`\x1b\[[0-9;?]*[A-Za-z]`)

// cleanLine removes terminal colour codes and a trailing carriage return.
func cleanLine(s string) string {
	s = strings.TrimRight(s, "\r")
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansiRE().ReplaceAllString(s, "")
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut at a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// MatchLine returns the first signature that matches one log line (lineNo is
// 1-based), or nil.
func (s *Signatures) MatchLine(lineNo int, line string) *Match {
	line = cleanLine(line)
	for _, sig := range s.list {
		if sig.match(line) {
			return &Match{
				Signature: sig, Label: sig.Label, Fatal: sig.Fatal,
				Meaning: sig.Meaning, Try: sig.Try,
				Line: lineNo, Text: truncate(strings.TrimSpace(line), maxLineText),
			}
		}
	}
	return nil
}

// Verdict is what triage concludes about one log.
type Verdict struct {
	File string `json:"file"`
	// Known is true when a fatal signature matched; Cause is then its first
	// fatal line.
	Known bool   `json:"known"`
	Cause *Match `json:"cause,omitempty"`
	// Notes are the non-fatal matches (at most maxNotes, first ones first).
	Notes []Match `json:"notes"`
	// Tail is the last lines of the log, shown when the cause is unknown.
	Tail      []string `json:"tail"`
	TailStart int      `json:"tail_start"` // line number of Tail[0]
	Lines     int      `json:"lines"`      // lines read
}

const (
	tailLines = 20
	maxNotes  = 10
)

// Scanner feeds a log line by line and keeps what a Verdict needs. It is what
// the runner uses while a server is starting: Line reports a fatal match the
// moment it is seen.
type Scanner struct {
	sigs  *Signatures
	n     int
	cause *Match
	notes []Match
	tail  []string // ring of the last tailLines lines
}

// NewScanner starts a scan of one log.
func (s *Signatures) NewScanner() *Scanner { return &Scanner{sigs: s} }

// Line feeds the next line (without its newline). It returns the match when
// this line is the log's first fatal one, else nil.
func (sc *Scanner) Line(text string) *Match {
	clean := cleanLine(text)
	sc.Skip(clean)
	if strings.HasPrefix(clean, NotePrefix) {
		return nil // the runner's own line, not the server's
	}
	m := sc.sigs.MatchLine(sc.n, clean)
	if m == nil {
		return nil
	}
	if m.Fatal {
		if sc.cause == nil {
			sc.cause = m
			return m
		}
		return nil
	}
	if len(sc.notes) < maxNotes {
		sc.notes = append(sc.notes, *m)
	}
	return nil
}

// NotePrefix starts the lines the matrix runner writes into a cell's log;
// triage never matches them.
const NotePrefix = "### smpatch: "

// Skip counts a line (and keeps it for the tail) without matching it: the
// runner's own notes in a log.
func (sc *Scanner) Skip(text string) {
	sc.n++
	if len(sc.tail) == tailLines {
		copy(sc.tail, sc.tail[1:])
		sc.tail = sc.tail[:tailLines-1]
	}
	sc.tail = append(sc.tail, truncate(cleanLine(text), maxLineText))
}

// Verdict is the conclusion so far.
func (sc *Scanner) Verdict(file string) *Verdict {
	v := &Verdict{File: file, Cause: sc.cause, Known: sc.cause != nil, Lines: sc.n,
		Notes: append([]Match{}, sc.notes...), Tail: append([]string{}, sc.tail...)}
	v.TailStart = sc.n - len(sc.tail) + 1
	if v.Lines == 0 {
		v.TailStart = 0
	}
	return v
}

// maxLineBytes bounds one line read from a log; the rest is dropped.
const maxLineBytes = 1 << 20

// ScanLines calls fn for each line of r (without the newline). A line longer
// than maxLineBytes is cut there rather than failing the scan.
func ScanLines(r io.Reader, fn func(string)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(buf)+len(chunk) <= maxLineBytes {
			buf = append(buf, chunk...)
		}
		if err != nil {
			if len(buf) > 0 {
				fn(string(buf))
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
		if !isPrefix {
			fn(string(buf))
			buf = buf[:0]
		}
	}
}

// Triage reads a whole log and returns its verdict; name is how the log is
// reported.
func (s *Signatures) Triage(name string, r io.Reader) (*Verdict, error) {
	sc := s.NewScanner()
	if err := ScanLines(r, func(l string) { sc.Line(l) }); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return sc.Verdict(name), nil
}

// TriageFile triages the log at path.
func (s *Signatures) TriageFile(path string) (*Verdict, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return s.Triage(path, f)
}

// WriteText prints a verdict for people.
func (v *Verdict) WriteText(w io.Writer) {
	if v.Known {
		c := v.Cause
		fmt.Fprintf(w, "%s: %s\n", v.File, c.Label)
		fmt.Fprintf(w, "  line %d: %s\n", c.Line, c.Text)
		fmt.Fprintf(w, "  means:  %s\n", c.Meaning)
		fmt.Fprintf(w, "  try:    %s\n", c.Try)
	} else {
		fmt.Fprintf(w, "%s: unknown: no fatal signature matched (%d lines)\n", v.File, v.Lines)
	}
	for _, n := range v.Notes {
		fmt.Fprintf(w, "  note: %s at line %d: %s\n", n.Label, n.Line, n.Text)
	}
	if !v.Known && len(v.Tail) > 0 {
		fmt.Fprintf(w, "  last %d lines:\n", len(v.Tail))
		for i, l := range v.Tail {
			fmt.Fprintf(w, "  %6d  %s\n", v.TailStart+i, l)
		}
	}
}
