package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/image"
	"github.com/smpatch/smpatch/internal/termsafe"
	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// IOStreams are a command's standard streams: what it reads, what it
// prints as its result, and its progress, warnings and errors.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// streams are c's standard streams.
func streams(c *cobra.Command) IOStreams {
	return IOStreams{In: c.InOrStdin(), Out: c.OutOrStdout(), ErrOut: c.ErrOrStderr()}
}

// Factory makes what the commands depend on, each on first use and once
// per run: a command that needs no catalog, repository cache, registry or
// cluster builds none. A command's options struct takes from it the
// functions it needs (as fields), so its run function can be called with
// others in tests.
//
// The clients that cost the most to build (go-git's transports for the
// upstream cache, the registry client, the Kubernetes client) are made here
// and nowhere else.
type Factory struct {
	*Globals // the flags every command shares

	kube      *kubeMade          // the Kubernetes client, once made
	repoCache *gitrepo.RepoCache // the upstream clones, once opened
}

func newFactory(g *Globals) *Factory { return &Factory{Globals: g} }

// Catalog is the built-in catalog with the --catalog directories, loaded
// on first use.
func (f *Factory) Catalog() (*patches.Catalog, error) { return f.LoadCatalog() }

// Registry is the registry access of a command that reads or writes
// images (image apply and show, matrix build, probe --image), made from
// its --platform and --registry-timeout when it runs: the default
// keychain, the platform an index resolves to, and a transport that bounds
// every wait on the registry.
func (f *Factory) Registry(fl registryFlags) (image.Remote, error) { return fl.remote() }

// Tree is the tree a command works on (--repo, $SMPATCH_REPO, the current
// checkout, the installed package).
func (f *Factory) Tree(ctx context.Context, repo string, project source.Project) (source.WritableTree, error) {
	return source.Resolve(ctx, repo, project, f.PythonPath())
}

// Kube is the Kubernetes client for the Jobs of namespace in the cluster of
// kubeconfig ("" for $KUBECONFIG, else ~/.kube/config), made on first use
// (matrix run --runner kubernetes) and again only for another cluster or
// namespace.
func (f *Factory) Kube(kubeconfig, namespace string) (*launch.KubeClient, error) {
	if k := f.kube; k != nil && k.kubeconfig == kubeconfig && k.namespace == namespace {
		return k.client, k.err
	}
	c, err := launch.NewKubeClient(kubeconfig, namespace)
	f.kube = &kubeMade{kubeconfig: kubeconfig, namespace: namespace, client: c, err: err}
	return c, err
}

// kubeMade is a Kubernetes client and what it was made for.
type kubeMade struct {
	kubeconfig, namespace string
	client                *launch.KubeClient
	err                   error
}

// RepoCache is the cache of upstream clones ($XDG_CACHE_HOME/smpatch/repos)
// with go-git's network transports, made on first use: its notices go to
// the command's standard error, and the remote's progress too when that is
// a terminal.
func (f *Factory) RepoCache() (*gitrepo.RepoCache, error) {
	if f.repoCache != nil {
		return f.repoCache, nil
	}
	rc, err := gitrepo.NewRepoCache("")
	if err != nil {
		return nil, err
	}
	if errOut := f.stderr; errOut != nil {
		rc.Notice = errOut
		if IsTerminal(errOut) {
			// go-git's progress is the server's sideband text: escaped, but
			// its carriage returns still redraw the line.
			rc.Progress = termsafe.NewProgressWriter(RawWriter(errOut))
		}
	}
	f.repoCache = rc
	return rc, nil
}
