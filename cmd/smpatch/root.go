package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/internal/termsafe"
	"github.com/smpatch/smpatch/patches"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// globalOptions are the flags every command shares.
type globalOptions struct {
	Catalogs []string // --catalog DIR, repeatable; $SMPATCH_CATALOG (colon-separated) is added
	Python   string   // --python PATH; default python3 on PATH

	Verbose bool   // -v/--verbose
	Quiet   bool   // -q/--quiet
	Color   string // --color auto|always|never
	Format  string // --format of the commands addOutputFlags gave it
	Output  string // -o/--output FILE

	config        *config // the config file, read before the command runs
	defaultPython string  // the config file's python, below --python and $SMPATCH_PYTHON

	catalog    *patches.Catalog // loaded once, by loadCatalog
	formatsOf  map[*cobra.Command][]string
	stderr     io.Writer    // the command's standard error, for warnings
	pending    *pendingFile // -o FILE while the command runs
	pendingCmd *cobra.Command
}

// CatalogDirs is --catalog followed by the directories of $SMPATCH_CATALOG.
func (g *globalOptions) CatalogDirs() []string {
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
func (g *globalOptions) PythonPath() string {
	if g.Python != "" {
		return g.Python
	}
	if g.defaultPython != "" {
		return g.defaultPython
	}
	return "python3"
}

func newRootCmd(g *globalOptions, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "smpatch",
		Short:         "Safe, revertible source patches for sglang and flashinfer on GPUs upstream does not fully support yet",
		Long:          rootLong,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          groupArgs,
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
	root.AddCommand(
		newListCmd(g),
		newShowCmd(g),
		newApplyCmd(g),
		newRevertCmd(g),
		newStatusCmd(g),
		newProbeCmd(g),
		newCheckoutCmd(g),
		newCheckCmd(g),
		newMatrixCmd(g),
		newImageCmd(g),
		newTriageCmd(g),
		newJournalCmd(g),
		newVersionCmd(g),
	)
	addOutputFlags(root, g)
	addExamples(root)
	addCompletions(root, g)
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

// run executes the command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := &globalOptions{}
	// Text from elsewhere never reaches a terminal raw: names, logs and
	// catalog text are escaped on both streams (colour and progress write
	// past the escaping, escaping what they show themselves: rawWriter).
	stdout = termsafe.Wrap(stdout)
	stderr = termsafe.Wrap(stderr)
	root := newRootCmd(g, stdout, stderr)
	root.SetArgs(args)
	err := g.finishOutput(root.ExecuteContext(ctx))
	if err == nil {
		return exit.OK
	}
	code := exit.Code(err)
	if code == exit.Failure && isCobraUsageError(err) {
		code = exit.Usage
	}
	if !exit.IsSilent(err) {
		fmt.Fprintf(stderr, "smpatch: %s\n", termsafe.Line(oneLine(err.Error())))
	}
	if errors.Is(err, context.Canceled) && code == exit.Failure {
		code = 130
	}
	return code
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
