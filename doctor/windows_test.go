package doctor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestDocsFresh: docs/doctor.md is what the rules and their measured
// windows give (make doctor-windows rewrites both).
func TestDocsFresh(t *testing.T) {
	rules, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	w, err := BuiltinWindows()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "docs", "doctor.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Markdown(rules, w)) {
		t.Error("docs/doctor.md is stale: run make doctor-windows (or go run ./scripts/doctorwin -docs when only the text changed)")
	}
}

// TestWindowsMeasured: every rule has a window measured for its code
// conditions as they are now.
func TestWindowsMeasured(t *testing.T) {
	rules, _ := Rules()
	w, err := BuiltinWindows()
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Tags) == 0 || w.Main == nil {
		t.Fatal("rules/windows.json measured no history: run make doctor-windows SGLANG_GIT_DIR=...")
	}
	for _, r := range rules {
		win := w.Of(r.ID)
		switch {
		case win == nil:
			t.Errorf("%s: no window (make doctor-windows)", r.ID)
		case win.Conds != CondsDigest(r):
			t.Errorf("%s: its window was measured for other code conditions (make doctor-windows)", r.ID)
		}
	}
}

// TestTreeState decides the code conditions alone on the synthetic trees.
func TestTreeState(t *testing.T) {
	rules, _ := Rules()
	idx := map[string]int{}
	for i, r := range rules {
		idx[r.ID] = i
	}
	for shape, want := range map[string]map[string]string{
		"argparse":  {"deepgemm-sm120": "holds", "deepgemm-sm121": "holds", "fused-allreduce-sglang-gate": "holds", "fused-allreduce-pin": "holds", "smem-fp8-moe-default": "holds", "trtllm-mla-xqa-spec": "no"},
		"annotated": {"deepgemm-sm120": "no", "deepgemm-sm121": "holds", "fused-allreduce-pin": "no", "smem-fp8-moe-default": "no"},
	} {
		tree, _ := synthTree(t, shape)
		st, err := TreeState(context.Background(), tree, rules)
		if err != nil {
			t.Fatal(err)
		}
		for id, w := range want {
			if st[idx[id]] != w {
				t.Errorf("%s: %s = %s, want %s", shape, id, st[idx[id]], w)
			}
		}
	}
}
