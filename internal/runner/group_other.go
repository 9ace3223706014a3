//go:build !unix

package runner

import "os/exec"

// setGroup leaves cmd as it is where process groups are not available: the
// context still kills the command itself.
func setGroup(cmd *exec.Cmd) {}
