package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/matrix"
	"github.com/smpatch/smpatch/patches"
)

// matrixOptions are the flags the matrix commands share, and what
// expanding a file depends on: the catalog that patch names are checked
// against (loaded when first asked) and where the file's NCCL warnings go.
type matrixOptions struct {
	Catalog  func() (*patches.Catalog, error)
	WarnNCCL func(string)

	ProbeFile string
	Shard     string
	MaxCells  int
	Rules     []string
	NoDefault bool
}

// newMatrixOptions are matrixOptions with f's dependencies.
func newMatrixOptions(f *Factory) matrixOptions {
	return matrixOptions{Catalog: f.Catalog, WarnNCCL: f.WarnNCCL}
}

func (o *matrixOptions) AddFlags(c *cobra.Command) {
	c.Flags().StringVar(&o.ProbeFile, "probe-file", "", "a probe report (smpatch probe -o FILE) for rules that read probe facts")
	c.Flags().StringVar(&o.Shard, "shard", "", "only part i of n of the cells (i/n, 1-based, contiguous blocks)")
	c.Flags().IntVar(&o.MaxCells, "max-cells", 0, "cap on cells after include (default: the file's max_cells, else 256)")
	c.Flags().StringArrayVar(&o.Rules, "rules", nil, "a further rules file (repeatable)")
	c.Flags().BoolVar(&o.NoDefault, "no-default-rules", false, "leave out smpatch's built-in rules")
}

// expandOptions turns the flags into matrix.ExpandOptions: CheckPatch
// looks each patch name up in the catalog.
func (o *matrixOptions) expandOptions(ctx context.Context) (matrix.ExpandOptions, error) {
	opts := matrix.ExpandOptions{MaxCells: o.MaxCells, RuleFiles: o.Rules, NoDefaultRules: o.NoDefault, Context: ctx}
	if o.MaxCells < 0 {
		return opts, withCode(exitUsage, fmt.Errorf("--max-cells %d: want a positive number (0: the file's max_cells)", o.MaxCells))
	}
	if o.Shard != "" {
		s, err := matrix.ParseShard(o.Shard)
		if err != nil {
			return opts, withCode(exitUsage, err)
		}
		opts.Shard = s
	}
	catalog := o.Catalog
	opts.CheckPatch = func(name string) error {
		cat, err := catalog()
		if err != nil {
			return err
		}
		_, err = cat.Get(name)
		return err
	}
	opts.PatchTP = func(name string) ([]int, string) {
		cat, err := catalog()
		if err != nil {
			return nil, ""
		}
		p, err := cat.Get(name)
		if err != nil {
			return nil, ""
		}
		return p.Requires.TP, p.File
	}
	return opts, nil
}

// expand loads file, checks its patch names against the catalog and
// expands it.
func (o *matrixOptions) expand(ctx context.Context, file string) (*matrix.Expansion, error) {
	opts, err := o.expandOptions(ctx)
	if err != nil {
		return nil, err
	}
	return matrix.ExpandFile(file, o.ProbeFile, opts, o.WarnNCCL)
}

// expandMatrix is o.expand with g's catalog and warnings, for the
// commands whose options do not carry them (matrix build).
func expandMatrix(ctx context.Context, g *Globals, file string, o *matrixOptions) (*matrix.Expansion, error) {
	o.Catalog, o.WarnNCCL = g.LoadCatalog, g.WarnNCCL
	return o.expand(ctx, file)
}

// matrixExpandOptions are smpatch matrix expand's flags, streams and
// dependencies.
type matrixExpandOptions struct {
	IO IOStreams
	matrixOptions

	File    string
	JSON    bool
	Explain bool
	GitHub  bool
	Only    []string
}

func (o *matrixExpandOptions) AddFlags(c *cobra.Command) {
	o.matrixOptions.AddFlags(c)
	c.Flags().BoolVar(&o.JSON, "json", false, "print the expansion as JSON")
	addOnlyFlag(c, &o.Only, "list")
	c.Flags().BoolVar(&o.Explain, "explain", false, "show every step, every cell's values and every rule decision")
	c.Flags().BoolVar(&o.GitHub, "github", false, "same as --format github: the runnable cells as a one-line GitHub Actions matrix ({\"include\": [...]}, at most 256: use --shard)")
	_ = c.Flags().MarkHidden("github")
}

