package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Dynamic shell completion: cobra's completion command writes the script
// for bash, zsh, fish or powershell; the functions here give the values.

// RegisterFormatCompletion completes --format with the command's formats.
func RegisterFormatCompletion(c *cobra.Command, formats []string) {
	_ = c.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// addCompletions gives the arguments of show, apply and revert their patch
// names (the other commands get theirs in completion_more.go).
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
