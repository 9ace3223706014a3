// Command cobraonly is the second floor of bench/startup.bench.sh: a cobra
// root with a dozen subcommands and smpatch's global flags, printing its
// version, built as smpatch is: what any cobra command line costs to start.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{Use: "cobraonly", Version: "dev", SilenceUsage: true}
	pf := root.PersistentFlags()
	pf.StringArray("catalog", nil, "a directory of patches")
	pf.String("python", "", "the Python interpreter")
	pf.BoolP("verbose", "v", false, "say more")
	pf.BoolP("quiet", "q", false, "say less")
	pf.String("color", "auto", "colour")
	for _, n := range []string{"list", "show", "apply", "revert", "status", "probe", "journal", "version", "check", "checkout", "matrix", "image", "triage"} {
		c := &cobra.Command{Use: n, Short: n, RunE: func(*cobra.Command, []string) error { return nil }}
		c.Flags().Bool("json", false, "JSON")
		c.Flags().StringP("output", "o", "", "file")
		root.AddCommand(c)
	}
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
