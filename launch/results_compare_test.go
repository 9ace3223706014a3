package launch

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Five repeats of three fake-server cells with 2% run-to-run noise (fixed
// seed): a 10% difference is called, a 1% one is not.
func TestCompareCallsTenPercentNotOnePercent(t *testing.T) {
	pids := t.TempDir()
	t.Setenv("FAKESERVER_SEED", "17")
	cell := func(id string, tps string) *Cell {
		c := fakeCell(t, id, "ok", pids, "-tps", tps, "-noise", "0.02")
		c.Values = []AxisValue{{Axis: "variant", Value: id}}
		return c
	}
	o := testOptions(t)
	o.Repeat = 5
	o.Baseline = "base"
	s, err := Run(context.Background(), []*Cell{cell("base", "100"), cell("ten", "110"), cell("one", "101")}, o)
	if err != nil {
		t.Fatal(err)
	}
	assertNoOrphans(t, pids)
	for _, r := range s.Results {
		if r.Status != StatusOK || len(r.Samples) != 5 || r.Stats["throughput"].N != 5 {
			t.Fatalf("%s: %s %q, %d samples", r.ID, r.Status, r.Reason, len(r.Samples))
		}
		for i, smp := range r.Samples {
			if smp.Repeat != i+1 || !strings.HasSuffix(smp.Log, r.ID+".r"+string(rune('1'+i))+".log") {
				t.Errorf("%s: sample %d: repeat %d log %s", r.ID, i, smp.Repeat, smp.Log)
			}
		}
	}
	// Round-robin: every cell's first repeat started before any second one.
	var firsts, seconds []string
	for _, r := range s.Results {
		firsts = append(firsts, r.Samples[0].Started)
		seconds = append(seconds, r.Samples[1].Started)
	}
	for _, f := range firsts {
		for _, sec := range seconds {
			if f > sec {
				t.Errorf("a first repeat (%s) started after a second one (%s)", f, sec)
			}
		}
	}
	ten, err := s.ComparePair("ten", "base", "throughput")
	if err != nil {
		t.Fatal(err)
	}
	one, _ := s.ComparePair("one", "base", "throughput")
	if !ten.Distinguishable || ten.CILoPct <= 0 || math.Abs(ten.ChangePct-10) > 4 {
		t.Errorf("10%%: %s", ten.Text)
	}
	if one.Distinguishable {
		t.Errorf("1%% called: %s", one.Text)
	}
	if !strings.HasPrefix(ten.Text, "ten vs base: +") || !strings.Contains(ten.Text, "5 runs each; Mann-Whitney U p = 0.008: distinguishable from noise") {
		t.Errorf("text %q", ten.Text)
	}
	md, _ := os.ReadFile(filepath.Join(o.Out, ResultsMD))
	for _, want := range []string{"A/B against", ten.Text, one.Text, "Each cell ran 5 times"} {
		if !bytes.Contains(md, []byte(mdEscape(want))) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	// The same numbers read back from results.json give the same verdicts.
	back, err := ReadSummary(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.ComparePair("ten", "base", "throughput")
	if again.Text != ten.Text {
		t.Errorf("from results.json: %q, want %q", again.Text, ten.Text)
	}
}

func TestStat(t *testing.T) {
	st := ComputeStat([]float64{5, 1, 4, 2, 3})
	if st.Median != 3 || st.Min != 1 || st.Max != 5 || st.Q1 != 2 || st.Q3 != 4 || st.CILo != 1 || st.CIHi != 5 || st.CILevel != 0.9375 {
		t.Errorf("%+v", st)
	}
	// 10 runs: [x(2), x(9)] covers the median with 97.9%.
	x := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if st := ComputeStat(x); st.CILo != 2 || st.CIHi != 9 || math.Abs(st.CILevel-0.97852) > 1e-4 {
		t.Errorf("%+v", st)
	}
}

func TestMannWhitney(t *testing.T) {
	// Completely separated samples of 5: the exact two-sided p is 2/252.
	if p := MannWhitney([]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}); math.Abs(p-2.0/252) > 1e-12 {
		t.Errorf("separated: p = %v", p)
	}
	// Interleaved: no evidence.
	if p := MannWhitney([]float64{1, 3, 5, 7, 9}, []float64{2, 4, 6, 8, 10}); p < 0.5 {
		t.Errorf("interleaved: p = %v", p)
	}
	// Ties fall back to the normal approximation; identical samples give 1.
	if p := MannWhitney([]float64{1, 1, 1}, []float64{1, 1, 1}); p != 1 {
		t.Errorf("identical: p = %v", p)
	}
	// One of 20 pairs out of order (U = 1): P(U <= 1) = 2 of the C(9,4) = 126
	// arrangements, two-sided 4/126.
	if p := MannWhitney([]float64{1.1, 2.2, 3.3, 4.4}, []float64{3.5, 4.6, 5.7, 6.8, 7.9}); math.Abs(p-4.0/126) > 1e-12 {
		t.Errorf("4 vs 5: p = %v", p)
	}
}

func TestCompareErrors(t *testing.T) {
	s := &Summary{Metrics: []string{"m"}, Results: []*Result{{ID: "a.x", Status: StatusOK, Metrics: map[string]float64{"m": 1}}, {ID: "b", Status: StatusFailed, Reason: "start: boom"}}}
	if _, err := s.ComparePairs(nil, ""); err == nil || !strings.Contains(err.Error(), "no baseline") {
		t.Errorf("no baseline: %v", err)
	}
	if _, err := s.ComparePairs([][2]string{{"a", "b"}}, ""); err == nil || err.Error() != "no cell a in the results (did you mean a.x?)" {
		t.Errorf("unknown cell: %v", err)
	}
	cs, err := s.ComparePairs([][2]string{{"a.x", "b"}}, "")
	if err != nil || !strings.Contains(cs[0].Text, "no m from b (failed: start: boom)") {
		t.Errorf("failed side: %v %+v", err, cs)
	}
	s.Results[1] = &Result{ID: "b", Status: StatusOK, Metrics: map[string]float64{"m": 2}}
	cs, _ = s.ComparePairs(nil, "b")
	if len(cs) != 1 || !strings.Contains(cs[0].Text, "a.x vs b: -50.0%, 1 run each: no test with one run") {
		t.Errorf("one run: %+v", cs[0])
	}
}

// matrix compare reads a results.json that may come from elsewhere: a cell
// id holding a line break does not start a line of its own in its text.
func TestComparisonsTextOneLineEach(t *testing.T) {
	s := &Summary{Metrics: []string{"t"}, Baseline: "b", Results: []*Result{
		{ID: "a\nfake line: ok", Status: StatusOK, Metrics: map[string]float64{"t": 1}},
		{ID: "b", Status: StatusOK, Metrics: map[string]float64{"t": 2}},
	}}
	var b strings.Builder
	WriteComparisonsText(&b, s.baselineComparisons())
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "fake line") {
			t.Errorf("a spoofed line: %q\n%s", l, b.String())
		}
	}
}
