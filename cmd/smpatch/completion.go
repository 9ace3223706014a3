package main

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/upstream"
)

// Dynamic shell completion: cobra's completion command writes the script
// for bash, zsh, fish or powershell; the functions here give the values.

// registerFormatCompletion completes --format with the command's formats.
func registerFormatCompletion(c *cobra.Command, formats []string) {
	_ = c.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// addCompletions gives each command's arguments and flags their values.
func addCompletions(root *cobra.Command, g *globalOptions) {
	patchNames := func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return completePatchNames(g, args, toComplete)
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		switch cmdName(c) {
		case "show", "apply", "revert", "image apply":
			c.ValidArgsFunction = patchNames
		case "checkout":
			c.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return completeProjectAt(toComplete)
			}
		case "check":
			registerFormatCompletion(c, upstream.Formats)
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
			_ = c.RegisterFlagCompletionFunc("runner", cobra.FixedCompletions(runnerNames, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	walk(root)
}

// runnerNames are the values of matrix run --runner.
var runnerNames = []string{"local", "docker", "slurm", "kubernetes"}

// completePatchNames are the catalog's patches (built-in and --catalog)
// not yet on the command line.
func completePatchNames(g *globalOptions, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	cat, err := g.loadCatalog()
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
func completeCellIDs(g *globalOptions, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	x, err := expandMatrix(context.Background(), g, args[0], &matrixOptions{})
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
