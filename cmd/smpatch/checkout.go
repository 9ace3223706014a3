package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/source/gitrepo"
	"github.com/smpatch/smpatch/upstream"
)

// smpatch checkout: an upstream revision fetched into the cache and
// written out as a work tree.

// checkoutOptions are smpatch checkout's flags, streams and dependencies.
type checkoutOptions struct {
	IO        IOStreams
	RepoCache func() (*gitrepo.RepoCache, error)

	Target string // PROJECT@REV
	Into   string
	URL    string
	JSON   bool
}

func (o *checkoutOptions) AddFlags(c *cobra.Command) {
	c.Flags().StringVar(&o.Into, "out", "", "directory to write the work tree into (empty or absent)")
	HiddenAlias(c, "into", "out")
	c.Flags().StringVar(&o.URL, "url", "", "repository URL (default: the project's public repository)")
	c.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
}

func newCheckoutCmd(f *Factory) *cobra.Command {
	o := &checkoutOptions{RepoCache: f.RepoCache}
	c := &cobra.Command{
		Use:   "checkout PROJECT@REV --out DIR",
		Short: "Fetch an upstream revision into the cache and write its work tree into DIR",
		Long: `Fetch an upstream revision (tag, branch, full or short SHA) into the
repository cache ($XDG_CACHE_HOME/smpatch/repos, one bare repository per URL;
only missing objects are fetched) and write its files into DIR, which must be
empty or absent. DIR/.git holds that one commit, HEAD detached at it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Target = streams(c), args[0]
			return runCheckout(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runCheckout(ctx context.Context, o *checkoutOptions) error {
	if o.Into == "" {
		return withCode(exitUsage, fmt.Errorf("checkout: --out DIR is required"))
	}
	t, err := upstream.ParseTarget(o.Target)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("checkout: %w", err))
	}
	if o.URL != "" {
		t.URL = o.URL
	}
	if err := checkEmptyDir(o.Into); err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	rc, err := o.RepoCache()
	if err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	u, err := rc.Open(ctx, t.URL)
	if err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	h, err := u.Resolve(ctx, t.Ref)
	if err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	tag := ""
	if th, err := gitrepo.ResolveRevision(u.Repo, "refs/tags/"+t.Ref); err == nil && th == h {
		tag = t.Ref
	}
	if err := u.Checkout(ctx, h, o.Into, tag); err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	if o.JSON {
		return WriteJSON(o.IO.Out, map[string]string{
			"project": string(t.Project), "url": t.URL, "rev": t.Ref,
			"commit": h.String(), "dir": o.Into, "cache": u.Path,
		})
	}
	fmt.Fprintf(o.IO.Out, "%s %s (%s) checked out into %s\n", t.Project, t.Ref, h.String()[:12], o.Into)
	return nil
}

// checkEmptyDir refuses a DIR that exists and is not an empty directory,
// before anything is fetched.
func checkEmptyDir(dir string) error {
	fi, err := os.Stat(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s: directory not empty (%d entries); choose an empty or new directory", dir, len(entries))
	}
	return nil
}
