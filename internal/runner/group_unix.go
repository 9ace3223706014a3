//go:build unix

package runner

import (
	"os/exec"
	"syscall"
)

// setGroup starts cmd in its own process group and makes cancelling it kill
// the group.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
