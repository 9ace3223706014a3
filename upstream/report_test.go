package upstream

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smpatch/smpatch/internal/junit"
)

func sampleReport(n int) *Report {
	rp := &Report{}
	statuses := []Status{Conflict, Fuzzy, AlreadyUpstream, Applies, NoVariant}
	for i := 0; i < n; i++ {
		s := statuses[i%len(statuses)]
		rp.Results = append(rp.Results, Result{
			Project: "sglang", Patch: fmt.Sprintf("p%02d", i), Status: s, Revision: "https://x@abc",
			Detail: "line one, with: punctuation 100%\nline two", Source: "patches/catalog/p.diff", SourceLine: 7,
		})
	}
	return rp
}

func TestGitHubAggregatesPastTheLimit(t *testing.T) {
	rp := sampleReport(60) // 24 failing (conflict, no-variant), 24 warnings (fuzzy, already-upstream)
	var b bytes.Buffer
	if err := rp.WriteGitHub(&b); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	mentioned := map[string]bool{}
	for _, line := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(line, "::") {
			continue
		}
		kind, _, _ := strings.Cut(line[2:], " ")
		counts[kind]++
		if strings.ContainsAny(strings.SplitN(line, "::", 3)[2], "\r\n") {
			t.Fatalf("unescaped newline in %q", line)
		}
		for i := 0; i < 60; i++ {
			if strings.Contains(line, fmt.Sprintf("p%02d ", i)) || strings.Contains(line, fmt.Sprintf("p%02d%%0A", i)) || strings.HasSuffix(line, fmt.Sprintf("p%02d (sglang) %s", i, rp.Results[i].Status)) {
				mentioned[fmt.Sprintf("p%02d", i)] = true
			}
		}
	}
	if counts["error"] != 10 || counts["warning"] != 10 || counts["notice"] != 1 {
		t.Fatalf("annotations %v, want 10 errors, 10 warnings, 1 notice", counts)
	}
	for _, r := range rp.Results {
		if r.Status != Applies && !mentioned[r.Patch] {
			t.Errorf("%s (%s) is in no annotation", r.Patch, r.Status)
		}
	}
	if !strings.Contains(b.String(), "::error title=smpatch check%3A 15 more::") {
		t.Errorf("no aggregated error annotation:\n%s", b.String())
	}
}

func TestGitHubEscaping(t *testing.T) {
	for _, tc := range []struct{ in, data, prop string }{
		{"a%b", "a%25b", "a%25b"},
		{"x\ny\r", "x%0Ay%0D", "x%0Ay%0D"},
		{"k: v, w", "k: v, w", "k%3A v%2C w"},
	} {
		if got := escapeData(tc.in); got != tc.data {
			t.Errorf("escapeData(%q) = %q, want %q", tc.in, got, tc.data)
		}
		if got := escapeProperty(tc.in); got != tc.prop {
			t.Errorf("escapeProperty(%q) = %q, want %q", tc.in, got, tc.prop)
		}
	}
}

func TestJUnit(t *testing.T) {
	rp := sampleReport(5)
	rp.Results = append(rp.Results, Result{Project: "flashinfer", Patch: "q", Status: Error, Detail: "unreachable <remote> & co"})
	var b bytes.Buffer
	if err := rp.WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	var doc junit.Suites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, b.String())
	}
	if len(doc.Suites) != 2 || doc.Suites[0].Name != "sglang" || doc.Suites[1].Name != "flashinfer" {
		t.Fatalf("suites %+v", doc.Suites)
	}
	s := doc.Suites[0]
	if s.Tests != 5 || s.Failures != 2 || s.Skipped != 1 || s.Errors != 0 || doc.Suites[1].Errors != 1 || doc.Tests != 6 {
		t.Fatalf("counts: %+v / %+v", s, doc)
	}
	for _, c := range s.Cases {
		if c.Name == "p02" && (c.Skipped == nil || !strings.HasPrefix(c.Skipped.Message, "already upstream")) {
			t.Errorf("already-upstream case %+v", c)
		}
	}
	// --strict turns fuzzy into a failure.
	rp.Strict = true
	b.Reset()
	_ = rp.WriteJUnit(&b)
	doc = junit.Suites{}
	_ = xml.Unmarshal(b.Bytes(), &doc)
	if doc.Suites[0].Failures != 3 {
		t.Fatalf("strict failures = %d, want 3", doc.Suites[0].Failures)
	}
}

func TestJSONAndText(t *testing.T) {
	rp := sampleReport(3)
	rp.Results[0].Range = &RangeInfo{From: "a", To: "b", Base: strings.Repeat("1", 40), Start: Applies,
		Changes: []Change{{Commit: strings.Repeat("2", 40), Date: time.Date(2026, 7, 28, 9, 27, 29, 0, time.UTC), Subject: "feat: x", From: Applies, To: Conflict}}}
	var b bytes.Buffer
	if err := rp.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Results []map[string]any `json:"results"`
		Failed  int              `json:"failed"`
	}
	if err := json.Unmarshal(b.Bytes(), &v); err != nil || v.Failed != 1 || len(v.Results) != 3 || v.Results[0]["status"] != "conflict" {
		t.Fatalf("JSON %v %+v\n%s", err, v, b.String())
	}
	b.Reset()
	if err := rp.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"PROJECT  PATCH  STATUS",
		"222222222222 2026-07-28  applies -> conflict  feat: x",
		"3 patches: 1 fuzzy, 1 already-upstream, 1 conflict (1 failing)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if err := rp.Write(&b, "yaml"); err == nil {
		t.Error("unknown format accepted")
	}
}

// Two --upstream of one project check each patch twice: the rows, the JUnit
// test cases and the annotations carry the ref, so they stay apart.
func TestReportNamesRefWhenAPatchIsCheckedTwice(t *testing.T) {
	rp := &Report{Results: []Result{
		{Project: "sglang", Patch: "p", Status: Applies, Ref: "main", Revision: "u@1"},
		{Project: "sglang", Patch: "p", Status: Conflict, Ref: "v0.5.9", Revision: "u@2", Source: "p.diff", SourceLine: 3},
		{Project: "flashinfer", Patch: "q", Status: Applies, Ref: "main", Revision: "v@3"},
	}}
	var text, ju, gh bytes.Buffer
	if err := rp.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"sglang      p@main ", "sglang      p@v0.5.9 ", "flashinfer  q  "} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("text lacks %q:\n%s", w, &text)
		}
	}
	if err := rp.WriteJUnit(&ju); err != nil {
		t.Fatal(err)
	}
	var doc junit.Suites
	if err := xml.Unmarshal(ju.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			names = append(names, c.Name)
		}
	}
	if got := strings.Join(names, " "); got != "p@main p@v0.5.9 q" {
		t.Errorf("junit test cases %q", got)
	}
	if err := rp.WriteGitHub(&gh); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gh.String(), "smpatch check%3A p@v0.5.9 (sglang) conflict") {
		t.Errorf("annotation does not name the ref:\n%s", &gh)
	}
}
