package launch

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/BurntSushi/toml"

	"github.com/smpatch/smpatch/internal/ctxio"
	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/shell"
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
	// Consequence means the line is what other ranks print once one of them
	// has died (an NCCL watchdog, a collective timeout): when another fatal
	// line came first, that one is the cause.
	Consequence bool `toml:"consequence" json:"consequence,omitempty"`
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

	preOnce sync.Once
	pre     *prefilter // nil when some signature has no required literal
}

// All returns the signatures in the order they are tried.
func (s *Signatures) All() []*Signature { return s.list }

type signatureFile struct {
	Signature []*Signature `toml:"signature"`
}

// MaxSignatures and MaxPatternSize bound a signatures file: the built-in
// one has a few dozen patterns of under 200 bytes.
const (
	MaxSignatures  = 1000
	MaxPatternSize = 1024
)

// ParseSignatures reads a signature file's bytes; name is used in errors
// ("name:line: ...").
func ParseSignatures(name string, data []byte) (*Signatures, error) {
	var f signatureFile
	md, err := tomlfile.Decode(name, data, &f)
	if err != nil {
		return nil, err
	}
	lines := tomlfile.IndexLines(data)
	// The line of signature i's [[signature]] header, or of its key.
	lineOf := func(i int, key ...string) int {
		return max(lines.Line(append(toml.Key{"signature", strconv.Itoa(i)}, key...)), 1)
	}
	if err := tomlfile.UnknownError(name, md, nil, func(k toml.Key) int { return max(lines.Line(k), 1) }); err != nil {
		return nil, err
	}
	if len(f.Signature) == 0 {
		return nil, fmt.Errorf("%s:1: no [[signature]] entries", name)
	}
	// Every line of a log is tried against every signature, so their number
	// and size bound triage's time: a 3 MB alternation once took minutes
	// over a 650 kB log.
	if len(f.Signature) > MaxSignatures {
		return nil, fmt.Errorf("%s:%d: more than %d signatures in one file", name, lineOf(MaxSignatures), MaxSignatures)
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
		// Printed one to a line by triage, into pipes too: a label, meaning
		// or advice holding a line break would spoof a line of its own.
		for _, f := range []struct{ key, v string }{{"label", s.Label}, {"meaning", s.Meaning}, {"try", s.Try}} {
			if err := shell.Check(f.v); err != nil {
				return nil, fmt.Errorf("%s:%d: signature %q: %s: %v", name, lineOf(i, f.key), s.Label, f.key, err)
			}
		}
		if prev, ok := seen[s.Label]; ok {
			return nil, fmt.Errorf("%s:%d: label %q already used at line %d", name, line, s.Label, prev)
		}
		seen[s.Label] = line
		if len(s.Pattern) > MaxPatternSize {
			return nil, fmt.Errorf("%s:%d: signature %q: pattern of %d bytes, more than %d", name, lineOf(i, "pattern"), s.Label, len(s.Pattern), MaxPatternSize)
		}
		re, err := lazyre.Compile(s.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: signature %q: bad pattern: %w", name, lineOf(i, "pattern"), s.Label, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("%s:%d: signature %q: pattern matches every line", name, lineOf(i, "pattern"), s.Label)
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
	// Rank is the process that wrote the line ("3" for "TP3" or "[rank3]"),
	// read from the line's prefix or the nearest line above it that has one;
	// for per-rank logs without a prefix, from the file name.
	Rank string `json:"rank,omitempty"`
	// Time is the line's timestamp as written, when it has one.
	Time string `json:"time,omitempty"`
	// Consequence marks a fatal line that follows the cause and is of a kind
	// (an NCCL watchdog, a collective timeout) that a dead peer produces.
	Consequence bool   `json:"consequence,omitempty"`
	File        string `json:"file,omitempty"` // the log, in a verdict over several ranks' logs

	at stamp
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

// TriageFile triages the log at path.
func (s *Signatures) TriageFile(path string) (*Verdict, error) {
	return s.TriageFileContext(context.Background(), path)
}

// TriageFileContext triages the log at path and stops when ctx is done. The
// log is opened without blocking, so a named pipe nobody writes to reads as
// empty instead of hanging the open, and a pipe being written (a process
// substitution) is read as it comes; a cancelled ctx closes the file, which
// ends a read blocked on a pipe, and is checked before every read, which
// ends an endless device (/dev/zero).
func (s *Signatures) TriageFileContext(ctx context.Context, path string) (*Verdict, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	v, err := s.triage(ctx, path, ctxio.Reader(ctx, f))
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", path, ctx.Err())
	}
	return v, err
}

// triageFS triages name in fsys (a task's output under the results
// directory), reported as path.
func triageFS(s *Signatures, fsys fs.FS, name, path string) (*Verdict, error) {
	f, err := openRegular(fsys, name)
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
		where := fmt.Sprintf("line %d", c.Line)
		if c.File != "" {
			where = c.File + ":" + fmt.Sprint(c.Line)
		}
		fmt.Fprintf(w, "  %s: %s\n", where, c.Text)
		if c.Rank != "" {
			at := ""
			if c.Time != "" {
				at = " at " + c.Time
			}
			fmt.Fprintf(w, "  rank:   %s (the first fatal line in time%s)\n", c.Rank, at)
		}
		fmt.Fprintf(w, "  means:  %s\n", c.Meaning)
		fmt.Fprintf(w, "  try:    %s\n", c.Try)
		for _, f := range v.Fatal {
			if !f.Consequence {
				continue
			}
			where := fmt.Sprintf("line %d", f.Line)
			if f.File != "" {
				where = f.File + ":" + fmt.Sprint(f.Line)
			}
			rank := ""
			if f.Rank != "" {
				rank = " rank " + f.Rank
			}
			fmt.Fprintf(w, "  then:  %s%s at %s (a consequence): %s\n", f.Label, rank, where, f.Text)
		}
	} else if ready := v.ready(); ready != nil {
		// A healthy log: one line for it, and the server's last line.
		fmt.Fprintf(w, "%s: no fatal line: the server came up (line %d: %s)\n", v.File, ready.Line, ready.Text)
		if v.LastLine != nil {
			fmt.Fprintf(w, "  last server line %d: %s\n", v.LastLine.Line, v.LastLine.Text)
		}
	} else {
		fmt.Fprintf(w, "%s: unknown: no fatal signature matched (%d lines)\n", v.File, v.Lines)
		if v.LastLine != nil {
			fmt.Fprintf(w, "  last server line %d: %s\n", v.LastLine.Line, v.LastLine.Text)
		}
	}
	ready := v.ready()
	for _, n := range v.Notes {
		if ready != nil && n.Label == readyLabel {
			continue
		}
		where := fmt.Sprintf("line %d", n.Line)
		if n.File != "" {
			where = n.File + ":" + fmt.Sprint(n.Line)
		}
		fmt.Fprintf(w, "  note: %s at %s: %s\n", n.Label, where, n.Text)
	}
	if !v.Known && ready == nil && len(v.Tail) > 0 {
		fmt.Fprintf(w, "  last %d lines:\n", len(v.Tail))
		for i, l := range v.Tail {
			fmt.Fprintf(w, "  %6d  %s\n", v.TailStart+i, l)
		}
	}
}

// readyLabel is the note of a server that came up (signatures/default.toml).
const readyLabel = "server-ready"

// ready is the line saying the server came up, when no fatal line
// matched: the log is then a healthy one.
func (v *Verdict) ready() *Match {
	if v.Known {
		return nil
	}
	for i := range v.Notes {
		if v.Notes[i].Label == readyLabel {
			return &v.Notes[i]
		}
	}
	return nil
}
