package patches

import (
	"github.com/smpatch/smpatch/patches/internal/catalogfile"
)

// builtin_decoded.go is the built-in catalog as `go generate` derives it:
// each NAME.toml decoded by catalogfile.Decode with the patch's digest
// (builtinDecoded) and each diff as ParseDiff reads it (builtinDiffs), as Go
// values beside copies of the texts they came from; a test fails while it
// differs from what the catalog gives now. The generator is built with the
// tag smpatch_gen, under which this package has no such values
// (builtin_gen.go), so that it builds whatever builtin_decoded.go holds.
//
//go:generate go run -tags smpatch_gen ./internal/catalogfile/gen -o builtin_decoded.go catalog

// prebuilt is the built-in catalog derived ahead of time: files by
// NAME.toml, diffs by catalog-relative path. Each value is used only for
// the very text it came from; any other text is decoded, parsed and hashed
// as in a catalog directory.
type prebuilt struct {
	files map[string]catalogfile.Decoded
	diffs map[string]prebuiltDiff
}

// prebuiltDiff is one diff of the built-in catalog: its text and the
// FileDiffs ParseDiff reads from it, one copy for each variant that names
// it (as each would parse its own).
type prebuiltDiff struct {
	Text  string
	Files [][]*FileDiff
}

// builtinPrebuilt is the built-in catalog's values, fresh for one load.
func builtinPrebuilt() *prebuilt {
	return &prebuilt{files: builtinDecoded(), diffs: builtinDiffs()}
}

// predecoded returns pre's value for the file called name when it was
// decoded from data itself; otherwise the file is to be decoded.
func predecoded(pre *prebuilt, name string, data []byte) (catalogfile.Decoded, bool) {
	if pre == nil {
		return catalogfile.Decoded{}, false
	}
	d, ok := pre.files[name]
	if !ok || d.Text != string(data) {
		return catalogfile.Decoded{}, false
	}
	return d, true
}

// parsedDiff returns pre's FileDiffs for the diff at rel when they were
// read from data itself: a copy of its own for each use, so that no two
// variants share FileDiffs (beyond the copies, the diff is parsed again).
func (pre *prebuilt) parsedDiff(rel string, data []byte) ([]*FileDiff, bool) {
	if pre == nil {
		return nil, false
	}
	d, ok := pre.diffs[rel]
	if !ok || len(d.Files) == 0 || d.Text != string(data) {
		return nil, false
	}
	fds := d.Files[0]
	d.Files = d.Files[1:]
	pre.diffs[rel] = d
	return fds, true
}