func newMatrixExpandCmd(f *Factory) *cobra.Command {
	o := &matrixExpandOptions{matrixOptions: newMatrixOptions(f)}
	c := &cobra.Command{
		Use:   "expand FILE",
		Short: "Expand a matrix file into cells: product, zip, exclude, include, rules",
		Long: "Expand a matrix file in the fixed order product → zip → exclude → include → rules\n" +
			"and list the cells. Pruned cells are listed with the rule and its reason.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.File = streams(c), args[0]
			return runMatrixExpand(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runMatrixExpand(ctx context.Context, o *matrixExpandOptions) error {
	if n := btoi(o.JSON) + btoi(o.Explain) + btoi(o.GitHub); n > 1 {
		return withCode(exitUsage, errors.New("matrix expand: choose one of --json, --explain and --github"))
	}
	x, err := o.expand(ctx, o.File)
	if err != nil {
		return err
	}
	if x, err = onlyExpansion(x, o.Only); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(o.IO.Out, 1<<16)
	switch {
	case o.GitHub:
		err = writeGitHubMatrix(bw, x)
	case o.JSON:
		err = writeExpansionJSON(bw, x)
	case o.Explain:
		printExplain(bw, x)
	default:
		printCells(bw, x)
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeGitHubMatrix prints {"include": [...]} on one line, for
// $GITHUB_OUTPUT and fromJSON.
func writeGitHubMatrix(w io.Writer, x *matrix.Expansion) error {
	include := matrix.GitHubInclude(x)
	if len(include) > matrix.GitHubMatrixLimit {
		return fmt.Errorf("%s: %d cells to run; a GitHub Actions matrix holds at most %d: use --shard i/%d",
			x.Matrix.File, len(include), matrix.GitHubMatrixLimit, (len(include)+matrix.GitHubMatrixLimit-1)/matrix.GitHubMatrixLimit)
	}
	b, err := json.Marshal(map[string]any{"include": include})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeExpansionJSON writes the stable JSON of matrix expand --json: the
// expansion's fields with name, file and axes, cells last. Cells are
// encoded one at a time so that a large matrix is not held twice in memory.
func writeExpansionJSON(w io.Writer, x *matrix.Expansion) error {
	head := map[string]any{
		"name": x.Matrix.Name, "file": x.Matrix.File, "axes": x.Matrix.Axes,
		"total": x.Total, "steps": x.Steps, "excluded": x.Excluded, "rules": x.Rules,
		"baseline": x.Baseline, "notes": x.Notes, "shard": x.Shard, "max_cells": x.MaxCells,
	}
	if x.Excluded == nil {
		head["excluded"] = []any{}
	}
	if x.Notes == nil {
		head["notes"] = []string{}
	}
	b, err := json.MarshalIndent(head, "", "  ")
	if err != nil {
		return err
	}
	// Reopen the object to append "cells".
	b = bytes.TrimRight(bytes.TrimSuffix(bytes.TrimSpace(b), []byte("}")), "\n ")
	if _, err := fmt.Fprintf(w, "%s,\n  \"cells\": [", b); err != nil {
		return err
	}
	// One encoder and one buffer for every cell: the document is written
	// as it is made, and memory does not grow with it.
	var cb bytes.Buffer
	enc := json.NewEncoder(&cb)
	enc.SetIndent("    ", "  ")
	for i, c := range x.Cells {
		cb.Reset()
		if i > 0 {
			cb.WriteByte(',')
		}
		cb.WriteString("\n    ")
		if err := enc.Encode(c); err != nil {
			return err
		}
		if _, err := w.Write(bytes.TrimSuffix(cb.Bytes(), []byte("\n"))); err != nil {
			return err
		}
	}
	if len(x.Cells) > 0 {
		_, err = io.WriteString(w, "\n  ]\n}\n")
	} else {
		_, err = io.WriteString(w, "]\n}\n")
	}
	return err
}

func printCells(w io.Writer, x *matrix.Expansion) {
	width := 0
	for _, c := range x.Cells {
		width = max(width, len(c.ID))
	}
	for _, c := range x.Cells {
		status := ""
		switch {
		case c.Pruned != nil:
			status = "pruned by " + c.Pruned.Rule + ": " + c.Pruned.Reason
		case len(c.Warnings) > 0:
			// Warnings, then the flags require-flag rules added: a rule
			// that changed the command is not a warning.
			var names, added []string
			for _, d := range c.Warnings {
				if d.Action == "require-flag" {
					added = append(added, d.Flag+" by "+d.Rule)
				} else {
					names = append(names, d.Rule)
				}
			}
			var parts []string
			if len(names) > 0 {
				parts = append(parts, "warn: "+strings.Join(names, ", "))
			}
			if len(added) > 0 {
				parts = append(parts, "added "+strings.Join(added, ", "))
			}
			status = strings.Join(parts, "; ")
		}
		if c.ID == x.Baseline {
			status = strings.TrimSpace("baseline " + status)
		}
		if status == "" {
			fmt.Fprintln(w, c.ID)
			continue
		}
		fmt.Fprintf(w, "%-*s  %s\n", width, c.ID, status)
	}
	fmt.Fprintln(w, summaryLine(x))
}

func summaryLine(x *matrix.Expansion) string {
	run, pruned := 0, 0
	for _, c := range x.Cells {
		if c.Pruned != nil {
			pruned++
		} else {
			run++
		}
	}
	s := fmt.Sprintf("%s: %d to run, %d pruned", nCells(len(x.Cells)), run, pruned)
	if x.Shard.Count > 1 {
		s += fmt.Sprintf(" (shard %d/%d of %d cells)", x.Shard.Index, x.Shard.Count, x.Total)
	}
	return s
}

func printExplain(w io.Writer, x *matrix.Expansion) {
	m := x.Matrix
	fmt.Fprintf(w, "matrix %s (%s), max_cells %d\n", m.Name, m.File, x.MaxCells)
	var dims []string
	for _, a := range m.Axes {
		dims = append(dims, fmt.Sprintf("%s %d", a.Name, len(a.Values)))
	}
	st := x.Steps
	fmt.Fprintf(w, "  product  %6s  (%s)\n", matrix.CountString(st.Product), strings.Join(dims, " × "))
	var zips []string
	for _, g := range m.Zip {
		zips = append(zips, "["+strings.Join(g, ", ")+"]")
	}
	if len(zips) == 0 {
		zips = []string{"(no zip groups)"}
	}
	fmt.Fprintf(w, "  zip      %6d  %s\n", st.Zip, strings.Join(zips, " "))
	if len(x.Excluded) == 0 {
		fmt.Fprintf(w, "  exclude  %6d  (no exclude entries)\n", st.Exclude)
	} else {
		fmt.Fprintf(w, "  exclude  %6d\n", st.Exclude)
	}
	for _, e := range x.Excluded {
		fmt.Fprintf(w, "           -%-5d %s  %s\n", e.Removed, e.Where, e.Match)
	}
	fmt.Fprintf(w, "  include  %6d  (%d added, %d extended)\n", st.Include, st.Added, st.Extended)
	fmt.Fprintf(w, "  rules    %6d  to run (%d pruned, %d with warnings; %d rules)\n", st.Runnable, st.Pruned, st.Warned, len(x.Rules))
	hits := map[string]int{}
	for _, c := range x.Cells {
		if c.Pruned != nil {
			hits[c.Pruned.Rule]++
		}
		for _, d := range c.Warnings {
			hits[d.Rule]++
		}
	}
	for _, r := range x.Rules {
		if n := hits[r.Name]; n > 0 {
			fmt.Fprintf(w, "           %-32s %-12s %s\n", r.Name, r.Action, nCells(n))
		}
	}
	if x.Baseline != "" {
		fmt.Fprintf(w, "  baseline %s\n", x.Baseline)
	}
	if x.Shard.Count > 1 {
		fmt.Fprintf(w, "  shard    %d/%d: %d of %d cells\n", x.Shard.Index, x.Shard.Count, len(x.Cells), x.Total)
	}
	shown := map[string]bool{} // decisions printed in full
	for _, c := range x.Cells {
		var vals []string
		for _, v := range c.Values {
			vals = append(vals, v.Axis+"="+v.Shown())
		}
		state := "run"
		if c.Pruned != nil {
			state = "PRUNED"
		}
		fmt.Fprintf(w, "\n%s  %s  %s\n", state, c.ID, strings.Join(vals, " "))
		if c.Origin != "product" {
			fmt.Fprintf(w, "  from %s\n", c.Origin)
		}
		for _, e := range c.Extended {
			fmt.Fprintf(w, "  extended by %s\n", e)
		}
		if c.Pruned != nil {
			printDecision(w, *c.Pruned, shown)
		}
		for _, d := range c.Warnings {
			printDecision(w, d, shown)
		}
	}
	if len(x.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range x.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, summaryLine(x))
}

// printDecision writes a rule's decision on a cell: in full the first
// time, and under a later cell only its rule.
func printDecision(w io.Writer, d matrix.Decision, shown map[string]bool) {
	what := d.Action
	if d.Flag != "" {
		what += " " + d.Flag
	}
	key := what + "\x00" + d.Rule + "\x00" + d.Reason
	if shown[key] {
		fmt.Fprintf(w, "  %s by %s (as above)\n", what, d.Rule)
		return
	}
	shown[key] = true
	fmt.Fprintf(w, "  %s by %s: %s\n", what, d.Rule, d.Reason)
	fmt.Fprintf(w, "    source %s (rule at %s)\n", d.Source, d.Where)
}

// nCells is "1 cell", "2 cells".
func nCells(n int) string {
	if n == 1 {
		return "1 cell"
	}
	return fmt.Sprintf("%d cells", n)
}
