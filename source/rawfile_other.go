//go:build !linux

package source

import (
	"io/fs"
	"os"
)

// OpenRead is os.OpenFile for reading where the descriptor is not read
// bare.
func OpenRead(name string, flag int) (fs.File, error) {
	return os.OpenFile(name, flag|os.O_RDONLY, 0)
}
