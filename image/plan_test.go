package image

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/udiff"
	"github.com/smpatch/smpatch/source"
)

// Tiny patches written for these tests against imagetest's synthetic
// communicator.py (the C3 shape).
const gateDiff = `diff --git a/python/sglang/srt/layers/communicator.py b/python/sglang/srt/layers/communicator.py
--- a/python/sglang/srt/layers/communicator.py
+++ b/python/sglang/srt/layers/communicator.py
@@ -10,6 +10,6 @@ _is_sm100_supported = _is_cuda and is_sm100_supported()
 def apply_flashinfer_allreduce_fusion(batch_size: int):
     return (
-        (_is_sm90_supported or _is_sm100_supported)
+        (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)
         and batch_size > 0
         and batch_size <= 4096
     )
`

const flagDiff = `diff --git a/python/sglang/srt/layers/communicator.py b/python/sglang/srt/layers/communicator.py
--- a/python/sglang/srt/layers/communicator.py
+++ b/python/sglang/srt/layers/communicator.py
@@ -5,3 +5,4 @@ from sglang.srt.utils import is_cuda, is_sm90_supported, is_sm100_supported
 _is_cuda = is_cuda()
 _is_sm90_supported = _is_cuda and is_sm90_supported()
 _is_sm100_supported = _is_cuda and is_sm100_supported()
+_is_sm120_supported = _is_cuda and torch.cuda.get_device_capability()[0] == 12
`

// legacyDiff expects a gate the synthetic tree does not have.
const legacyDiff = `diff --git a/python/sglang/srt/legacy_gate.py b/python/sglang/srt/legacy_gate.py
--- a/python/sglang/srt/legacy_gate.py
+++ b/python/sglang/srt/legacy_gate.py
@@ -1 +1 @@
-GATE = [9, 10, 11]
+GATE = [9, 10, 11, 12]
`

type variantSpec struct{ name, versions, diff string }

func testPatch(t testing.TB, name string, vs ...variantSpec) *patches.Patch {
	t.Helper()
	p := &patches.Patch{Name: name, Project: source.SGLang, Origin: "test"}
	for _, v := range vs {
		fds, err := udiff.Parse(name+"/"+v.name+".diff", []byte(v.diff))
		if err != nil {
			t.Fatal(err)
		}
		cs, err := source.ParseConstraints(v.versions)
		if err != nil {
			t.Fatal(err)
		}
		p.Variants = append(p.Variants, &patches.Variant{Name: v.name, Versions: v.versions, Constraints: cs, Diffs: []string{v.name + ".diff"}, Files: fds})
	}
	return p
}

