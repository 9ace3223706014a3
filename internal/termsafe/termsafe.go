package termsafe

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// unsafeRune reports whether r must not reach a terminal raw: C0 controls
// but tab (and newline when keepNL), DEL, C1 controls, and the bidi
// overrides that reorder what a line shows.
func unsafeRune(r rune, keepNL bool) bool {
	switch {
	case r == '\t':
		return false
	case r == '\n':
		return !keepNL
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

func escape(s string, keepNL bool) string {
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || unsafeRune(r, keepNL) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r, keepNL):
			switch {
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r < 0x80:
				fmt.Fprintf(&b, `\x%02x`, r)
			default:
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Line escapes s for one line of output: line breaks are escaped too.
func Line(s string) string { return escape(s, false) }

// Text escapes s for output that may span lines: newlines stay.
func Text(s string) string { return escape(s, true) }

// Writer escapes everything written through it as Text does. A UTF-8
// sequence split across writes is kept whole.
type Writer struct {
	w    io.Writer
	tail []byte // an incomplete UTF-8 sequence from the last write
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write implements io.Writer; it reports len(p) when the escaped bytes
// were written.
func (t *Writer) Write(p []byte) (int, error) {
	buf := append(t.tail, p...)
	t.tail = nil
	// Hold back a trailing incomplete (but so far valid) UTF-8 sequence.
	for k := 1; k <= 3 && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if c < 0x80 {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(buf[len(buf)-k:]) {
				t.tail = append([]byte(nil), buf[len(buf)-k:]...)
				buf = buf[:len(buf)-k]
			}
			break
		}
	}
	if _, err := io.WriteString(t.w, Text(string(buf))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a held incomplete sequence (escaped).
func (t *Writer) Flush() error {
	if len(t.tail) == 0 {
		return nil
	}
	_, err := io.WriteString(t.w, Text(string(t.tail)))
	t.tail = nil
	return err
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Wrap returns w itself when it is not a terminal (files and pipes get the
// bytes as they are), else a Writer escaping what reaches the terminal.
func Wrap(w io.Writer) io.Writer {
	if IsTerminal(w) {
		return NewWriter(w)
	}
	return w
}

// ProgressWriter escapes like Writer but lets carriage returns through, so
// a progress line written by someone else (a git server's sideband) can
// still redraw itself; everything else that could drive the terminal is
// escaped.
type ProgressWriter struct{ w *Writer }

// NewProgressWriter returns a ProgressWriter over w.
func NewProgressWriter(w io.Writer) *ProgressWriter { return &ProgressWriter{w: NewWriter(w)} }

// Write implements io.Writer.
func (p *ProgressWriter) Write(b []byte) (int, error) {
	for i, seg := range strings.Split(string(b), "\r") {
		if i > 0 {
			if err := p.w.flushRaw([]byte{'\r'}); err != nil {
				return 0, err
			}
		}
		if _, err := p.w.Write([]byte(seg)); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// flushRaw writes b as it is, after any held-back partial sequence
// (escaped, since it can no longer complete).
func (t *Writer) flushRaw(b []byte) error {
	if len(t.tail) > 0 {
		if _, err := io.WriteString(t.w, Text(string(t.tail))); err != nil {
			return err
		}
		t.tail = nil
	}
	_, err := t.w.Write(b)
	return err
}

// Underlying is the writer t escapes for.
func (t *Writer) Underlying() io.Writer { return t.w }
