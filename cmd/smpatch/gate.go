package main

import (
	"context"
	"errors"
	"io"

	"github.com/smpatch/smpatch/patches"
)

// archGateOptions are apply's --check-arch flags.
type archGateOptions struct {
	ProbeFile    string   // --probe-file: a saved report instead of the live probe
	SM           string   // --sm MAJOR.MINOR: the GPU the patch is meant for
	Force        bool     // --force: a failed requirement warns instead of refusing
	Python       string   // the interpreter whose environment is probed
	SitePackages []string // explicit site-packages dirs
}

// checkArch checks every requirement of ps against the probe, printing one
// line per requirement with its evidence to w. It returns the warnings to
// record in the journal when --force overrode a failure, or an error with
// exit.Refused when a requirement is not met.
func checkArch(ctx context.Context, w io.Writer, opts archGateOptions, ps []*patches.Patch) (notes []string, err error) {
	return nil, errors.New("--check-arch: the probe is not built into this binary yet")
}
