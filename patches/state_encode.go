package patches

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// state.json's encoder. Its bytes are exactly those of
// json.MarshalIndent(s, "", "  ") for every State (with Entry's and
// FileRecord's MarshalJSON, which it follows field for field): the MAC of
// every journal is made over them, and journals written before it must
// still verify. It is written for these types, without reflection, because
// each apply and revert is a short-lived process that encodes the state a
// few times: building encoding/json's encoders cost more than the
// encoding. Its decoder is state_decode.go.

// encodeState returns s as json.MarshalIndent(s, "", "  ") writes it, with
// no trailing newline.
func encodeState(s *State) ([]byte, error) {
	n := 256
	for _, e := range s.Patches {
		if e != nil {
			n += 512 + 320*len(e.Files)
		}
	}
	return appendState(make([]byte, 0, n), s)
}

// appendState appends the encoding of s (as encodeState) to b.
func appendState(b []byte, s *State) ([]byte, error) {
	b = append(b, "{\n  \"format\": "...)
	b = strconv.AppendInt(b, int64(s.Format), 10)
	b = append(b, ",\n  \"tree\": "...)
	b = appendJSONString(b, s.Tree)
	b = append(b, ",\n  \"kind\": "...)
	b = appendJSONString(b, s.Kind)
	b = append(b, ",\n  \"patches\": "...)
	switch {
	case s.Patches == nil:
		b = append(b, "null"...)
	case len(s.Patches) == 0:
		b = append(b, "[]"...)
	default:
		b = append(b, '[')
		for i, e := range s.Patches {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, "\n    "...)
			var err error
			if b, err = appendEntry(b, e); err != nil {
				return nil, err
			}
		}
		b = append(b, "\n  ]"...)
	}
	if o := s.Owner; o != nil {
		b = append(b, ",\n  \"owner\": {\n    \"uid\": "...)
		b = strconv.AppendInt(b, int64(o.UID), 10)
		b = append(b, ",\n    \"machine\": "...)
		b = appendJSONString(b, o.Machine)
		b = append(b, ",\n    \"mac\": "...)
		b = appendJSONString(b, o.MAC)
		b = append(b, "\n  }"...)
	}
	return append(b, "\n}"...), nil
}

// Indentation of an entry's members (an entry is an element of "patches",
// at depth 2), of the elements of its arrays, and of a file record's
// members.
const (
	entryIn = "\n      "
	elemIn  = "\n        "
	fileIn  = "\n          "
)

// appendEntry appends e as Entry.MarshalJSON writes it, indented as an
// element of "patches".
func appendEntry(b []byte, e *Entry) ([]byte, error) {
	if e == nil {
		return append(b, "null"...), nil
	}
	b = append(b, "{"+entryIn+"\"name\": "...)
	b = appendJSONString(b, e.Name)
	b = append(b, ","+entryIn+"\"project\": "...)
	b = appendJSONString(b, e.Project)
	b = append(b, ","+entryIn+"\"state\": "...)
	b = appendJSONString(b, string(e.State))
	b = append(b, ","+entryIn+"\"variant\": "...)
	b = appendJSONString(b, e.Variant)
	b = appendOptString(b, entryIn, "variant_reason", e.VariantReason)
	b = appendOptString(b, entryIn, "version", e.Version)
	b = appendOptString(b, entryIn, "version_from", e.VersionFrom)
	b = append(b, ","+entryIn+"\"origin\": "...)
	b = appendJSONString(b, e.Origin)
	b = append(b, ","+entryIn+"\"patch_digest\": "...)
	b = appendJSONString(b, e.PatchDigest)
	b = appendOptString(b, entryIn, "catalog_digest", e.CatalogDigest)
	b = append(b, ","+entryIn+"\"tool_version\": "...)
	b = appendJSONString(b, e.ToolVersion)
	b = append(b, ","+entryIn+"\"applied_at\": "...)
	var err error
	if b, err = appendJSONTime(b, e.AppliedAt); err != nil {
		return nil, err
	}
	if len(e.Notes) > 0 {
		b = append(b, ","+entryIn+"\"notes\": "...)
		b = appendStrings(b, e.Notes)
	}
	b = append(b, ","+entryIn+"\"files\": "...)
	switch {
	case e.Files == nil:
		b = append(b, "null"...)
	case len(e.Files) == 0:
		b = append(b, "[]"...)
	default:
		b = append(b, '[')
		for i, f := range e.Files {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, elemIn...)
			b = appendFileRecord(b, f)
		}
		b = append(b, entryIn+"]"...)
	}
	// As encodeDirs: the people's form, and the exact bytes of each when
	// one of them is not UTF-8.
	if len(e.CreatedDirs) > 0 {
		lossy := false
		for _, d := range e.CreatedDirs {
			if !utf8.ValidString(d) {
				lossy = true
				break
			}
		}
		b = append(b, ","+entryIn+"\"created_dirs\": ["...)
		for i, d := range e.CreatedDirs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, elemIn...)
			if lossy {
				d = strings.ToValidUTF8(d, "\uFFFD")
			}
			b = appendJSONString(b, d)
		}
		b = append(b, entryIn+"]"...)
		if lossy {
			b = append(b, ","+entryIn+"\"created_dirs_b64\": ["...)
			for i, d := range e.CreatedDirs {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, elemIn+"\""...)
				b = base64.StdEncoding.AppendEncode(b, []byte(d))
				b = append(b, '"')
			}
			b = append(b, entryIn+"]"...)
		}
	}
	return append(b, "\n    }"...), nil
}

