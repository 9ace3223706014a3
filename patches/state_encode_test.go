package patches

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/smpatch/smpatch/source"
)

// marshalIndentState is the encoding encodeState replaces, kept as its
// oracle: encoding/json with Entry's and FileRecord's MarshalJSON, except
// that a byte that is not valid UTF-8 is U+FFFD itself, not the escape
// \ufffd encoding/json writes for it (what a reader decodes encodes back
// to the character, so only that keeps the MAC of such a state).
func marshalIndentState(s *State) ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return unescapeReplacement(b), nil
}

// unescapeReplacement replaces each \ufffd escape of JSON text by U+FFFD;
// an escaped backslash followed by "ufffd" is left alone.
func unescapeReplacement(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if bytes.HasPrefix(b[i+1:], []byte("ufffd")) {
			out = append(out, "\uFFFD"...)
			i += 5
			continue
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

// checkRoundTrip fails unless s, encoded, decoded as a reader decodes
// state.json and encoded again, gives the same bytes: the property the MAC
// rests on.
// (A zone whose offset has seconds is written to the minute, as RFC 3339
// allows, so it reads back as another zone: smpatch writes times in UTC.)
func checkRoundTrip(t *testing.T, s *State) {
	t.Helper()
	for _, e := range s.Patches {
		if e == nil {
			continue
		}
		if _, off := e.AppliedAt.Zone(); off%60 != 0 {
			return
		}
	}
	first, err := encodeState(s)
	if err != nil {
		return
	}
	var back State
	if err := json.Unmarshal(first, &back); err != nil {
		t.Fatalf("decoding what encodeState wrote: %v\n%s", err, first)
	}
	second, err := encodeState(&back)
	if err != nil {
		t.Fatalf("encoding the state read back: %v", err)
	}
	if !bytes.Equal(first, second) {
		i := 0
		for i < len(first) && i < len(second) && first[i] == second[i] {
			i++
		}
		t.Fatalf("read back and encoded again, the state differs at byte %d:\nfirst  %q\nsecond %q", i, first[max(0, i-40):min(len(first), i+40)], second[max(0, i-40):min(len(second), i+40)])
	}
}

// checkSameEncoding fails unless encodeState and encoding/json agree on s:
// the same bytes, or both an error with the same message.
func checkSameEncoding(t *testing.T, s *State) {
	t.Helper()
	want, werr := marshalIndentState(s)
	got, gerr := encodeState(s)
	switch {
	case werr != nil || gerr != nil:
		if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
			t.Fatalf("errors differ:\n got %v\nwant %v", gerr, werr)
		}
	case !bytes.Equal(got, want):
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("encodings differ at byte %d:\n got %q\nwant %q", i, got[max(0, i-40):min(len(got), i+40)], want[max(0, i-40):min(len(want), i+40)])
	}
}

// stateReader builds a State from fuzz input: every string field takes
// arbitrary bytes, slices are nil, empty or filled, pointers nil or not,
// and times have any nanoseconds, offsets (seconds included) and years,
// out-of-range ones too.
type stateReader struct{ b []byte }

func (r *stateReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *stateReader) uint64() uint64 {
	var x [8]byte
	n := copy(x[:], r.b)
	r.b = r.b[n:]
	return binary.LittleEndian.Uint64(x[:])
}

// str is a string of up to 63 bytes, or one of the strings a JSON
// encoder treats specially.
func (r *stateReader) str() string {
	c := r.byte()
	if c >= 0xf0 {
		special := []string{"", "<script>&amp;</script>", "\u2028\u2029", "\ufffd", "\xff\xfe", "\x00\x1f\x7f", "\b\f\n\r\t\"\\",
			"é\xc3", "\xe2\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", `"mac": ""`, "日本語", "a\xc0\xafb", "\U0001F600", "/"}
		return special[int(c-0xf0)]
	}
	n := min(int(c&0x3f), len(r.b))
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *stateReader) strs() []string {
	switch c := r.byte(); c % 4 {
	case 0:
		return nil
	case 1:
		return []string{}
	default:
		out := make([]string, int(c>>2)%5+1)
		for i := range out {
			out[i] = r.str()
		}
		return out
	}
}

func (r *stateReader) time() time.Time {
	mode := r.byte()
	sec := int64(r.uint64())
	nsec := int64(r.uint64() % 1e9)
	switch mode % 8 {
	case 0:
		return time.Time{}
	case 1, 2, 3:
		// Years 1 to 9999, mostly.
		sec = -62135596800 + int64(uint64(sec)%(253402300800+62135596800))
	case 4:
		// Around the ends of the range and year 0.
		sec = -62135596800 - 400*86400 + sec%(800*86400)
		if mode&0x80 != 0 {
			sec += 253402300800 + 62135596800
		}
	}
	t := time.Unix(sec, nsec)
	switch z := r.byte(); z % 4 {
	case 0:
		return t.UTC()
	case 1:
		// Any offset of up to two days, seconds included.
		off := int(int32(r.uint64()) % (48 * 3600))
		return t.In(time.FixedZone("Z", off))
	case 2:
		// Whole quarter hours, up to a little over a day.
		off := (int(int8(r.byte())) % 104) * 900
		return t.In(time.FixedZone("X", off))
	default:
		if z&0x80 != 0 {
			// Nanoseconds with trailing zeros.
			t = t.Truncate(time.Duration(z&0x7) * time.Millisecond)
		}
		return t.In(time.FixedZone("", 3600))
	}
}

func (r *stateReader) fileRecord() *FileRecord {
	if r.byte()%8 == 0 {
		return nil
	}
	return &FileRecord{Path: r.str(), Original: r.str(), Patched: r.str(), Target: r.str(), TargetDelete: r.byte()%2 == 1, Before: r.str()}
}

func (r *stateReader) entry() *Entry {
	if r.byte()%8 == 0 {
		return nil
	}
	e := &Entry{Name: r.str(), Project: r.str(), State: EntryState(r.str()), Variant: r.str(), VariantReason: r.str(),
		Version: r.str(), VersionFrom: r.str(), Origin: r.str(), PatchDigest: r.str(), CatalogDigest: r.str(),
		ToolVersion: r.str(), AppliedAt: r.time(), Notes: r.strs()}
	switch c := r.byte(); c % 4 {
	case 0:
	case 1:
		e.Files = []*FileRecord{}
	default:
		e.Files = make([]*FileRecord, int(c>>2)%4+1)
		for i := range e.Files {
			e.Files[i] = r.fileRecord()
		}
	}
	e.CreatedDirs = r.strs()
	return e
}

func (r *stateReader) state() *State {
	s := &State{Format: int(int64(r.uint64())), Tree: r.str(), Kind: r.str(), Recovered: r.strs()}
	switch c := r.byte(); c % 4 {
	case 0:
	case 1:
		s.Patches = []*Entry{}
	default:
		s.Patches = make([]*Entry, int(c>>2)%4+1)
		for i := range s.Patches {
			s.Patches[i] = r.entry()
		}
	}
	if r.byte()%4 != 0 {
		s.Owner = &Owner{UID: int(int64(r.uint64())), Machine: r.str(), MAC: r.str()}
	}
	return s
}

// FuzzStateEncoding checks that encodeState writes, for any State, the
// bytes encoding/json writes (or fails as it fails).
func FuzzStateEncoding(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00\x05/tree\x08checkout\x06\x01" +
		"\xf1\xf2\xf3\xf4\xf5\xf6\xf7\xf8\xf9\xfa\xfb\xfc\xfd\xfe\xff\x05hello"))
	f.Add(bytes.Repeat([]byte("\xf1\x07<b>&\xe2\x80\xa8\xff"), 64))
	f.Add(bytes.Repeat([]byte{0xfe, 0x03, 0xf4, 0x01, 0x84, 0xee, 0x81, 0x13}, 80))
	f.Add(bytes.Repeat([]byte{0x0b, 0xf8, 0x04, 0xff, 0xff, 0xff, 0x7f, 0x00, 0x00, 0x00, 0x00}, 60))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &stateReader{b: data}
		s := r.state()
		checkSameEncoding(t, s)
		checkRoundTrip(t, s)
	})
}

