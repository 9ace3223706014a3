package tomlfile

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/lazyre"
)

const (
	// MaxSize is the most bytes a TOML file may have. The largest files
	// smpatch reads (matrices with many presets) are tens of kB.
	MaxSize = 4 << 20
	// MaxDepth is the deepest nesting of arrays, inline tables and dotted
	// key parts a TOML file may have; the parser's memory grows fast with
	// depth, so a hostile file is refused before it is parsed.
	MaxDepth = 64
)

// ReadFile reads path from fsys (the local file system when nil), refusing
// a file larger than MaxSize without reading it all.
func ReadFile(fsys fs.FS, path string) ([]byte, error) {
	return bounded.ReadFile(fsys, path, MaxSize)
}

// Decode checks data against MaxSize and MaxDepth, then decodes it into v.
// file names the source in errors: "file:line: message".
func Decode(file string, data []byte, v any) (toml.MetaData, error) {
	if len(data) > MaxSize {
		return toml.MetaData{}, fmt.Errorf("%s: %d bytes, more than the %d MiB a TOML file may have", file, len(data), MaxSize>>20)
	}
	if line, err := checkDepth(data); err != nil {
		return toml.MetaData{}, Errorf(file, line, "%v", err)
	}
	md, err := toml.Decode(string(data), v)
	if err != nil {
		return md, decodeError(file, err)
	}
	return md, nil
}

// Errorf is the one shape of a file error: "file:line: message", or
// "file: message" when the line is unknown (0).
func Errorf(file string, line int, format string, args ...any) error {
	if line > 0 {
		return fmt.Errorf("%s:%d: %s", file, line, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%s: %s", file, fmt.Sprintf(format, args...))
}

// Unknown returns the first key of md the decoder did not use, leaving out
// keys under the handled prefixes (decoded into generic values and checked
// by hand); lineOf places each candidate and the earliest in the file wins.
// It returns nil when every key was used.
func Unknown(md toml.MetaData, handled [][]string, lineOf func(toml.Key) int) (toml.Key, int) {
	var best toml.Key
	bestLine := 0
next:
	for _, k := range md.Undecoded() {
		for _, h := range handled {
			if len(k) >= len(h) && slices.Equal(k[:len(h)], h) {
				continue next
			}
		}
		l := 0
		if lineOf != nil {
			l = lineOf(k)
		}
		if best == nil || (l > 0 && (bestLine == 0 || l < bestLine)) {
			best, bestLine = k, l
		}
	}
	return best, bestLine
}

// UnknownError is Unknown as an error ("file:line: unknown key \"k\""), or
// nil.
func UnknownError(file string, md toml.MetaData, handled [][]string, lineOf func(toml.Key) int) error {
	k, line := Unknown(md, handled, lineOf)
	if k == nil {
		return nil
	}
	return Errorf(file, line, "unknown key %q", k.String())
}

var plainLineRe = lazyre.New(`^toml: line (\d+)(?: \(last key "([^"]*)"\))?: (.*)$`)

// decodeError turns a decoder error into "file:line: message".
func decodeError(file string, err error) error {
	var pe toml.ParseError
	var ppe *toml.ParseError
	if errors.As(err, &ppe) && ppe != nil {
		pe = *ppe
	}
	if errors.As(err, &pe) || ppe != nil {
		msg := oneLine(pe.Message)
		if pe.LastKey != "" && !strings.Contains(msg, pe.LastKey) {
			msg = fmt.Sprintf("%s (key %q)", msg, pe.LastKey)
		}
		return Errorf(file, pe.Position.Line, "%s", msg)
	}
	// Type mismatches come as plain errors: toml: line N (last key "k"): msg.
	if m := plainLineRe().FindStringSubmatch(oneLine(err.Error())); m != nil {
		n, _ := strconv.Atoi(m[1])
		msg := m[3]
		if m[2] != "" && !strings.Contains(msg, m[2]) {
			msg = fmt.Sprintf("%s (key %q)", msg, m[2])
		}
		return Errorf(file, n, "%s", msg)
	}
	return Errorf(file, 0, "%s", oneLine(err.Error()))
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// checkDepth scans data once, outside strings and comments, for nesting
// deeper than MaxDepth: open arrays and inline tables, plus the dotted
// parts of a key. It returns the line where the limit is passed.
func checkDepth(data []byte) (int, error) {
	line := 1
	depth := 0 // open [ and { inside values
	dots := 0  // dotted key parts on this line, outside values
	inValue := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case '\n':
			line++
			dots = 0
			if depth == 0 {
				inValue = false
			}
		case '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			i--
		case '"', '\'':
			end, nl, ok := skipString(data, i)
			if !ok {
				return line, nil // the decoder says what is wrong
			}
			line += nl
			i = end
		case '=':
			inValue = true
		case '[', '{':
			if !inValue && depth == 0 && c == '[' {
				continue // a table header: its dots count below
			}
			depth++
			if depth > MaxDepth {
				return line, fmt.Errorf("nested more than %d levels deep: not read", MaxDepth)
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		case '.':
			if !inValue || depth > 0 {
				dots++
				if dots > MaxDepth {
					return line, fmt.Errorf("a key of more than %d dotted parts: not read", MaxDepth)
				}
			}
		}
		if depth > 0 && (c == '{' || c == ',') {
			dots = 0
		}
	}
	return 0, nil
}

// skipString returns the index of the closing quote of the string that
// starts at i, and the newlines inside it.
func skipString(data []byte, i int) (end, newlines int, ok bool) {
	q := data[i]
	multi := i+2 < len(data) && data[i+1] == q && data[i+2] == q
	j := i + 1
	if multi {
		j = i + 3
	}
	for ; j < len(data); j++ {
		c := data[j]
		switch {
		case c == '\\' && q == '"':
			if j+1 < len(data) && data[j+1] == '\n' {
				newlines++
			}
			j++
		case c == '\n':
			if !multi {
				return j, newlines, false
			}
			newlines++
		case c == q:
			if !multi {
				return j, newlines, true
			}
			if j+2 < len(data) && data[j+1] == q && data[j+2] == q {
				// Up to two more quotes may close a multi-line string.
				k := j + 3
				for k < len(data) && data[k] == q && k < j+5 {
					k++
				}
				return k - 1, newlines, true
			}
		}
	}
	return j, newlines, false
}
