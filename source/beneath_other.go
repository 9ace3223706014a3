//go:build !linux

package source

import (
	"io/fs"
	"os"
)

// openBeneath is decided by the caller where openat2 does not exist.
func openBeneath(root, rel string) (*os.File, bool, error) { return nil, false, nil }

func openBeneathRaw(root, rel string) (fs.File, bool, error) { return nil, false, nil }
