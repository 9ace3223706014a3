package main

import (
	"github.com/spf13/cobra"
)

// Dynamic shell completion: cobra's completion command writes the script
// for bash, zsh, fish or powershell; the functions here give the values.

// registerFormatCompletion completes --format with the command's formats.
func registerFormatCompletion(c *cobra.Command, formats []string) {
	_ = c.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}
