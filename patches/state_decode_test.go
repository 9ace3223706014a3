package patches

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decodeStateJSON is the decoding decodeState stands in for, kept as its
// oracle: encoding/json with Entry's and FileRecord's UnmarshalJSON.
func decodeStateJSON(data []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// checkSameDecoding fails unless decodeState reads data as encoding/json
// does whenever it reads it at all, and parseState's answer is the one it
// gave with encoding/json alone: the state it accepts, or the error
// encoding/json words.
func checkSameDecoding(t *testing.T, data []byte) {
	t.Helper()
	want, werr := decodeStateJSON(data)
	got, ok := decodeState(data)
	if ok {
		if werr != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v):\n%q", werr, data)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("fast path and encoding/json differ:\n got %s\nwant %s\ninput %q", dumpState(got), dumpState(want), data)
		}
	} else if got != nil {
		t.Fatalf("fast path gave up but returned a state")
	}
	_, perr := parseState("state.json", data)
	if werr != nil {
		var je *JournalError
		if !errors.As(perr, &je) || je.Msg != werr.Error() || je.Path != "state.json" {
			t.Fatalf("parseState: %v; want encoding/json's error %v", perr, werr)
		}
	}
}

// dumpState shows a state with every field and pointer followed, for
// failure messages.
func dumpState(s *State) string {
	if s == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "{Format:%d Tree:%q Kind:%q Patches(nil=%v):[", s.Format, s.Tree, s.Kind, s.Patches == nil)
	for _, e := range s.Patches {
		if e == nil {
			b.WriteString("nil ")
			continue
		}
		fmt.Fprintf(&b, "%+v", *e)
		for _, f := range e.Files {
			if f != nil {
				fmt.Fprintf(&b, " %+v", *f)
			}
		}
		fmt.Fprintf(&b, " notesNil=%v filesNil=%v dirsNil=%v ", e.Notes == nil, e.Files == nil, e.CreatedDirs == nil)
	}
	b.WriteString("]")
	if s.Owner != nil {
		fmt.Fprintf(&b, " Owner:%+v", *s.Owner)
	}
	b.WriteString("}")
	return b.String()
}

// checkEncoderOutputFast fails unless the encoding of s (where s can be
// encoded) is read by the fast path, as encoding/json reads it, and
// encodes again to the same bytes: every journal smpatch writes is read
// without encoding/json, and its MAC still verifies once read.
func checkEncoderOutputFast(t *testing.T, s *State) {
	t.Helper()
	enc, err := encodeState(s)
	if err != nil {
		return
	}
	got, ok := decodeState(enc)
	if !ok {
		t.Fatalf("the encoder's output left the fast path:\n%s", enc)
	}
	checkSameDecoding(t, enc)
	for _, e := range s.Patches {
		if e == nil {
			continue
		}
		// A zone offset with seconds is written to the minute
		// (checkRoundTrip).
		if _, off := e.AppliedAt.Zone(); off%60 != 0 {
			return
		}
	}
	again, err := encodeState(got)
	if err != nil {
		t.Fatalf("encoding the state read back: %v", err)
	}
	if !bytes.Equal(enc, again) {
		t.Fatalf("read back by the fast path and encoded again, the state differs:\n%s\n%s", enc, again)
	}
}

