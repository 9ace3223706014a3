//go:build unix

package runner

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// setGroupOnly starts cmd as the leader of a process group of its own.
func setGroupOnly(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func terminateGroup(pgid int) error { return syscall.Kill(-pgid, syscall.SIGTERM) }

func killGroup(pgid int) error { return syscall.Kill(-pgid, syscall.SIGKILL) }

// groupAlive reports whether any process of the group is left. A leader
// that has exited but was not yet waited for still counts; orphaned
// zombies (whose reaper is slow or absent) do not.
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	live, ok := liveMembers(pgid)
	return !ok || live
}

// liveMembers scans /proc for a process of group pgid that is not a
// zombie. ok is false when /proc cannot be read.
func liveMembers(pgid int) (live, ok bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 {
			continue
		}
		if pg, _ := strconv.Atoi(f[2]); pg == pgid && f[0] != "Z" && f[0] != "X" {
			return true, true
		}
	}
	return false, true
}
