//go:build smpatch_gen

package patches

import "github.com/smpatch/smpatch/patches/internal/catalogfile"

// The generator of builtin_decoded.go is built with this package; under
// its tag the built-in catalog has no values derived ahead of time.

func builtinDecoded() map[string]catalogfile.Decoded { return nil }

func builtinDiffs() map[string]prebuiltDiff { return nil }
