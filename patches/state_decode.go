package patches

import (
	"encoding/base64"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// state.json's decoder for the shape smpatch's encoder writes
// (state_encode.go): the members of State, Entry, FileRecord and Owner by
// their exact names, each at most once, strings, integers, true and
// false, and null where the encoder writes it. It fills the types
// directly, without reflection: each revert or status is a short-lived
// process that reads the state once, and building encoding/json's
// reflected decoders cost more than the decoding.
//
// It is a fast path, not a second reading: for any input it does not
// fully understand (another key or a key in another case, a key twice, a
// number that is not an integer, a string escape JSON does not allow,
// trailing bytes, a path_b64 that does not check) it gives up, and the
// caller decodes with encoding/json, so the state and the error are
// encoding/json's for every input. What it accepts it reads as
// encoding/json reads it, with Entry's and FileRecord's UnmarshalJSON:
// strings unescaped as encoding/json unescapes them (bytes that are not
// UTF-8 and lone surrogates become U+FFFD), times by time.Time's own
// UnmarshalJSON over the literal, [] as an empty slice and null as nil.

// decodeState decodes data as state.json when it is in the shape the
// encoder writes; ok is false, and s nil, when it is not.
func decodeState(data []byte) (s *State, ok bool) {
	d := stateDecoder{b: data, src: string(data)}
	s, ok = d.state()
	if !ok {
		return nil, false
	}
	d.ws()
	if d.i != len(d.b) {
		return nil, false
	}
	return s, true
}

// stateDecoder reads b from i on. src holds the same bytes as a string,
// so that a string without escapes is a substring of it rather than a copy
// of its own.
type stateDecoder struct {
	b   []byte
	src string
	i   int
}

// ws skips JSON whitespace.
func (d *stateDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips whitespace and reports whether the next byte is c, consuming
// it if so.
func (d *stateDecoder) next(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// null consumes the literal null if it comes next.
func (d *stateDecoder) null() bool {
	d.ws()
	if strings.HasPrefix(d.src[d.i:], "null") {
		d.i += len("null")
		return true
	}
	return false
}

// object reads a JSON object whose members member reads: it is called
// with the key, the ':' consumed, and reads the value. A key may contain
// no escape and, as seen's bit n (member's result), come only once.
func (d *stateDecoder) object(member func(key string) (bit uint32, ok bool)) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	var seen uint32
	for {
		if !d.next('"') {
			return false
		}
		start := d.i
		for d.i < len(d.b) && d.b[d.i] != '"' {
			if c := d.b[d.i]; c == '\\' || c < 0x20 {
				return false
			}
			d.i++
		}
		if d.i == len(d.b) {
			return false
		}
		key := d.src[start:d.i]
		d.i++
		if !d.next(':') {
			return false
		}
		bit, ok := member(key)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

// array reads a JSON array, elem reading each element; n is how many.
func (d *stateDecoder) array(elem func() bool) (n int, ok bool) {
	if !d.next('[') {
		return 0, false
	}
	if d.next(']') {
		return 0, true
	}
	for {
		if !elem() {
			return 0, false
		}
		n++
		if d.next(',') {
			continue
		}
		return n, d.next(']')
	}
}

// str reads a JSON string, unescaped as encoding/json unescapes it.
func (d *stateDecoder) str() (string, bool) {
	if !d.next('"') {
		return "", false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return d.src[start : d.i-1], true
		case c == '\\' || c < 0x20:
			return d.strSlow(start)
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && n == 1 {
				return d.strSlow(start)
			}
			d.i += n
		}
	}
	return "", false
}

// strSlow reads the rest of a string that began at start (after its
// quote) and has an escape or a byte that is not UTF-8, as encoding/json's
// scanner and unquote read it: the escapes \" \\ \/ \b \f \n \r \t and
// \uXXXX, a surrogate pair as its character and any other surrogate as
// U+FFFD, and each byte that is not part of valid UTF-8 as U+FFFD. A
// control character or another escape ends the fast path.
func (d *stateDecoder) strSlow(start int) (string, bool) {
	out := make([]byte, 0, d.i-start+32)
	out = append(out, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(out), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return "", false
			}
			switch e := d.b[d.i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(d.b[d.i:])
				if r < 0 {
					return "", false
				}
				d.i += 6
				if utf16.IsSurrogate(r) {
					if dec := utf16.DecodeRune(r, hex4(d.b[d.i:])); dec != utf8.RuneError {
						d.i += 6
						out = utf8.AppendRune(out, dec)
						continue
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return "", false
			}
			d.i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			d.i++
		default:
			r, n := utf8.DecodeRune(d.b[d.i:])
			out = utf8.AppendRune(out, r)
			d.i += n
		}
	}
	return "", false
}

// hex4 is the code unit of the escape \uXXXX at the start of b, or -1.
func hex4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// strs reads an array of strings ([] as an empty slice).
func (d *stateDecoder) strs() ([]string, bool) {
	out := []string{}
	_, ok := d.array(func() bool {
		s, ok := d.str()
		out = append(out, s)
		return ok
	})
	return out, ok
}

// int reads an integer that fits in 64 bits: -?(0|[1-9][0-9]*), not
// followed by a fraction or an exponent.
func (d *stateDecoder) int() (int, bool) {
	d.ws()
	neg := d.i < len(d.b) && d.b[d.i] == '-'
	if neg {
		d.i++
	}
	start := d.i
	var u uint64
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		if d.i-start == 19 {
			return 0, false
		}
		u = u*10 + uint64(d.b[d.i]-'0')
		d.i++
	}
	switch n := d.i - start; {
	case n == 0, n > 1 && d.b[start] == '0':
		return 0, false
	}
	if d.i < len(d.b) {
		if c := d.b[d.i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return int(-int64(u)), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int(u), true
}

// bool reads true or false.
func (d *stateDecoder) bool() (v, ok bool) {
	d.ws()
	switch {
	case strings.HasPrefix(d.src[d.i:], "true"):
		d.i += len("true")
		return true, true
	case strings.HasPrefix(d.src[d.i:], "false"):
		d.i += len("false")
		return false, true
	}
	return false, false
}

// time reads a JSON string as time.Time's UnmarshalJSON reads it: the
// literal, quotes and escapes as they are.
func (d *stateDecoder) time() (time.Time, bool) {
	d.ws()
	start := d.i
	if _, ok := d.str(); !ok {
		return time.Time{}, false
	}
	var t time.Time
	if err := t.UnmarshalJSON(d.b[start:d.i]); err != nil {
		return time.Time{}, false
	}
	return t, true
}

func (d *stateDecoder) state() (*State, bool) {
	s := &State{}
	ok := d.object(func(key string) (uint32, bool) {
		var ok bool
		switch key {
		case "format":
			s.Format, ok = d.int()
			return 1 << 0, ok
		case "tree":
			s.Tree, ok = d.str()
			return 1 << 1, ok
		case "kind":
			s.Kind, ok = d.str()
			return 1 << 2, ok
		case "patches":
			if d.null() {
				s.Patches = nil
				return 1 << 3, true
			}
			s.Patches = []*Entry{}
			_, ok = d.array(func() bool {
				if d.null() {
					s.Patches = append(s.Patches, nil)
					return true
				}
				e, ok := d.entry()
				s.Patches = append(s.Patches, e)
				return ok
			})
			return 1 << 3, ok
		case "owner":
			s.Owner, ok = d.owner()
			return 1 << 4, ok
		}
		return 0, false
	})
	return s, ok
}

func (d *stateDecoder) owner() (*Owner, bool) {
	o := &Owner{}
	ok := d.object(func(key string) (uint32, bool) {
		var ok bool
		switch key {
		case "uid":
			o.UID, ok = d.int()
			return 1 << 0, ok
		case "machine":
			o.Machine, ok = d.str()
			return 1 << 1, ok
		case "mac":
			o.MAC, ok = d.str()
			return 1 << 2, ok
		}
		return 0, false
	})
	return o, ok
}

// entry reads an entry as Entry.UnmarshalJSON does, created_dirs_b64
// included.
func (d *stateDecoder) entry() (*Entry, bool) {
	e := &Entry{}
	var dirs, dirsB64 []string
	ok := d.object(func(key string) (uint32, bool) {
		var ok bool
		var state string
		switch key {
		case "name":
			e.Name, ok = d.str()
			return 1 << 0, ok
		case "project":
			e.Project, ok = d.str()
			return 1 << 1, ok
		case "state":
			state, ok = d.str()
			e.State = EntryState(state)
			return 1 << 2, ok
		case "variant":
			e.Variant, ok = d.str()
			return 1 << 3, ok
		case "variant_reason":
			e.VariantReason, ok = d.str()
			return 1 << 4, ok
		case "version":
			e.Version, ok = d.str()
			return 1 << 5, ok
		case "version_from":
			e.VersionFrom, ok = d.str()
			return 1 << 6, ok
		case "origin":
			e.Origin, ok = d.str()
			return 1 << 7, ok
		case "patch_digest":
			e.PatchDigest, ok = d.str()
			return 1 << 8, ok
		case "catalog_digest":
			e.CatalogDigest, ok = d.str()
			return 1 << 9, ok
		case "tool_version":
			e.ToolVersion, ok = d.str()
			return 1 << 10, ok
		case "applied_at":
			e.AppliedAt, ok = d.time()
			return 1 << 11, ok
		case "notes":
			e.Notes, ok = d.strs()
			return 1 << 12, ok
		case "files":
			if d.null() {
				e.Files = nil
				return 1 << 13, true
			}
			e.Files = []*FileRecord{}
			_, ok = d.array(func() bool {
				if d.null() {
					e.Files = append(e.Files, nil)
					return true
				}
				f, ok := d.fileRecord()
				e.Files = append(e.Files, f)
				return ok
			})
			return 1 << 13, ok
		case "created_dirs":
			dirs, ok = d.strs()
			return 1 << 14, ok
		case "created_dirs_b64":
			dirsB64, ok = d.strs()
			return 1 << 15, ok
		}
		return 0, false
	})
	if !ok {
		return nil, false
	}
	var err error
	if e.CreatedDirs, err = decodeDirs(dirs, dirsB64); err != nil {
		return nil, false
	}
	return e, true
}

// fileRecord reads a file record as FileRecord.UnmarshalJSON does,
// path_b64 included.
func (d *stateDecoder) fileRecord() (*FileRecord, bool) {
	f := &FileRecord{}
	var pathB64 string
	ok := d.object(func(key string) (uint32, bool) {
		var ok bool
		switch key {
		case "path":
			f.Path, ok = d.str()
			return 1 << 0, ok
		case "path_b64":
			pathB64, ok = d.str()
			return 1 << 1, ok
		case "original_sha256":
			f.Original, ok = d.str()
			return 1 << 2, ok
		case "patched_sha256":
			f.Patched, ok = d.str()
			return 1 << 3, ok
		case "target_sha256":
			f.Target, ok = d.str()
			return 1 << 4, ok
		case "target_delete":
			f.TargetDelete, ok = d.bool()
			return 1 << 5, ok
		case "before_sha256":
			f.Before, ok = d.str()
			return 1 << 6, ok
		}
		return 0, false
	})
	if !ok {
		return nil, false
	}
	if pathB64 != "" {
		raw, err := base64.StdEncoding.DecodeString(pathB64)
		if err != nil || strings.ToValidUTF8(string(raw), "\uFFFD") != f.Path {
			return nil, false
		}
		f.Path = string(raw)
	}
	return f, true
}
