package image

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/image/imagetest"
	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/matrix"
	"github.com/smpatch/smpatch/patches"
)

func TestMatrixBuild(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	ctx := context.Background()
	base := openTestBase(t, imagetest.Options{})
	cat := map[string]*patches.Patch{
		"sm120-gate": testPatch(t, "sm120-gate", variantSpec{"c3", ">= 0.5", gateDiff}),
		"legacy":     testPatch(t, "legacy", variantSpec{"v", ">= 0", legacyDiff}),
	}
	resolve := func(n string) (*patches.Patch, error) {
		if p, ok := cat[n]; ok {
			return p, nil
		}
		return nil, fmt.Errorf("no patch named %q in the catalog", n)
	}
	cells := []*matrix.Cell{
		{ID: "baseline", Env: map[string]string{}},
		{ID: "gate.fewchan", Patches: []string{"sm120-gate"}, Env: map[string]string{"NCCL_MAX_NCHANNELS": "2"}},
		{ID: "legacy", Patches: []string{"legacy"}},
		{ID: "typo", Patches: []string{"sm120-gaet"}},
		{ID: "tree", Env: map[string]string{"NCCL_ALGO": "Tree"}, Pruned: &matrix.Decision{Rule: "nccl-tree-cuda-graphs", Reason: "NCCL_ALGO=Tree breaks CUDA graph capture"}},
	}
	out := filepath.Join(t.TempDir(), "out")
	mb := &MatrixBuild{Base: base, Dest: &Layout{Dir: out, LinkFrom: base.Ref.Dir}, Resolve: resolve}
	outs := mb.Run(ctx, cells)
	status := func(outs []CellOutcome) string {
		var s []string
		for _, o := range outs {
			s = append(s, o.ID+"="+o.Status)
		}
		return strings.Join(s, " ")
	}
	if got := status(outs); got != "baseline=built gate.fewchan=built legacy=failed typo=failed tree=pruned" {
		t.Errorf("statuses: %s", got)
	}
	if outs[2].Code != exit.Conflict || outs[3].Code != exit.Failure || !strings.Contains(outs[3].Reason, "sm120-gaet") || !strings.Contains(outs[4].Reason, "Tree breaks") {
		t.Errorf("outcomes: %+v", outs)
	}
	if err := ExitError(outs); exit.Code(err) != exit.Conflict || !strings.Contains(err.Error(), "2 of 5 cells failed") {
		t.Errorf("ExitError = %v", err)
	}
	if err := ExitError(outs[3:4]); exit.Code(err) != exit.Failure {
		t.Errorf("ExitError without conflicts = %v", err)
	}
	refsFile := filepath.Join(out, "refs.json")
	refs, err := WriteRefs(refsFile, outs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs["gate.fewchan"] != outs[1].Ref || !strings.HasPrefix(refs["baseline"], "oci:") {
		t.Errorf("refs = %v", refs)
	}
	// Every built cell reads back by its id; the env of the cell is set.
	back := openBase(t, "oci:"+out+":gate.fewchan")
	cf, _ := back.img.ConfigFile()
	if !strings.Contains(strings.Join(cf.Config.Env, " "), "NCCL_MAX_NCHANNELS=2") {
		t.Errorf("env = %v", cf.Config.Env)
	}

	// Again: nothing changed, so every built cell is skipped, with the
	// same digests; --only keeps the other refs.
	again := mb.Run(ctx, cells[:2])
	if got := status(again); got != "baseline=skipped gate.fewchan=skipped" {
		t.Errorf("second run: %s", got)
	}
	if again[1].Digest != outs[1].Digest {
		t.Errorf("digest changed: %s vs %s", again[1].Digest, outs[1].Digest)
	}
	if _, err := WriteRefs(refsFile, again[1:], nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(refsFile)
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil || len(m) != 2 {
		t.Errorf("refs after partial run: %s", b)
	}
	// Cells the matrix no longer has are dropped.
	refs, err = WriteRefs(refsFile, again[1:], func(id string) bool { return id != "baseline" })
	if err != nil || len(refs) != 1 || refs["gate.fewchan"] == "" {
		t.Errorf("refs after dropping a cell: %v, %v", refs, err)
	}
}