// richState holds, in one state, what encodeState must write as
// encoding/json does: escapes of every kind, paths and directories that
// are not UTF-8, nil and empty slices, omitted and present optional
// fields, times with odd nanoseconds and zones.
func richState() *State {
	h := func(s string) string { return sha256Hex([]byte(s)) }
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("", -(9*3600+30*60)))
	return &State{Format: stateFormat, Tree: "/src/<a&b>/\u2028x", Kind: "checkout", Patches: []*Entry{
		{Name: "demo", Project: "sglang", State: StateApplied, Variant: "v0.4", VariantReason: "tag \"v0.4.1\" \\ <= 0.5",
			Version: "0.4.1", VersionFrom: "python/sglang/version.py", Origin: "builtin", PatchDigest: h("p"), CatalogDigest: h("c"),
			ToolVersion: "dev", AppliedAt: at, Notes: []string{"cell a100\tn=1", "\x01\x1f\x7f", "日本語 \U0001F600 \u2029"},
			Files: []*FileRecord{
				{Path: "python/sglang/srt/a.py", Original: h("o"), Patched: h("x")},
				{Path: "python/new/deep/b\xff\xfe.py", Patched: h("n")},
				{Path: "python/c.py", Original: h("o2"), Target: h("t"), Before: h("b")},
				{Path: "python/d.py", Original: h("o3"), TargetDelete: true, Before: h("b2")},
			},
			CreatedDirs: []string{"python/new/deep", "python/new"},
		},
		{Name: "lossy", Project: "sglang", State: StatePending, Variant: "", Origin: "file:/x.toml", PatchDigest: h("q"),
			ToolVersion: "dev", AppliedAt: time.Date(1999, 12, 31, 23, 59, 59, 1000, time.UTC), Notes: []string{},
			Files:       []*FileRecord{{Path: "lib/\xc3(/x.c", Patched: h("l")}},
			CreatedDirs: []string{"lib/\xc3(", "lib"},
		},
		{Name: "empty", State: StateReverting, AppliedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 5*3600+45*60)), Files: []*FileRecord{}, CreatedDirs: []string{}},
	}, Owner: &Owner{UID: 1000, Machine: h("m")[:32], MAC: ""}}
}

