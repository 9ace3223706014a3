package tomlfile

import (
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// Lines says on which line of a TOML file a key or a table header is: the
// decoder keeps key positions to itself, and an error about a value names
// the line of its key. It reads the file once (IndexLines), as a tolerant
// scanner of text that has already been decoded, not as a parser.
type Lines struct {
	lines []lineInfo
}

// lineInfo is one line that names something: a table header (header set,
// name the table, idx its index among [[name]] or -1) or a key (full: the
// dotted key with its table, cur and idx the table it is in).
type lineInfo struct {
	n      int
	header bool
	name   string // header: the table
	full   string // key: table + "." + key
	cur    string // key: the table it is in
	idx    int    // the [[table]] index it is in, -1 for a plain table
}

var (
	tableHeaderRE = lazyre.New(`^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?`)
	keyRE         = lazyre.New(`^\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.\- ]+?)\s*=`)
)

// IndexLines reads every table header and key line of data.
func IndexLines(data []byte) *Lines {
	l := &Lines{}
	cur := ""
	count := map[string]int{}
	curIdx := -1
	inMulti := ""
	for i, ln := range strings.Split(string(data), "\n") {
		n := i + 1
		if inMulti != "" {
			if strings.Count(ln, inMulti)%2 == 1 {
				inMulti = ""
			}
			continue
		}
		trim := strings.TrimSpace(ln)
		if strings.HasPrefix(trim, "#") || trim == "" {
			continue
		}
		if strings.HasPrefix(trim, "[") {
			if m := tableHeaderRE().FindStringSubmatch(ln); m != nil {
				name := normKey(m[2])
				cur = name
				curIdx = -1
				if m[1] == "[[" {
					curIdx = count[name]
					count[name]++
				}
				l.lines = append(l.lines, lineInfo{n: n, header: true, name: name, idx: curIdx})
				continue
			}
		}
		for _, q := range []string{`"""`, `'''`} {
			if strings.Count(ln, q)%2 == 1 {
				inMulti = q
			}
		}
		m := keyRE().FindStringSubmatch(ln)
		if m == nil {
			continue
		}
		full := normKey(m[1])
		if cur != "" {
			full = cur + "." + full
		}
		l.lines = append(l.lines, lineInfo{n: n, full: full, cur: cur, idx: curIdx})
	}
	return l
}

// AnyElement, given as In's idx, finds a key in any element of an array
// of tables, or in a plain table.
const AnyElement = -2

// In is the 1-based line of key inside table ("" for the top level): in
// the idx-th [[table]] element (0-based), in a plain [table] when idx is
// -1, anywhere with AnyElement. An empty key finds the table's header. A
// key written as a dotted key in a parent table (requires.cuda_min = ...)
// is found too. It is 0 when there is none.
func (l *Lines) In(table string, idx int, key string) int {
	want := key
	if table != "" {
		want = table + "." + key
	}
	for _, li := range l.lines {
		if li.header {
			if key == "" && li.name == table && (idx == AnyElement || idx == li.idx || (idx == -1 && li.idx == -1)) {
				return li.n
			}
			continue
		}
		if key == "" || li.full != want {
			continue
		}
		if idx == AnyElement || (idx == -1 && li.idx == -1) || (idx >= 0 && li.cur == table && li.idx == idx) {
			return li.n
		}
	}
	return 0
}

// Of is the line of the key k as the decoder names keys (its tables, then
// the key itself; an element of an array of tables is not numbered): in
// any element, else the header of the table k names, else 0. It is the
// lineOf that Unknown and UnknownError take.
func (l *Lines) Of(k toml.Key) int {
	if len(k) == 0 {
		return 0
	}
	if n := l.In(strings.Join(k[:len(k)-1], "."), AnyElement, k[len(k)-1]); n > 0 {
		return n
	}
	return l.In(k.String(), AnyElement, "")
}

// normKey turns a written key (`"a" . b`) into its dotted form (a.b).
func normKey(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}
