package patches

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/smpatch/smpatch/patches/internal/catalogfile"
)

// builtin_decoded.go is the built-in catalog's NAME.toml files decoded by
// catalogfile.Decode, as Go values (builtinDecoded); a test fails while it
// differs from what the TOML decodes to now.
//
//go:generate go run ./internal/catalogfile/gen -o builtin_decoded.go catalog

// predecoded returns pre's value for the file called name when it was
// decoded from data itself; otherwise the file is to be decoded.
func predecoded(pre map[string]catalogfile.Decoded, name string, data []byte) (catalogfile.Patch, bool) {
	d, ok := pre[name]
	if !ok {
		return catalogfile.Patch{}, false
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != d.SHA256 {
		return catalogfile.Patch{}, false
	}
	return d.Patch, true
}
