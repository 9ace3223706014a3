//go:build !unix

package runner

import (
	"os"
	"os/exec"
	"syscall"
)

// Where process groups are not available, the leader stands for its group.

func setGroupOnly(cmd *exec.Cmd) {}

func terminateGroup(pid int) error { return killGroup(pid) }

func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// groupAlive is false: the leader's own exit is all that can be waited for.
func groupAlive(int) bool { return false }

// Processes that left the group are not looked for.
func signalMarked(string, syscall.Signal) []int { return nil }

func anyAlive([]int) bool { return false }
