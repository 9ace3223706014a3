package doctor

import (
	"github.com/smpatch/smpatch/upstream/compat"
)

// compatFacts records what the compatibility table (upstream/compat, made
// from the sglang and flashinfer histories) says of the flashinfer the tree
// pins: compat.fusion_sm12 is yes or no (whether that flashinfer builds the
// fused all-reduce for SM 12.x, with the table's evidence), compat.install
// the flashinfer to install instead, compat.advice the table's sentence
// (which flashinfer provides the names the tree's fusion path uses, and
// what else changes). Unknown when the tree pins no exact flashinfer and
// the table has no such release.
func compatFacts(f *Facts, sglangVersion string) {
	tb, err := compat.Default()
	if err != nil {
		f.unknownBecause("compat", "the compatibility table: "+err.Error())
		return
	}
	var pin compat.Pin
	if v, ok := f.known["pin.flashinfer-python"]; ok && len(v.Vals) > 0 {
		pin = compat.Pin{FlashInfer: v.Vals[0], FlashInferFrom: v.From}
	}
	a := tb.Advise(sglangVersion, pin)
	if !a.Known {
		f.unknownBecause("compat", a.Text)
		return
	}
	verdict := "no"
	if a.OK {
		verdict = "yes"
	}
	f.set("compat.fusion_sm12", a.Text, verdict)
	f.set("compat.advice", "the compatibility table (docs/compatibility.md)", a.Text)
	if a.Install != "" {
		f.set("compat.install", "the compatibility table (docs/compatibility.md)", a.Install)
	} else {
		f.none("compat.install", "the compatibility table names no other flashinfer")
	}
}
