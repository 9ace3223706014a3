package patches

import (
	"github.com/smpatch/smpatch/patches/catalog"

	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/smpatch/smpatch/internal/testkit/synth"
	"github.com/smpatch/smpatch/source"
)

// BenchmarkApplyRevert applies and reverts the built-in sm120-fusion patch
// on a full-size synthetic C4+S3 tree (communicator.py ~140 KB,
// server_args.py ~250 KB), journal and fsyncs included.
func BenchmarkApplyRevert(b *testing.B) {
	ctx := context.Background()
	cat, p, tr := benchTree(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pl, err := NewPlan(ctx, p, tr, PlanOptions{})
		if err != nil || !pl.OK(false) {
			b.Fatalf("plan: %v %v", err, pl.Reason)
		}
		if _, err := Apply(ctx, tr, setOf(tr, pl), ApplyOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := Revert(ctx, tr, cat, nil, RevertOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyRevertSet is one `smpatch apply sm120-fusion
// sm120-fusion-auto` and one `smpatch revert` without the process: the
// catalog loaded, the set planned, applied and reverted, on the same tree.
func BenchmarkApplyRevertSet(b *testing.B) {
	ctx := context.Background()
	_, _, tr := benchTree(b)
	for b.Loop() {
		cat, err := catalog.Load(nil)
		if err != nil {
			b.Fatal(err)
		}
		ps, err := cat.GetAll([]string{"sm120-fusion", "sm120-fusion-auto"})
		if err != nil {
			b.Fatal(err)
		}
		s, err := PlanSet(ctx, tr, ps, SetOptions{})
		if err != nil || s.Problem() != nil {
			b.Fatalf("plan: %v %v", err, s.Problem())
		}
		if _, err := Apply(ctx, tr, s, ApplyOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := Revert(ctx, tr, cat, nil, RevertOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlan plans sm120-fusion on the same full-size tree: reading,
// matching every hunk and building the new text, nothing written.
func BenchmarkPlan(b *testing.B) {
	ctx := context.Background()
	_, p, tr := benchTree(b)
	for b.Loop() {
		pl, err := NewPlan(ctx, p, tr, PlanOptions{})
		if err != nil || !pl.OK(false) {
			b.Fatalf("plan: %v %v", err, pl.Reason)
		}
	}
}

// benchTree writes the full-size synthetic C4+S3 checkout and returns the
// built-in catalog, its sm120-fusion patch and the tree.
func benchTree(b *testing.B) (*Catalog, *Patch, source.WritableTree) {
	b.Helper()
	cat, err := catalog.Load(nil)
	if err != nil {
		b.Fatal(err)
	}
	p, err := cat.Get("sm120-fusion")
	if err != nil {
		b.Skip(err)
	}
	root := b.TempDir()
	for n, data := range synth.SGLangTree("c4-s3", true) {
		f := filepath.Join(root, filepath.FromSlash(n))
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "python/sglang/__init__.py"), nil, 0o644)
	tr, err := source.OpenCheckout(root)
	if err != nil {
		b.Fatal(err)
	}
	return cat, p, tr
}

// BenchmarkLoadCatalog loads the built-in catalog, variant overlap check
// included, as every command that names a patch does.
func BenchmarkLoadCatalog(b *testing.B) {
	for b.Loop() {
		if _, err := catalog.Load(nil); err != nil {
			b.Fatal(err)
		}
	}
}
