package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The one output convention of the command line: --format names what is
// printed (text, json, and for some commands more), --json is short for
// --format json, and -o/--output FILE names where it goes instead of
// stdout (written beside FILE and renamed over it, so a failed run leaves
// an earlier FILE as it was). Directories a command writes into are --out DIR.

// formatNames are the words -o refuses as a destination: -o json is the
// kubectl habit for a format, and would otherwise write a file named json.
var formatNames = []string{"json", "yaml", "yml", "text", "junit", "github", "csv", "md", "markdown", "wide"}

// outputOptions are --format, --json and -o/--output of a command that
// writes its own output (version); other commands get the same flags from
// addOutputFlags.
type outputOptions struct {
	Format string
	JSON   bool
	Output string
	file   *pendingFile
}

func (o *outputOptions) AddFlags(c *cobra.Command, formats ...string) {
	f := c.Flags()
	f.StringVar(&o.Format, "format", formats[0], "output format: "+strings.Join(formats, ", "))
	f.BoolVar(&o.JSON, "json", false, "same as --format json")
	f.StringVarP(&o.Output, "output", "o", "", "write the output to `FILE` instead of stdout")
	RegisterFormatCompletion(c, formats)
}

func (o *outputOptions) resolve(c *cobra.Command, g *Globals, formats ...string) error {
	f, err := resolveFormat(c, o.Format, o.JSON, formats)
	if err != nil {
		return err
	}
	o.Format = f
	return checkOutputPath(c, o.Output)
}

func (o *outputOptions) write(c *cobra.Command, fn func(io.Writer) error) error {
	if o.Output == "" {
		return fn(c.OutOrStdout())
	}
	pf, err := openPending(o.Output)
	if err != nil {
		return outputError(c, err)
	}
	if err := fn(pf.f); err != nil {
		pf.discard()
		return err
	}
	return outputError(c, pf.commit())
}

// resolveFormat settles --format against --json: --json alone means json,
// both must agree, and the format must be one the command prints.
func resolveFormat(c *cobra.Command, format string, asJSON bool, formats []string) (string, error) {
	if asJSON {
		if c.Flags().Changed("format") && format != "json" {
			return "", withCode(exitUsage, fmt.Errorf("%s: --json and --format %s disagree; give one", cmdName(c), format))
		}
		format = "json"
	}
	if !slices.Contains(formats, format) {
		return "", withCode(exitUsage, fmt.Errorf("%s: unknown --format %q (want %s)", cmdName(c), format, strings.Join(formats, ", ")))
	}
	return format, nil
}

// checkOutputPath refuses -o FORMAT: a bare format name is almost always
// meant as --format; a file of that name is still reachable as ./NAME.
func checkOutputPath(c *cobra.Command, path string) error {
	if path == "" {
		return nil
	}
	if slices.Contains(formatNames, strings.ToLower(path)) {
		return withCode(exitUsage, fmt.Errorf("%s: -o %s names the file to write, not a format: did you mean --format %s? to write a file named %s, use -o ./%s",
			cmdName(c), path, strings.ToLower(path), path, path))
	}
	return nil
}

func outputError(c *cobra.Command, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s -o: %w", cmdName(c), err)
}

// cmdName is the command's path without the program name: "matrix run".
func cmdName(c *cobra.Command) string {
	p := c.CommandPath()
	if rest, ok := strings.CutPrefix(p, c.Root().Name()+" "); ok {
		return rest
	}
	return p
}

// pendingFile is -o FILE while the command runs: a temporary file beside
// FILE, renamed over it when the command has written its output.
type pendingFile struct {
	path string
	f    *os.File
}

func openPending(path string) (*pendingFile, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// A report meant to be copied to another machine is readable by all.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &pendingFile{path: path, f: f}, nil
}

func (p *pendingFile) discard() {
	p.f.Close()
	os.Remove(p.f.Name())
}

func (p *pendingFile) commit() error {
	defer os.Remove(p.f.Name())
	if err := p.f.Sync(); err != nil {
		p.f.Close()
		return err
	}
	if err := p.f.Close(); err != nil {
		return err
	}
	return os.Rename(p.f.Name(), p.path)
}

// commandFormats are the --format values of the commands whose printing
// is chosen by their own flags (--json, --github, ...): the walk below
// gives each of them --format and -o.
var commandFormats = map[string][]string{
	"matrix expand": {"text", "json", "github"},
}

