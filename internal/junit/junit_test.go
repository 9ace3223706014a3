package junit

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func TestWriteCounts(t *testing.T) {
	d := &Suites{Name: "all", Suites: []Suite{
		{Name: "a", Time: "1.500", Cases: []Case{
			{Name: "ok", Classname: "x.a", Time: "0.500", SystemOut: "m=1\n"},
			{Name: "bad", Classname: "x.a", Failure: &Message{Message: "bad: it broke", Type: "bad", Text: "long\ntext"}},
			{Name: "gone", Classname: "x.a", Skipped: &Message{Message: "pruned"}},
		}},
		{Name: "b", Cases: []Case{{Name: "err", Classname: "x.b", Error: &Message{Message: "error: io"}}}},
	}}
	var b bytes.Buffer
	if err := d.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		xml.Header + `<testsuites name="all" tests="4" failures="1" errors="1" skipped="1">`,
		`<testsuite name="a" tests="3" failures="1" errors="0" skipped="1" time="1.500">`,
		`<testcase name="ok" classname="x.a" time="0.500">`,
		`<failure message="bad: it broke" type="bad">long&#xA;text</failure>`,
		`<skipped message="pruned"></skipped>`,
		`<testsuite name="b" tests="1" failures="0" errors="1" skipped="0">`,
		`<error message="error: io"></error>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "</testsuites>\n") {
		t.Errorf("does not end with a line: %q", out[len(out)-20:])
	}
	var back Suites
	if err := xml.Unmarshal(b.Bytes(), &back); err != nil || len(back.Suites) != 2 || back.Suites[0].Cases[1].Failure.Text != "long\ntext" {
		t.Fatalf("read back %+v, %v", back, err)
	}
}
