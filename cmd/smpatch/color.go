package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/termsafe"
)

// Colour for people at a terminal: diff lines, and the ok/FAIL words of
// requirement checks. --color auto (the default) colours only a terminal
// and never when $NO_COLOR is set (https://no-color.org) or TERM=dumb;
// always and never mean what they say.

const (
	ansiReset = "\x1b[0m"
	ansiBold  = "\x1b[1m"
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiCyan  = "\x1b[36m"
)

// painter colours text, or passes it through when off. When it writes
// straight to a terminal (past the escaping writer stdout has there), it
// escapes the text it colours itself (escape), so that only its own codes
// reach the terminal raw.
type painter struct{ on, escape bool }

// colorTarget is where coloured output for w goes, and the painter for it:
// stdout on a terminal is an escaping writer (termsafe), which would show
// the colour codes as text, so coloured output goes to the terminal itself
// with every piece of text escaped by the painter.
func (g *Globals) colorTarget(w io.Writer) (io.Writer, painter) {
	p := g.painterFor(w)
	if !p.on {
		return w, p
	}
	if _, ok := w.(*termsafe.Writer); ok {
		if raw := RawWriter(w); raw != w {
			return raw, painter{on: true, escape: true}
		}
	}
	return w, p
}

// text is s as it may be written by this painter: escaped when the painter
// writes to a terminal directly.
func (p painter) text(s string) string {
	if p.escape {
		return termsafe.Line(s)
	}
	return s
}

func (g *Globals) addColorFlag(root *cobra.Command) {
	root.PersistentFlags().StringVar(&g.Color, "color", "auto", "colour diffs and ok/FAIL lines: auto (a terminal, unless $NO_COLOR is set), always or never")
	_ = root.RegisterFlagCompletionFunc("color", cobra.FixedCompletions([]string{"auto", "always", "never"}, cobra.ShellCompDirectiveNoFileComp))
}

func checkColorFlag(s string) error {
	switch s {
	case "auto", "always", "never":
		return nil
	}
	return withCode(exitUsage, fmt.Errorf("--color %q: want auto, always or never", s))
}

// painterFor is the painter for output written to w.
func (g *Globals) painterFor(w io.Writer) painter {
	switch g.Color {
	case "always":
		return painter{on: true}
	case "never":
		return painter{}
	}
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return painter{}
	}
	_, wrapped := w.(*termsafe.Writer) // stdout on a terminal
	return painter{on: wrapped || IsTerminal(w)}
}

func (p painter) paint(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return code + p.text(s) + ansiReset
}

// okWord is "ok  " in green or "FAIL" in red.
func (p painter) okWord(ok bool) string {
	if ok {
		return p.paint(ansiGreen, "ok  ")
	}
	return p.paint(ansiRed, "FAIL")
}

// word colours "ok" and "FAIL" without padding.
func (p painter) word(ok bool) string {
	if ok {
		return p.paint(ansiGreen, "ok")
	}
	return p.paint(ansiRed, "FAIL")
}

// diff colours a unified diff line by line: file headers bold, hunk
// headers cyan, removed lines red, added lines green.
func (p painter) diff(d []byte) []byte {
	if !p.on {
		return d
	}
	if p.escape {
		d = []byte(termsafe.Text(string(d)))
	}
	var out bytes.Buffer
	for len(d) > 0 {
		line := d
		if i := bytes.IndexByte(d, '\n'); i >= 0 {
			line = d[:i+1]
		}
		d = d[len(line):]
		body := bytes.TrimSuffix(line, []byte("\n"))
		code := ""
		switch {
		case bytes.HasPrefix(body, []byte("+++ ")), bytes.HasPrefix(body, []byte("--- ")), bytes.HasPrefix(body, []byte("diff ")):
			code = ansiBold
		case bytes.HasPrefix(body, []byte("@@")):
			code = ansiCyan
		case bytes.HasPrefix(body, []byte("+")):
			code = ansiGreen
		case bytes.HasPrefix(body, []byte("-")):
			code = ansiRed
		}
		if code == "" || len(body) == 0 {
			out.Write(line)
			continue
		}
		out.WriteString(code)
		out.Write(body)
		out.WriteString(ansiReset)
		out.Write(line[len(body):])
	}
	return out.Bytes()
}

// IsTerminal reports whether w is a terminal (progress goes there only).
func IsTerminal(w io.Writer) bool {
	if _, ok := w.(*termsafe.Writer); ok {
		return true // termsafe wraps terminals only
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// RawWriter is the terminal behind an escaping writer, for output that
// must drive the terminal itself (colour, a redrawn progress line) and
// escapes what it shows on its own; any other writer is returned as it is.
func RawWriter(w io.Writer) io.Writer {
	if t, ok := w.(*termsafe.Writer); ok {
		return t.Underlying()
	}
	return w
}
