package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/internal/sigwatch"
	"github.com/smpatch/smpatch/internal/termsafe"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/probe"
	"github.com/smpatch/smpatch/source"
)

// Version is the program's version, set by its main package (make stamps
// it with -ldflags "-X main.version=...").
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

	config        *config // the config file, read before the command runs
	defaultPython string  // the config file's python, below --python and $SMPATCH_PYTHON

	prog        Program          // the program whose root this is
	args        []string         // the command line, for the hand-over to smpatch-full
	stopSignals func()           // undoes catchSignals
	catalog     *patches.Catalog // loaded once, by LoadCatalog
	formatsOf   map[*cobra.Command][]string
	stderr      io.Writer    // the command's standard error, for warnings
	pending     *pendingFile // -o FILE while the command runs
	pendingCmd  *cobra.Command
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

// Program is one of the two programs built on this package: smpatch, the
// lean one, runs the commands of this package and hands the others to
// smpatch-full (Delegated); smpatch-full adds them (package full).
type Program struct {
	// Name is the program's name in usage lines and error messages.
	Name string
	// Commands are the commands the program adds to the lean ones; nil
	// for smpatch, which lists stubs of the Delegated commands instead.
	Commands func(g *Globals) []*cobra.Command
	// Complete, when set, gives the added commands' arguments and flags
	// their completions once the tree is built.
	Complete func(root *cobra.Command, g *Globals)
	// ProbeImage is probe --image: the static probe of an image's
	// filesystem; nil in smpatch, which hands probe --image over.
	ProbeImage func(ctx context.Context, ref string) (*probe.Report, error)
	// TagReader reads a checkout's nearest version tag in process; nil in
	// smpatch, which asks smpatch-full (VersionTagCmd).
	TagReader source.TagReader
}

// Lean is the smpatch program: every command of this package in process,
// the Delegated ones through smpatch-full.
var Lean = Program{Name: "smpatch"}

// leanCommands are the commands of this package, in the order they are
// added to the root.
var leanCommands = []struct {
	name  string
	build func(*Globals) *cobra.Command
}{
	{"list", newListCmd},
	{"show", newShowCmd},
	{"apply", newApplyCmd},
	{"revert", newRevertCmd},
	{"status", newStatusCmd},
	{"probe", newProbeCmd},
	{"journal", newJournalCmd},
	{"version", newVersionCmd},
}

// NewRoot builds p's command tree.
func (p Program) NewRoot(g *Globals, stdout, stderr io.Writer) *cobra.Command {
	return p.newRoot(g, stdout, stderr, "")
}

// onlyCommand is the command of this package a command line of smpatch
// runs when its first word names one ("apply" in `smpatch apply X`):
// that command needs no other beside it in the tree, neither for its
// flags, its help and errors nor for the hand-over (it is not handed
// over). "" for every other command line (help, completion, global flags
// first, a command of smpatch-full, smpatch-full itself), which gets the
// whole tree.
func (p Program) onlyCommand(args []string) string {
	if p.Commands != nil || len(args) == 0 {
		return ""
	}
	for _, lc := range leanCommands {
		if lc.name == args[0] {
			return lc.name
		}
	}
	return ""
}

// newRoot builds p's command tree; with only set (see onlyCommand) the
// root holds that command alone: building the other commands, their
// flags and examples costs a tenth of the CPU time of a command as small
// as a revert with nothing applied.
func (p Program) newRoot(g *Globals, stdout, stderr io.Writer, only string) *cobra.Command {
	g.prog = p
	root := &cobra.Command{
		Use:           p.Name,
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
	for _, lc := range leanCommands {
		if only != "" && lc.name != only {
			continue
		}
		c := lc.build(g)
		deferSignals(c)
		root.AddCommand(c)
	}
	switch {
	case only != "":
	case p.Commands != nil:
		root.AddCommand(p.Commands(g)...)
	default:
		root.AddCommand(delegatedStubs(g)...)
	}
	addOutputFlags(root, g)
	addExamples(root)
	addCompletions(root, g)
	if p.Complete != nil {
		p.Complete(root, g)
	}
	markUsageErrors(root)
	return root
}

// skipDefaultCompletion leaves out cobra's completion command (four
// subcommands and their flags, built on every run) when the command line
// names another command, which neither lists nor runs it: `smpatch
// apply ...` does not pay for it, `smpatch --help`, `help`, `completion`
// and shell completion requests keep it.
func skipDefaultCompletion(root *cobra.Command, args []string) {
	c, _, err := root.Find(args)
	if err != nil || c == root || c.Name() == "help" {
		return
	}
	root.CompletionOptions.DisableDefaultCmd = true
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

// Run executes smpatch's command line and returns the process exit code;
// a command it does not link replaces the process with smpatch-full.
func Run(args []string, stdout, stderr io.Writer) int {
	return Lean.Run(args, stdout, stderr)
}

// Run executes the command line with p and returns the process exit code.
func (p Program) Run(args []string, stdout, stderr io.Writer) int {
	// Text from elsewhere never reaches a terminal raw: names, logs and
	// catalog text are escaped on both streams (colour and progress write
	// past the escaping, escaping what they show themselves: RawWriter).
	stdout = termsafe.Wrap(stdout)
	stderr = termsafe.Wrap(stderr)
	g := &Globals{args: args}
	root := p.newRoot(g, stdout, stderr, p.onlyCommand(args))
	read := p.TagReader
	if read == nil {
		read = askFull
	}
	source.SetTagReader(oncePerDir(read))
	if p.Commands == nil {
		if what := handsOver(root, args); what != "" {
			// Before anything runs: no signal handler, config or
			// output file of this process is left behind.
			return p.exitCode(g.delegate(what), stderr)
		}
	}
	skipDefaultCompletion(root, args)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if g.stopSignals != nil {
		g.stopSignals()
	}
	return p.exitCode(g.finishOutput(err), stderr)
}

// exitCode prints err as one line and returns its exit code.
func (p Program) exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exit.OK
	}
	code := exit.Code(err)
	if code == exit.Failure && isCobraUsageError(err) {
		code = exit.Usage
	}
	if !exit.IsSilent(err) {
		fmt.Fprintf(stderr, "%s: %s\n", p.Name, termsafe.Line(oneLine(err.Error())))
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

// SignalDelay is how long a command of this package runs before SIGINT and
// SIGTERM are caught (sigwatch): each of them is safe to kill outright
// before then, since what it writes is journaled (the next command
// recovers it) or is nothing, and it asks for the watch at once before it
// starts a child process or creates an output file. Far shorter than a
// person takes to press Ctrl-C, far longer than an apply of a few files.
// The commands smpatch-full adds (runs, builds, walks of history) catch
// the signals from their start.
const SignalDelay = 100 * time.Millisecond

// deferredSignals marks the commands that catch signals after SignalDelay.
const deferredSignals = "smpatch-signals-deferred"

// deferSignals marks c and every command under it.
func deferSignals(c *cobra.Command) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[deferredSignals] = "yes"
	for _, sub := range c.Commands() {
		deferSignals(sub)
	}
}

// catchSignals makes SIGINT and SIGTERM cancel c's context (a command
// stops, cleans up and exits 130) from here until the command returns;
// for the commands of this package, from SignalDelay on (see there). It
// is set up when a command runs, not before: --version, help and usage
// errors start no signal watcher.
func (g *Globals) catchSignals(c *cobra.Command) {
	var after time.Duration
	if c.Annotations[deferredSignals] != "" {
		after = SignalDelay
	}
	ctx, stop := sigwatch.Catch(c.Context(), after)
	g.stopSignals = stop
	c.SetContext(ctx)
}