// decodeSeeds are inputs in the encoder's shape (states of every kind, a
// signed journal, the golden one) and around it: what encoding/json reads
// otherwise (keys in another case, keys twice, unknown keys, floats,
// escapes of every kind, null where the encoder never writes it) and what
// it refuses.
func decodeSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	h := sha256Hex([]byte("x"))
	states := []*State{
		{},
		{Format: 2, Patches: []*Entry{}},
		{Format: 2, Patches: []*Entry{nil, {Name: "a", Files: []*FileRecord{nil}}}},
		{Format: -1 << 63, Owner: &Owner{UID: 1<<63 - 1}},
		richState(),
	}
	for _, st := range []EntryState{StatePending, StateApplied, StateReverting, "other"} {
		states = append(states, &State{Format: stateFormat, Tree: "/t", Kind: "checkout", Patches: []*Entry{{
			Name: "p-" + string(st), State: st, AppliedAt: time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC),
			Files: []*FileRecord{{Path: "a/b.py", Original: h, Patched: h}, {Path: "a/\xff.py", Patched: h, TargetDelete: true}},
		}}, Owner: &Owner{UID: 1000, Machine: "m", MAC: h}})
	}
	for _, s := range states {
		b, err := encodeState(s)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	s := richState()
	signed, err := signedState(s)
	if err != nil {
		t.Fatal(err)
	}
	seeds = append(seeds, signed)
	golden, err := os.ReadFile(filepath.Join("testdata", "state_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	seeds = append(seeds, golden)
	file := func(rest string) string {
		return `{"format":2,"patches":[{"name":"demo","state":"applied","applied_at":"2026-01-02T03:04:05Z","files":[{"path":"a"` + rest + `}]}]}`
	}
	for _, s := range []string{
		``, `null`, `[]`, `{}`, ` {"format": 2} `, "\t{\r\n}\n", `{"format":2}x`, `{"format":2}{}`, `{"format":2,}`,
		`{"Format":2}`, `{"FORMAT":2}`, `{"format":2,"format":3}`, `{"format":2,"extra":1}`, `{"fo\u0072mat":2}`,
		`{"format":2.0}`, `{"format":2e0}`, `{"format":-0}`, `{"format":01}`, `{"format":-}`, `{"format":"2"}`,
		`{"format":9223372036854775807}`, `{"format":9223372036854775808}`, `{"format":-9223372036854775808}`,
		`{"format":null}`, `{"tree":null}`, `{"patches":null}`, `{"patches":[null]}`, `{"patches":{}}`, `{"owner":null}`,
		`{"owner":{"uid":1,"UID":2}}`, `{"owner":{}}`, `{"owner":[]}`,
		`{"tree":"\"\\\/\b\f\n\r\t\u0041\u00e9\u2028\ud83d\ude00"}`, `{"tree":"\ud83d"}`, `{"tree":"\ud83dx"}`,
		`{"tree":"\ude00\ud83d"}`, `{"tree":"\ud83d\u0041"}`, `{"tree":"\ud83d\ud83d\ude00"}`, `{"tree":"\u12"}`,
		`{"tree":"\uZZZZ"}`, `{"tree":"\'"}`, `{"tree":"\x"}`, "{\"tree\":\"a\x01\"}", "{\"tree\":\"\xff\xfe\xed\xa0\x80\"}",
		"{\"tree\":\"\\n\xff\"}", `{"tree":"a`, `{"tree":"a\`, `{"tree":"\u00`,
		`{"patches":[{"name":"a","applied_at":null}]}`, `{"patches":[{"applied_at":"2026-01-02T03:04:05+24:00"}]}`,
		`{"patches":[{"applied_at":"2026-01-02T03:04:05.123456789-09:30"}]}`, `{"patches":[{"applied_at":"2026-02-30T00:00:00Z"}]}`,
		`{"patches":[{"applied_at":"2026-01-02T03:04:05\u005a"}]}`, `{"patches":[{"applied_at":"2026-01-02 03:04:05Z"}]}`,
		`{"patches":[{"applied_at":"2026-01-02T3:04:05Z"}]}`, `{"patches":[{"applied_at":"2026-01-02T03:04:05,5Z"}]}`,
		`{"patches":[{"applied_at":1}]}`, `{"patches":[{"notes":null}]}`, `{"patches":[{"notes":[]}]}`, `{"patches":[{"notes":["a",null]}]}`,
		`{"patches":[{"files":[]}]}`, `{"patches":[{"files":null}]}`, `{"patches":[{"name":"a","Name":"b"}]}`,
		`{"patches":[{"created_dirs":[]}]}`, `{"patches":[{"created_dirs_b64":[]}]}`, `{"patches":[{"created_dirs":[],"created_dirs_b64":[]}]}`,
		`{"patches":[{"created_dirs":["a\ufffd"],"created_dirs_b64":["YdA="]}]}`, `{"patches":[{"created_dirs":["a"],"created_dirs_b64":["YdA="]}]}`,
		`{"patches":[{"created_dirs":["a"],"created_dirs_b64":["!"]}]}`, `{"patches":[{"created_dirs":["a","b"],"created_dirs_b64":["YQ=="]}]}`,
		`{"patches":[{"created_dirs_b64":["YQ=="],"created_dirs":["a"]}]}`,
		file(``), file(`,"path_b64":"YdA="`), file(`,"path_b64":"YQ=="`), file(`,"path_b64":""`), file(`,"path_b64":"!!"`),
		file(`,"path_b64":"Y\nQ=="`), file(`,"target_delete":true`), file(`,"target_delete":false`), file(`,"target_delete":null`),
		file(`,"target_delete":1`), file(`,"path":"b"`), file(`,"Path_B64":"YQ=="`), file(`,"unknown":1`),
		`{"patches":[{"files":[{"path":"\ufffd","path_b64":"/w=="}]}]}`, `{"patches":[{"files":[{"path_b64":"/w==","path":"\ufffd"}]}]}`,
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

func TestStateDecodingSeeds(t *testing.T) {
	for i, data := range decodeSeeds(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkSameDecoding(t, data) })
	}
}

// FuzzStateDecoding checks decodeState against encoding/json on any
// input read as JSON, and on the encoding of any State (the same input
// read as stateReader's): that one the fast path must read, to the state
// encoding/json reads, which encodes again to the same bytes.
func FuzzStateDecoding(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s)
	}
	f.Add(bytes.Repeat([]byte{0xfe, 0x03, 0xf4, 0x01, 0x84, 0xee, 0x81, 0x13}, 80))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameDecoding(t, data)
		checkEncoderOutputFast(t, (&stateReader{b: data}).state())
	})
}

