// Package exit carries smpatch's process exit codes (README.md, "Exit codes")
// through ordinary error values, so packages can say how a failure should end
// the process without knowing about the command line.
//
// It must not know any command or package above it.
package exit
