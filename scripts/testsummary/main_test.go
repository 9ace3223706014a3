package main

import (
	"strings"
	"testing"
)

// A stream shaped like go test -json: the skips are grouped by service,
// helpers run by other tests are left out, a failure's output is shown
// and makes the exit code 1.
func TestSummary(t *testing.T) {
	in := `{"Action":"start","Package":"p/a"}
{"Action":"run","Package":"p/a","Test":"TestPush"}
{"Action":"output","Package":"p/a","Test":"TestPush","Output":"=== RUN   TestPush\n"}
{"Action":"output","Package":"p/a","Test":"TestPush","Output":"    push_test.go:12: SKIP (no registry): run scripts/services.sh up, then eval\n"}
{"Action":"skip","Package":"p/a","Test":"TestPush"}
{"Action":"output","Package":"p/a","Test":"TestKube","Output":"    kube_test.go:9: SKIP (no kubernetes): run scripts/services.sh up\n"}
{"Action":"skip","Package":"p/a","Test":"TestKube"}
{"Action":"output","Package":"p/a","Test":"TestKube2","Output":"    kube_test.go:19: SKIP (no kubernetes): run scripts/services.sh up\n"}
{"Action":"skip","Package":"p/a","Test":"TestKube2"}
{"Action":"output","Package":"p/a","Test":"TestHelper","Output":"    x_test.go:1: run by TestCrash\n"}
{"Action":"skip","Package":"p/a","Test":"TestHelper"}
{"Action":"output","Package":"p/a","Test":"TestFifo","Output":"    f_test.go:3: no named pipes here\n"}
{"Action":"skip","Package":"p/a","Test":"TestFifo"}
{"Action":"output","Package":"p/a","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n    bad_test.go:3: wrong\n"}
{"Action":"fail","Package":"p/a","Test":"TestBad"}
{"Action":"output","Package":"p/a","Output":"FAIL\tp/a\t0.1s\n"}
{"Action":"fail","Package":"p/a"}
`
	var out strings.Builder
	s := newSummary(&out)
	if err := s.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	code := s.finish()
	got := out.String()
	for _, want := range []string{
		"bad_test.go:3: wrong",
		"FAIL\tp/a\t0.1s",
		"FAIL: 1 test in 1 package failed",
		"skipped: 3 tests need kubernetes 2, registry 1 (scripts/services.sh up kube registry); 1 test: no named pipes here\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TestHelper") || strings.Contains(got, "=== RUN") {
		t.Errorf("helper or RUN lines shown:\n%s", got)
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var empty strings.Builder
	if s := newSummary(&empty); s.read(strings.NewReader("")) != nil || s.finish() != 1 {
		t.Error("no events: want exit 1")
	}
}
