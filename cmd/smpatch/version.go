package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches/catalog"
)

// smpatch version: the binary's version, commit, Go version and the
// revision of the catalog built into it.

// Commit is the VCS revision (make stamps it with -ldflags
// "-X main.Commit=..."); without it, the VCS revision Go stamped into the binary is used.
var Commit = ""

// versionInfo is smpatch version --json.
type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`           // the VCS revision the binary was built from, or "unknown"
	Dirty   bool   `json:"dirty,omitempty"`  // built from a work tree with uncommitted changes
	Go      string `json:"go"`               // the Go release that built it
	Catalog string `json:"catalog_revision"` // sha256 over the built-in catalog's files
	Patches int    `json:"catalog_patches"`  // patches in the built-in catalog
	OSArch  string `json:"platform"`         // GOOS/GOARCH
}

// readVersionInfo reads the build's facts; the catalog revision is the
// digest of the built-in catalog alone (no --catalog directories), so two
// binaries with the same revision carry the same patches.
func readVersionInfo() (*versionInfo, error) {
	vi := &versionInfo{Version: Version, Commit: "unknown", Go: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				vi.Commit = s.Value
			case "vcs.modified":
				vi.Dirty = s.Value == "true"
			}
		}
		if Commit != "" {
			vi.Commit = Commit
		}
		if vi.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			vi.Version = bi.Main.Version
		}
	}
	cat, err := catalog.Load(nil)
	if err != nil {
		return nil, fmt.Errorf("built-in catalog: %w", err)
	}
	vi.Catalog = cat.Digest()
	vi.Patches = len(cat.All())
	return vi, nil
}

// versionOptions are smpatch version's flags and dependencies; its output
// goes to stdout or the -o file (outputOptions).
type versionOptions struct {
	Info func() (*versionInfo, error) // the build's facts (readVersionInfo)
	outputOptions
}

func newVersionCmd(f *Factory) *cobra.Command {
	g := f.Globals
	o := &versionOptions{Info: readVersionInfo}
	c := &cobra.Command{
		Use:   "version",
		Short: "Print smpatch's version, commit, Go version and built-in catalog revision",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.resolve(c, g, "text", "json"); err != nil {
				return err
			}
			return o.write(c, func(w io.Writer) error { return runVersion(w, o) })
		},
	}
	o.AddFlags(c, "text", "json")
	return c
}

// runVersion prints the build's facts to w (stdout, or the -o file).
func runVersion(w io.Writer, o *versionOptions) error {
	vi, err := o.Info()
	if err != nil {
		return err
	}
	if o.Format == "json" {
		return WriteJSON(w, vi)
	}
	commit := vi.Commit
	if vi.Dirty {
		commit += " (modified)"
	}
	fmt.Fprintf(w, "smpatch %s\ncommit: %s\ngo: %s %s\ncatalog: %s (%d built-in patches)\n", vi.Version, commit, vi.Go, vi.OSArch, vi.Catalog, vi.Patches)
	return nil
}