func openTestBase(t testing.TB, o imagetest.Options) *Base {
	t.Helper()
	b, err := OpenBase(context.Background(), "oci:"+writeBase(t, o), Remote{}, FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBuildPlans(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	ctx := context.Background()
	base := openTestBase(t, imagetest.Options{})
	gate := testPatch(t, "sm120-gate",
		variantSpec{"old", "< 0.5.6", legacyDiff},
		variantSpec{"c3", ">= 0.5.6", gateDiff})
	flag := testPatch(t, "sm120-flag", variantSpec{"c3", ">= 0.5", flagDiff})
	res, err := base.Build(ctx, Cell{ID: "fusion.fewchan", Patches: []*patches.Patch{gate, flag}, Env: map[string]string{"NCCL_MAX_NCHANNELS": "2"}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Only the project's layer was read again, once (the random layers and
	// the upper layer never); a second cell reads nothing more.
	passes := base.FS.LayerPasses()
	if fmt.Sprint(passes) != "[0 0 1 0]" {
		t.Errorf("layer passes after one cell = %v, want [0 0 1 0]", passes)
	}
	if _, err := base.Build(ctx, Cell{ID: "again", Patches: []*patches.Patch{gate}}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := base.FS.LayerPasses(); fmt.Sprint(p) != fmt.Sprint(passes) {
		t.Errorf("layer passes after two cells = %v", p)
	}
	m := res.Built.Manifest
	if len(m.Patches) != 2 || m.Patches[0].Variant != "c3" || m.Patches[0].Outcome != "applies" || m.Patches[1].Name != "sm120-flag" {
		t.Errorf("manifest patches = %+v", m.Patches)
	}
	if len(m.Files) != 1 || strings.Join(m.Files[0].Patches, ",") != "sm120-gate,sm120-flag" || m.Files[0].Path != "python/sglang/srt/layers/communicator.py" {
		t.Errorf("manifest files = %+v", m.Files)
	}
	if len(m.Projects) != 1 || m.Projects[0].Version != "0.5.6" {
		t.Errorf("projects = %+v", m.Projects)
	}
	f, err := NewFS(ctx, res.Built.Image, FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadFile(sp + "/sglang/srt/layers/communicator.py")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "or _is_sm120_supported)") || !strings.Contains(string(got), "_is_sm120_supported = _is_cuda and torch") {
		t.Errorf("patched file:\n%s", got)
	}

	// Already applied: a base that carries the change builds an image
	// with no file changes, and says so.
	patched := imagetest.SGLangFiles("0.5.6")
	patched["sglang/srt/layers/communicator.py"] = patchedCommunicator()
	applied := openTestBase(t, imagetest.Options{Files: patched, Seed: 2})
	res, err = applied.Build(ctx, Cell{ID: "a", Patches: []*patches.Patch{gate}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Built.Manifest; len(m.Files) != 0 || m.Patches[0].Outcome != "already-applied" {
		t.Errorf("already applied: %+v", m)
	}

	// Variant choice by version: 0.5.5 picks "old", which conflicts here;
	// as on a checkout, the plan then tries the other variant.
	older := openTestBase(t, imagetest.Options{Version: "0.5.5", Seed: 3})
	res, err = older.Build(ctx, Cell{ID: "o", Patches: []*patches.Patch{gate}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl := res.Plans[0]; patches.VariantLabel(pl.Variant) != "c3" || !strings.Contains(pl.VariantReason, "0.5.5") {
		t.Errorf("variant %s: %s", patches.VariantLabel(pl.Variant), pl.VariantReason)
	}
}

func TestBuildFailures(t *testing.T) {
	ctx := context.Background()
	base := openTestBase(t, imagetest.Options{})
	legacy := testPatch(t, "legacy", variantSpec{"v", ">= 0", legacyDiff})
	_, err := base.Build(ctx, Cell{ID: "x", Patches: []*patches.Patch{legacy}}, BuildOptions{})
	var prob *patches.Problem
	if !errors.As(err, &prob) || !strings.Contains(err.Error(), "legacy does not apply to oci:") || !strings.Contains(err.Error(), "legacy_gate.py") {
		t.Errorf("conflict: %T %v", err, err)
	}

	empty := openTestBase(t, imagetest.Options{NoProject: true})
	gate := testPatch(t, "sm120-gate", variantSpec{"c3", ">= 0.5.6", gateDiff})
	_, err = empty.Build(ctx, Cell{ID: "x", Patches: []*patches.Patch{gate}}, BuildOptions{})
	if !errors.Is(err, ErrNoProject) || errors.As(err, &prob) || !strings.Contains(err.Error(), "searched "+sp) {
		t.Errorf("no project: %T %v", err, err)
	}
	// Without patches, a base without the project still takes env.
	res, err := empty.Build(ctx, Cell{ID: "env-only", Env: map[string]string{"NCCL_ALGO": "Ring"}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Built.Manifest.Env["NCCL_ALGO"] != "Ring" {
		t.Errorf("env-only manifest: %+v", res.Built.Manifest)
	}
}

// TestDockerBase checks that a Docker schema 2 base gets a Docker layer
// (no mixed media types) and keeps its manifest type.
func TestDockerBase(t *testing.T) {
	base := openTestBase(t, imagetest.Options{Docker: true})
	gate := testPatch(t, "sm120-gate", variantSpec{"c3", ">= 0.5", gateDiff})
	res, err := base.Build(context.Background(), Cell{ID: "d", Patches: []*patches.Patch{gate}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := res.Built.Image.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.DockerManifestSchema2 {
		t.Errorf("manifest media type %s", m.MediaType)
	}
	for _, l := range m.Layers {
		if l.MediaType != types.DockerLayer {
			t.Errorf("layer %s media type %s", l.Digest, l.MediaType)
		}
	}
}

// TestEditableInstall checks an image where sglang is installed editable
// from a checkout (as sglang's own images do from /sgl-workspace/sglang):
// the tree is the checkout, found through direct_url.json.
func TestEditableInstall(t *testing.T) {
	files := map[string]string{
		"sglang-0.5.6.dist-info/METADATA":        "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.6\n\n",
		"sglang-0.5.6.dist-info/direct_url.json": `{"url": "file:///sgl-workspace/sglang/python", "dir_info": {"editable": true}}`,
		"__editable__.sglang-0.5.6.pth":          "/sgl-workspace/sglang/python\n",
	}
	extra := map[string]string{
		"sgl-workspace/sglang/python/sglang/__init__.py":                                         "",
		"sgl-workspace/sglang/python/sglang/version.py":                                          "__version__ = \"0.5.6\"\n",
		"sgl-workspace/sglang/python/sglang/srt/layers/communicator.py":                          imagetest.Communicator,
		"sgl-workspace/sglang/python/sglang/srt/layers/__pycache__/communicator.cpython-312.pyc": "\x00stale",
		"sgl-workspace/sglang/python/pyproject.toml":                                             "[project]\nname = \"sglang\"\n",
	}
	base := openTestBase(t, imagetest.Options{Files: files, Extra: extra})
	tr, err := base.Tree(source.SGLang)
	if err != nil {
		t.Fatal(err)
	}
	if loc := tr.Location(); !loc.Checkout || loc.Root != "sgl-workspace/sglang" {
		t.Errorf("location = %+v", loc)
	}
	if b, err := tr.ReadFile("python/pyproject.toml"); err != nil || !strings.Contains(string(b), "sglang") {
		t.Errorf("pyproject: %q %v", b, err)
	}
	gate := testPatch(t, "sm120-gate", variantSpec{"c3", ">= 0.5", gateDiff})
	res, err := base.Build(context.Background(), Cell{ID: "e", Patches: []*patches.Patch{gate}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Built.Manifest
	if len(m.Files) != 1 || m.Files[0].ImagePath != "/sgl-workspace/sglang/python/sglang/srt/layers/communicator.py" ||
		len(m.Whiteouts) != 1 || m.Whiteouts[0] != "/sgl-workspace/sglang/python/sglang/srt/layers/__pycache__/communicator.cpython-312.pyc" {
		t.Errorf("manifest = %+v", m)
	}
}

// TestEggLinkInstall: an editable install that left only an .egg-link
// (setup.py develop) is still found.
func TestEggLinkInstall(t *testing.T) {
	files := map[string]string{"sglang.egg-link": "/sgl-workspace/sglang/python\n.\n"}
	extra := map[string]string{
		"sgl-workspace/sglang/python/sglang/__init__.py":                "",
		"sgl-workspace/sglang/python/sglang/version.py":                 "__version__ = \"0.5.6\"\n",
		"sgl-workspace/sglang/python/sglang/srt/layers/communicator.py": imagetest.Communicator,
	}
	base := openTestBase(t, imagetest.Options{Files: files, Extra: extra})
	tr, err := base.Tree(source.SGLang)
	if err != nil {
		t.Fatal(err)
	}
	if loc := tr.Location(); !loc.Checkout || loc.Root != "sgl-workspace/sglang" || loc.Dist != nil {
		t.Errorf("location = %+v", loc)
	}
	if v, _, _ := tr.Version(context.Background()); v == nil || v.String() != "0.5.6" {
		t.Errorf("version = %v", v)
	}
}
