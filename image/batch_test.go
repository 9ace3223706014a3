package image

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
	"github.com/smpatch/smpatch/patches"
)

func TestBatch(t *testing.T) {
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
	sets := []PatchSet{
		{ID: "baseline", Env: map[string]string{}},
		{ID: "gate.fewchan", Patches: []string{"sm120-gate"}, Env: map[string]string{"NCCL_MAX_NCHANNELS": "2"}},
		{ID: "legacy", Patches: []string{"legacy"}},
		{ID: "typo", Patches: []string{"sm120-gaet"}},
	}
	out := filepath.Join(t.TempDir(), "out")
	b := &Batch{Base: base, Dest: &Layout{Dir: out, LinkFrom: base.Ref.Dir}, Resolve: resolve}
	var seen []string
	b.Progress = func(o Outcome) { seen = append(seen, o.ID) }
	outs := b.Run(ctx, sets)
	status := func(outs []Outcome) string {
		var s []string
		for _, o := range outs {
			s = append(s, o.ID+"="+o.Status)
		}
		return strings.Join(s, " ")
	}
	if got := status(outs); got != "baseline=built gate.fewchan=built legacy=failed typo=failed" {
		t.Errorf("statuses: %s", got)
	}
	if strings.Join(seen, " ") != "baseline gate.fewchan legacy typo" {
		t.Errorf("progress: %v", seen)
	}
	var prob *patches.Problem
	if !errors.As(outs[2].Err, &prob) || errors.As(outs[3].Err, &prob) || !strings.Contains(outs[3].Err.Error(), "sm120-gaet") {
		t.Errorf("outcomes: %+v", outs)
	}
	if !strings.HasPrefix(outs[1].Ref, "oci:") || !strings.HasSuffix(outs[1].Ref, "@"+outs[1].Digest) || outs[1].PatchSet == "" {
		t.Errorf("built outcome: %+v", outs[1])
	}
	// Every built image reads back by its id; the env of the set is set.
	back := openBase(t, "oci:"+out+":gate.fewchan")
	cf, _ := back.img.ConfigFile()
	if !strings.Contains(strings.Join(cf.Config.Env, " "), "NCCL_MAX_NCHANNELS=2") {
		t.Errorf("env = %v", cf.Config.Env)
	}

	// Again: nothing changed, so every built image is skipped, with the
	// same digests.
	again := b.Run(ctx, sets[:2])
	if got := status(again); got != "baseline=skipped gate.fewchan=skipped" {
		t.Errorf("second run: %s", got)
	}
	if again[1].Digest != outs[1].Digest {
		t.Errorf("digest changed: %s vs %s", again[1].Digest, outs[1].Digest)
	}

	// A done context stops the batch after the set being built.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if got := b.Run(cctx, sets); len(got) != 1 {
		t.Errorf("cancelled batch: %+v", got)
	}
}