func TestStateEncodingCases(t *testing.T) {
	cases := map[string]*State{
		"zero":          {},
		"empty patches": {Format: 2, Patches: []*Entry{}},
		"nil entry":     {Format: 2, Patches: []*Entry{nil, {Name: "a", Files: []*FileRecord{nil}}}},
		"rich":          richState(),
		"year 10000":    {Patches: []*Entry{{AppliedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		"year -1":       {Patches: []*Entry{{AppliedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		"zone 24h":      {Patches: []*Entry{{AppliedAt: time.Date(2000, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))}}},
		"zone -23:59":   {Patches: []*Entry{{AppliedAt: time.Date(2000, 1, 1, 0, 0, 0, 5, time.FixedZone("", -(23*3600+59*60+59)))}}},
		"zone seconds":  {Patches: []*Entry{{AppliedAt: time.Date(2000, 1, 1, 0, 0, 0, 5, time.FixedZone("", 30))}}},
		"negative uid":  {Owner: &Owner{UID: -1}},
		"not UTF-8":     {Tree: "/src/\xff\xfe/x", Kind: "check\xc3(out", Patches: []*Entry{{Name: "n\xff", Notes: []string{"a\xf0\x9f\x98b", "\\ufffd \xff"}}}},
		"now":           {Patches: []*Entry{{AppliedAt: time.Now()}}, Owner: &Owner{}},
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			checkSameEncoding(t, s)
			checkRoundTrip(t, s)
		})
	}
}

// goldenKey is the journal key the golden state.json was signed with.
func goldenKey() []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

// testdata/state_golden.json is richState as signedState wrote it before
// encodeState (encoding/json), with goldenKey as the user's key: its MAC
// must still verify, and encodeState must write its bytes again.
func TestGoldenStateStillVerifies(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "state_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseState("state.json", data)
	if err != nil {
		t.Fatal(err)
	}
	mac, err := stateMAC(goldenKey(), s)
	if err != nil {
		t.Fatal(err)
	}
	if mac != s.Owner.MAC {
		t.Fatalf("golden journal no longer verifies: mac %s, recorded %s", mac, s.Owner.MAC)
	}
	again, err := encodeState(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(again)+"\n" != string(data) {
		t.Fatalf("re-encoded golden differs:\n%s\nwant\n%s", again, data)
	}
}

// A journal signed the way every earlier smpatch signed it (encoding/json
// over the state with mac "", this user's key) is trusted: an apply's
// state.json, re-signed by the old encoder with notes that need escapes,
// is read by status and reverted; and what apply wrote is what
// encoding/json writes for it.
func TestJournalSignedByEncodingJSONStillTrusted(t *testing.T) {
	ctx := t.Context()
	root, tr := engineTree(t)
	orig := snapshot(t, root)
	if _, err := apply(t, enginePatch(t), tr); err != nil {
		t.Fatal(err)
	}
	statePath := filepath.Join(tr.StateDir(), "state.json")
	data, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseState(statePath, data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := marshalIndentState(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(want)+"\n" {
		t.Fatalf("apply wrote other bytes than encoding/json:\n%s\nwant\n%s", data, want)
	}

	s.Patches[0].Notes = []string{"cell <a&b> \u2028 \"q\" \\ \x01", "日本語"}
	s.Owner.MAC = ""
	unsigned, err := marshalIndentState(s)
	if err != nil {
		t.Fatal(err)
	}
	key, err := journalKey(false)
	if err != nil {
		t.Fatal(err)
	}
	s.Owner.MAC = macOf(key, unsigned)
	old, err := marshalIndentState(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statePath, append(old, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	cat := engineCatalog(t)
	st, err := Status(ctx, tr, cat)
	if err != nil {
		t.Fatalf("journal signed by encoding/json refused: %v", err)
	}
	if len(st.Patches) != 1 || len(st.Patches[0].Notes) != 2 || st.Patches[0].Notes[0] != s.Patches[0].Notes[0] {
		t.Fatalf("status: %+v", st.Patches)
	}
	if _, err := Revert(ctx, tr, cat, []string{"demo"}, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if !sameSnap(orig, snapshot(t, root)) {
		t.Fatalf("not reverted: %s", diffSnap(orig, snapshot(t, root)))
	}
}

func BenchmarkStateEncode(b *testing.B) {
	s := richState()
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshalIndentState(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encodeState", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeState(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A tree whose path is not UTF-8, and notes that are not, reach state.json
// as U+FFFD: the journal apply writes must still verify when it is read.
func TestJournalOfNonUTF8TreeVerifies(t *testing.T) {
	ctx := t.Context()
	first, _ := engineTree(t)
	root := first + "-\xff\xfe"
	if err := os.Rename(first, root); err != nil {
		t.Skipf("this file system refuses a name that is not UTF-8: %v", err)
	}
	tr, err := source.OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	orig := snapshot(t, root)
	p := enginePatch(t)
	if _, err := Apply(ctx, tr, setOf(tr, plan(t, p, tr)), ApplyOptions{ToolVersion: "test", Notes: []string{"cell \xff\xfe"}}); err != nil {
		t.Fatal(err)
	}
	cat := engineCatalog(t)
	st, err := Status(ctx, tr, cat)
	if err != nil {
		t.Fatalf("the journal apply just wrote is refused: %v", err)
	}
	if len(st.Patches) != 1 || st.Patches[0].Notes[0] != "cell \uFFFD\uFFFD" {
		t.Fatalf("status: %+v", st.Patches)
	}
	if _, err := Revert(ctx, tr, cat, []string{p.Name}, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if !sameSnap(orig, snapshot(t, root)) {
		t.Fatalf("not reverted: %s", diffSnap(orig, snapshot(t, root)))
	}
}