// Every journal smpatch writes is read by the fast path: the states of
// the encoding tests, random ones, and the signed state.json of a real
// apply.
func TestStateDecodeTakesFastPath(t *testing.T) {
	for _, s := range []*State{{}, richState(), {Format: 2, Patches: []*Entry{nil, {Name: "a", Files: []*FileRecord{nil}}}}} {
		checkEncoderOutputFast(t, s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 2048)
	encoded := 0
	for range 2000 {
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		s := (&stateReader{b: buf}).state()
		if _, err := encodeState(s); err == nil {
			encoded++
		}
		checkEncoderOutputFast(t, s)
	}
	if encoded < 1000 {
		t.Fatalf("only %d of 2000 random states could be encoded", encoded)
	}

	_, tr := engineTree(t)
	if _, err := apply(t, enginePatch(t), tr); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(tr.StateDir(), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := decodeState(data)
	if !ok {
		t.Fatalf("the state.json apply wrote left the fast path:\n%s", data)
	}
	if len(s.Patches) != 1 || len(s.Patches[0].Files) == 0 || s.Owner == nil || s.Owner.MAC == "" {
		t.Fatalf("read %s", dumpState(s))
	}
	checkSameDecoding(t, data)
}

// BenchmarkStateDecode reads a signed three-entry state warm: encoding/json
// against the fast path.
func BenchmarkStateDecode(b *testing.B) {
	data, err := signedState(richState())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeStateJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeState", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeState(data); !ok {
				b.Fatal("not read by the fast path")
			}
		}
	})
}

// BenchmarkStateDecodeFirst is the first decoding of a state in a
// process, what a revert pays: run one sub-benchmark at a time with
// -benchtime=1x in fresh processes (go test -c, then the binary with
// -test.bench 'StateDecodeFirst/NAME$' -test.benchtime=1x), and take the
// median. In a process that has decoded a state before it measures the
// warm decoding.
func BenchmarkStateDecodeFirst(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "state_golden.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeStateJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeState", func(b *testing.B) {
		for b.Loop() {
			if _, ok := decodeState(data); !ok {
				b.Fatal("not read by the fast path")
			}
		}
	})
}