// appendStrings appends a non-empty array of strings at an entry's depth.
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, elemIn...)
		b = appendJSONString(b, s)
	}
	return append(b, entryIn+"]"...)
}

// appendOptString appends the member key: v (after a comma and the
// indentation in) unless v is empty: a string field with omitempty.
func appendOptString(b []byte, in, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',')
	b = append(b, in...)
	b = append(b, '"')
	b = append(b, key...)
	b = append(b, "\": "...)
	return appendJSONString(b, v)
}

// appendFileRecord appends f as FileRecord.MarshalJSON writes it, indented
// as an element of an entry's "files".
func appendFileRecord(b []byte, f *FileRecord) []byte {
	if f == nil {
		return append(b, "null"...)
	}
	b = append(b, "{"+fileIn+"\"path\": "...)
	if utf8.ValidString(f.Path) {
		b = appendJSONString(b, f.Path)
	} else {
		b = appendJSONString(b, strings.ToValidUTF8(f.Path, "\uFFFD"))
		b = append(b, ","+fileIn+"\"path_b64\": \""...)
		b = base64.StdEncoding.AppendEncode(b, []byte(f.Path))
		b = append(b, '"')
	}
	b = appendOptString(b, fileIn, "original_sha256", f.Original)
	b = appendOptString(b, fileIn, "patched_sha256", f.Patched)
	b = appendOptString(b, fileIn, "target_sha256", f.Target)
	if f.TargetDelete {
		b = append(b, ","+fileIn+"\"target_delete\": true"...)
	}
	b = appendOptString(b, fileIn, "before_sha256", f.Before)
	return append(b, elemIn+"}"...)
}

// appendJSONTime appends t as time.Time's MarshalJSON writes it (RFC 3339
// with the nanoseconds it has), failing where it fails, with the error
// json.MarshalIndent returns for the entry then.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	n0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	// The checks of time's strict RFC 3339: a year of four digits, a zone
	// hour below 24.
	var why string
	switch {
	case b[n0+len("9999")] != '-':
		why = "year outside of range [0,9999]"
	case b[len(b)-1] != 'Z':
		c := b[len(b)-len("Z07:00")]
		if '0' <= c && c <= '9' || 10*(b[len(b)-5]-'0')+(b[len(b)-4]-'0') >= 24 {
			why = "timezone hour outside of range [0,23]"
		}
	}
	if why != "" {
		return nil, errors.New("json: error calling MarshalJSON for type *patches.Entry: json: error calling MarshalJSON for type time.Time: Time.MarshalJSON: " + why)
	}
	return append(b, '"'), nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string as encoding/json writes it
// with HTML escaping: ", \ and control characters escaped (\b, \f, \n,
// \r, \t by name, the rest as \u00XX), <, > and & as \u003c, \u003e and
// \u0026, and U+2028 and U+2029 as \u2028 and \u2029. A byte that is not
// part of valid UTF-8 becomes U+FFFD, written as itself
// (encoding/json writes the escape \ufffd): that is what a reader decodes
// and encodes again, so the MAC over a state that held such a byte (a tree
// path, a note) still verifies once read back.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
