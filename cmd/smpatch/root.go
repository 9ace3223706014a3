package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/interrupt"
	"github.com/smpatch/smpatch/internal/termsafe"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// Version is the program's version (make stamps it with -ldflags
// "-X main.Version=...").
var Version = "dev"

// Globals are the flags every command shares.
type Globals struct {
	Catalogs []string // --catalog DIR, repeatable; $SMPATCH_CATALOG (colon-separated) is added
	Python   string   // --python PATH; default python3 on PATH

	Verbose bool   // -v/--verbose
	Quiet   bool   // -q/--quiet
	Color   string // --color auto|always|never
	Format  string // --format of the commands addOutputFlags gave it
	Output  string // -o/--output FILE

	LockTimeout time.Duration // --lock-timeout: the longest wait for a tree's journal lock

	config        *config // the config file, read before the command runs
	defaultPython string  // the config file's python, below --python and $SMPATCH_PYTHON

	catalog    *patches.Catalog // loaded once, by LoadCatalog
	formatsOf  map[*cobra.Command][]string
	stderr     io.Writer    // the command's standard error, for warnings
	pending    *pendingFile // -o FILE while the command runs
	pendingCmd *cobra.Command
}

// CatalogDirs is --catalog followed by the directories of $SMPATCH_CATALOG.
func (g *Globals) CatalogDirs() []string {
	dirs := append([]string(nil), g.Catalogs...)
	for _, d := range filepath.SplitList(os.Getenv("SMPATCH_CATALOG")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 && g.config != nil {
		dirs = append(dirs, g.config.Catalog...)
	}
	return dirs
}

// PythonPath is the interpreter meant by --python, python3 when unset.
func (g *Globals) PythonPath() string {
	if g.Python != "" {
		return g.Python
	}
	if g.defaultPython != "" {
		return g.defaultPython
	}
	return "python3"
}

// commandBuilders are smpatch's commands, in the order help lists them.
var commandBuilders = []func(*Factory) *cobra.Command{
	newDoctorCmd,
	newListCmd,
	newShowCmd,
	newApplyCmd,
	newRevertCmd,
	newStatusCmd,
	newNewCmd,
	newImportCmd,
	newRefreshCmd,
	newProbeCmd,
	newJournalCmd,
	newCheckCmd,
	newCheckoutCmd,
	newImageCmd,
	newMatrixCmd,
	newTriageCmd,
	newVersionCmd,
}

// newRoot builds the command tree.
func newRoot(g *Globals, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "smpatch",
		Short:         "Safe, revertible source patches for sglang and flashinfer on GPUs upstream does not fully support yet",
		Long:          rootLong,
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          GroupArgs,
		RunE:          func(c *cobra.Command, _ []string) error { return c.Help() },
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			return g.beforeRun(c)
		},
	}
	g.addGlobalFlags(root)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringArrayVar(&g.Catalogs, "catalog", nil, "add a directory of patches to the built-in catalog (repeatable; also $SMPATCH_CATALOG)")
	root.PersistentFlags().StringVar(&g.Python, "python", "", "the Python interpreter whose environment is meant (default python3 on PATH)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return flagError(c, err)
	})
	f := newFactory(g)
	for _, build := range commandBuilders {
		root.AddCommand(build(f))
	}
	addOutputFlags(root, g)
	addExamples(root)
	addCompletions(root, g)
	addCommandCompletions(root, g)
	markUsageErrors(root)
	return root
}

// markUsageErrors makes argument-count errors exit with the usage code.
func markUsageErrors(c *cobra.Command) {
	if c.Args != nil {
		args := c.Args
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return argsError(cmd, a, err)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markUsageErrors(sub)
	}
}

// execute runs smpatch's command line under ctx (cancelled by SIGINT and
// SIGTERM: see main) and returns the process exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Text from elsewhere never reaches a terminal raw: names, logs and
	// catalog text are escaped on both streams (colour and progress write
	// past the escaping, escaping what they show themselves: RawWriter).
	stdout = termsafe.Wrap(stdout)
	stderr = termsafe.Wrap(stderr)
	g := &Globals{}
	root := newRoot(g, stdout, stderr)
	source.SetTagReader(oncePerDir(gitrepo.NearestTag))
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	err = g.finishOutput(err)
	if sig, ok := interrupt.Received(ctx); ok {
		return interrupted(sig, err, stderr)
	}
	return exitCode(err, stderr)
}

// interrupted is the end of a command a signal stopped: one line saying
// what the command left (its error says it, or it had finished), exit 130.
func interrupted(sig os.Signal, err error, stderr io.Writer) int {
	what := "the command had finished; what it printed is what it did"
	if err != nil {
		what = strings.TrimSuffix(oneLine(err.Error()), ": "+context.Canceled.Error())
		if what == context.Canceled.Error() {
			what = "stopped; nothing was written"
		}
	}
	fmt.Fprintf(stderr, "smpatch: interrupted (%s): %s\n", interrupt.Name(sig), termsafe.Line(what))
	return exitInterrupted
}

// exitCode prints err as one line and returns its exit code.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	if !isSilent(err) {
		fmt.Fprintf(stderr, "smpatch: %s\n", termsafe.Line(oneLine(err.Error())))
	}
	return exitCodeOf(err)
}

func isCobraUsageError(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "unknown command") ||
		strings.HasPrefix(s, "unknown flag") ||
		strings.HasPrefix(s, "unknown shorthand flag") ||
		strings.Contains(s, "requires at least") ||
		strings.Contains(s, "accepts ") ||
		strings.HasPrefix(s, "invalid argument")
}

// oneLine keeps an error to one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// oncePerDir is read answering once per directory: a command reads a
// tree's version more than once, and HEAD does not move under one command.
func oncePerDir(read source.TagReader) source.TagReader {
	var mu sync.Mutex
	answers := map[string]tagAnswer{}
	return func(ctx context.Context, dir string) (*version.Version, string, error) {
		key := dir
		if abs, err := filepath.Abs(dir); err == nil {
			key = abs
		}
		mu.Lock()
		a, ok := answers[key]
		mu.Unlock()
		if ok {
			return a.v, a.from, a.err
		}
		v, from, err := read(ctx, dir)
		if ctx.Err() == nil {
			mu.Lock()
			answers[key] = tagAnswer{v, from, err}
			mu.Unlock()
		}
		return v, from, err
	}
}

type tagAnswer struct {
	v    *version.Version
	from string
	err  error
}
