package launch

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// logSink is where a cell's output goes: the log file, and a triage scanner
// that reports the first fatal line the moment it is written.
type logSink struct {
	mu      sync.Mutex
	w       io.Writer
	sc      *Scanner
	partial []byte
	fatal   chan struct{} // closed at the first fatal line
	cause   *Match
	last    string // the server's last non-empty line, for the heartbeat
}

func newLogSink(w io.Writer, sigs *Signatures) *logSink {
	return &logSink{w: w, sc: sigs.NewScanner(), fatal: make(chan struct{})}
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.w.Write(p)
	data := p
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			s.partial = append(s.partial, data...)
			if len(s.partial) >= maxLineBytes {
				// A line redrawn with carriage returns for megabytes (a
				// progress bar): match what is drawn so far, keep the rest.
				cut := bytes.LastIndexByte(s.partial, '\r') + 1
				if cut == 0 {
					cut = len(s.partial)
				}
				s.partialMatch(string(s.partial[:cut]))
				s.partial = append(s.partial[:0], s.partial[cut:]...)
			}
			break
		}
		line := data[:i]
		if len(s.partial) > 0 {
			line = append(s.partial, line...)
			s.partial = s.partial[:0]
		}
		s.line(string(bytes.TrimRight(line, "\r")))
		data = data[i+1:]
	}
	return n, err
}

func (s *logSink) partialMatch(l string) {
	if m := s.sc.Partial(l); m != nil && s.cause == nil {
		s.cause = m
		close(s.fatal)
	}
}

func (s *logSink) line(l string) {
	if t := strings.TrimSpace(l); t != "" {
		s.last = shortLine(t)
	}
	if m := s.sc.Line(l); m != nil && s.cause == nil {
		s.cause = m
		close(s.fatal)
	}
}

// Note writes a line of smpatch's own into the log (not triaged).
func (s *logSink) Note(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.line(string(s.partial))
		s.partial = s.partial[:0]
		io.WriteString(s.w, "\n")
	}
	line := NotePrefix + text
	io.WriteString(s.w, line+"\n")
	s.sc.Skip(line)
}

// LastLine is the server's last non-empty line so far (smpatch's own
// notes left out).
func (s *logSink) LastLine() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Fatal is closed once a fatal line has been seen.
func (s *logSink) Fatal() <-chan struct{} { return s.fatal }

// Verdict flushes a last unterminated line and returns the log's verdict.
func (s *logSink) Verdict(file string) *Verdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.line(string(s.partial))
		s.partial = nil
	}
	return s.sc.Verdict(file)
}
