//go:build !linux

package source

import "io/fs"

// openBeneath is decided by the caller where openat2 does not exist.
func openBeneath(t *dirTree, rel string) (fs.File, bool, error) { return nil, false, nil }

// heldRoot is nothing to hold where openat2 does not exist.
type heldRoot struct{}

func (h *heldRoot) hold(root string) {}
func (h *heldRoot) release()         {}