// formatFlagFor maps a --format value to the command's own boolean flag.
var formatFlagFor = map[string]string{"json": "json", "github": "github"}

// formatWhenOutput is the format a command writes to -o FILE when none is
// given: the probe's saved report (for --probe-file) is JSON.
var formatWhenOutput = map[string]string{"probe": "json"}

// addOutputFlags gives every command that prints with --json the rest of
// the convention: --format and -o/--output. Commands that already have
// --format (check) get -o.
func addOutputFlags(root *cobra.Command, g *Globals) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.RunE == nil || c.Flags().Lookup("json") == nil {
			return
		}
		if c.Flags().Lookup("output") == nil {
			c.Flags().StringVarP(&g.Output, "output", "o", "", "write the output to `FILE` instead of stdout")
		}
		if c.Flags().Lookup("format") == nil {
			formats := commandFormats[cmdName(c)]
			if formats == nil {
				formats = []string{"text", "json"}
			}
			c.Flags().StringVar(&g.Format, "format", "text", "output format: "+strings.Join(formats, ", ")+" (--json is short for --format json)")
			RegisterFormatCompletion(c, formats)
			if g.formatsOf == nil {
				g.formatsOf = map[*cobra.Command][]string{}
			}
			g.formatsOf[c] = formats
		}
	}
	walk(root)
}

// applyOutputFlags runs before the command: it turns --format into the
// command's own flags, refuses -o FORMAT, and points the command's
// output at the -o file.
func applyOutputFlags(c *cobra.Command, g *Globals) error {
	if err := checkOutputPath(c, g.Output); err != nil {
		return err
	}
	if formats, ok := g.formatsOf[c]; ok {
		if err := settleFormat(c, g, formats); err != nil {
			return err
		}
	}
	if g.Output != "" {
		pf, err := openPending(g.Output)
		if err != nil {
			return outputError(c, err)
		}
		g.pending = pf
		g.pendingCmd = c
		c.SetOut(pf.f)
	}
	return nil
}

// finishOutput renames the -o file into place when the command wrote
// something or succeeded; a command that failed before printing leaves
// an earlier FILE untouched.
func (g *Globals) finishOutput(err error) error {
	pf := g.pending
	if pf == nil {
		return err
	}
	g.pending = nil
	st, serr := pf.f.Stat()
	if err != nil && (serr != nil || st.Size() == 0) {
		pf.discard()
		return err
	}
	if cerr := pf.commit(); cerr != nil && err == nil {
		return outputError(g.pendingCmd, cerr)
	}
	return err
}

// settleFormat turns an explicit --format into the command's own flag
// (--json, --github), refusing one that disagrees with such a flag also
// given; without --format, -o FILE gets the command's file format.
func settleFormat(c *cobra.Command, g *Globals, formats []string) error {
	own := ""
	for _, f := range formats {
		if n, ok := formatFlagFor[f]; ok && c.Flags().Changed(n) {
			own = f
		}
	}
	if !c.Flags().Changed("format") {
		if f, ok := formatWhenOutput[cmdName(c)]; ok && g.Output != "" && own == "" {
			g.Format = f
			return c.Flags().Set(formatFlagFor[f], "true")
		}
		if own != "" {
			g.Format = own
		}
		return nil
	}
	if !slices.Contains(formats, g.Format) {
		return withCode(exitUsage, fmt.Errorf("%s: unknown --format %q (want %s)", cmdName(c), g.Format, strings.Join(formats, ", ")))
	}
	for _, f := range formats {
		if n, ok := formatFlagFor[f]; ok && c.Flags().Changed(n) && f != g.Format {
			return withCode(exitUsage, fmt.Errorf("%s: --%s and --format %s disagree; give one", cmdName(c), n, g.Format))
		}
	}
	if n, ok := formatFlagFor[g.Format]; ok {
		return c.Flags().Set(n, "true")
	}
	return nil
}

// HiddenAlias keeps an old flag spelling working, hidden from --help:
// old sets the same value as name.
func HiddenAlias(c *cobra.Command, old, name string) {
	f := c.Flags().Lookup(name)
	c.Flags().AddFlag(&pflag.Flag{Name: old, Usage: "old spelling of --" + name, Value: f.Value, DefValue: f.DefValue, NoOptDefVal: f.NoOptDefVal, Hidden: true})
}
