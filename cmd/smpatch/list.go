package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
)

// smpatch list: the patches of the catalog.

type listPatchJSON struct {
	Name      string        `json:"name"`
	Project   string        `json:"project"`
	Summary   string        `json:"summary"`
	Origin    string        `json:"origin"`
	File      string        `json:"file"`
	Upstream  string        `json:"upstream_status"`
	Variants  []variantJSON `json:"variants"`
	Uncovered []string      `json:"uncovered"`
	Needs     []string      `json:"needs"`
	Digest    string        `json:"digest"`
}

// listOptions are smpatch list's flags, streams and dependencies.
type listOptions struct {
	IO      IOStreams
	Catalog func() (*patches.Catalog, error)

	JSON bool
}

func (o *listOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.BoolVar(&o.JSON, "json", false, "print JSON")
}

func newListCmd(f *Factory) *cobra.Command {
	o := &listOptions{Catalog: f.Catalog}
	c := &cobra.Command{
		Use:   "list",
		Short: "List the patches of the catalog (built-in and --catalog directories)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.IO = streams(c)
			return runList(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runList(ctx context.Context, o *listOptions) error {
	w := o.IO.Out
	cat, err := o.Catalog()
	if err != nil {
		return err
	}
	if o.JSON {
		out := struct {
			CatalogDigest string          `json:"catalog_digest"`
			Patches       []listPatchJSON `json:"patches"`
		}{cat.Digest(), []listPatchJSON{}}
		for _, p := range cat.All() {
			out.Patches = append(out.Patches, listPatchJSON{
				Name: p.Name, Project: string(p.Project), Summary: p.Summary, Origin: p.Origin,
				File: p.File, Upstream: p.Upstream.Status, Variants: variantsJSON(p), Uncovered: uncoveredJSON(p), Needs: orEmpty(p.Needs), Digest: p.Digest,
			})
		}
		return WriteJSON(w, out)
	}
	if len(cat.All()) == 0 {
		fmt.Fprintln(w, "no patches in the catalog")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPROJECT\tVARIANTS\tNEEDS\tORIGIN\tSUMMARY")
	for _, p := range cat.All() {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", p.Name, p.Project, len(p.Variants), needsText(p), p.Origin, p.Summary)
	}
	return tw.Flush()
}
