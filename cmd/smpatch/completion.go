package main

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/upstream"
)

// Dynamic shell completion: cobra's completion command writes the script
// for bash, zsh, fish or powershell; the functions here give the values.

// RegisterFormatCompletion completes --format with the command's formats.
func RegisterFormatCompletion(c *cobra.Command, formats []string) {
	_ = c.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// addCompletions gives the arguments of show, apply and revert their patch
// names (the other commands get theirs from addCommandCompletions).
func addCompletions(root *cobra.Command, g *Globals) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "show", "apply", "revert":
			c.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return CompletePatchNames(g, args, toComplete)
			}
		}
	}
}

// CompletePatchNames are the catalog's patches (built-in and --catalog)
// not yet on the command line.
func CompletePatchNames(g *Globals, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	cat, err := g.LoadCatalog()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []cobra.Completion
	for _, p := range cat.All() {
		if strings.HasPrefix(p.Name, toComplete) && !slices.Contains(args, p.Name) {
			out = append(out, cobra.CompletionWithDesc(p.Name, p.Summary))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// The other commands' values: patch names of image apply, PROJECT@,
// matrix files, cell ids and runners.

func addCommandCompletions(root *cobra.Command, g *Globals) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		switch cmdName(c) {
		case "image apply":
			c.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return CompletePatchNames(g, args, toComplete)
			}
		case "checkout":
			c.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return completeProjectAt(toComplete)
			}
		case "check":
			RegisterFormatCompletion(c, upstream.Formats)
			_ = c.RegisterFlagCompletionFunc("upstream", func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return completeProjectAt(toComplete)
			})
		case "matrix expand", "matrix render", "matrix build", "matrix run":
			c.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return []cobra.Completion{"toml"}, cobra.ShellCompDirectiveFilterFileExt
			}
			if c.Flags().Lookup("only") != nil {
				_ = c.RegisterFlagCompletionFunc("only", func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
					return completeCellIDs(g, args, toComplete)
				})
			}
		}
		if c.Flags().Lookup("runner") != nil {
			var kinds []cobra.Completion
			for _, k := range launch.RunnerKinds() {
				kinds = append(kinds, string(k))
			}
			_ = c.RegisterFlagCompletionFunc("runner", cobra.FixedCompletions(kinds, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	walk(root)
}

// completeProjectAt is PROJECT@ for each known project; the ref after @
// is the user's to type.
func completeProjectAt(toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if strings.Contains(toComplete, "@") {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, p := range []source.Project{source.SGLang, source.FlashInfer} {
		if s := string(p) + "@"; strings.HasPrefix(s, toComplete) {
			out = append(out, s)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// completeCellIDs are the cell ids of the matrix file given as the first
// argument (every cell, pruned ones too: --only accepts them).
func completeCellIDs(g *Globals, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	o := matrixOptions{Catalog: g.LoadCatalog, WarnNCCL: g.WarnNCCL}
	x, err := o.expand(context.Background(), args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []cobra.Completion
	for _, c := range x.Cells {
		if strings.HasPrefix(c.ID, toComplete) {
			desc := ""
			if c.Pruned != nil {
				desc = "pruned by " + c.Pruned.Rule
			}
			out = append(out, cobra.CompletionWithDesc(c.ID, desc))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
