//go:build unix

package runner

import (
	"bytes"
	"errors"
	"io"
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

// maxEnviron bounds what is read of one process's environment.
const maxEnviron = 4 << 20

// signalMarked sends sig to every process of this user whose environment
// holds mark (an entry KEY=VALUE, whole) and returns their ids. A process
// of another user cannot be read, and none of this process's own children
// but through the mark: this process itself never carries its children's.
func signalMarked(mark string, sig syscall.Signal) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	want := []byte(mark + "\x00")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if !hasEntry(pid, want) {
			continue
		}
		// Through a pidfd (os.FindProcess holds one where the kernel has
		// them): a process that ended since the read is not mistaken for
		// a new one of the same id.
		if proc, err := os.FindProcess(pid); err == nil {
			if hasEntry(pid, want) {
				_ = proc.Signal(sig)
				out = append(out, pid)
			}
			proc.Release()
		}
	}
	return out
}

// hasEntry reports whether the environment of pid holds entry (with its
// NUL).
func hasEntry(pid int, entry []byte) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxEnviron))
	if err != nil {
		return false
	}
	return bytes.HasPrefix(b, entry) || bytes.Contains(b, append([]byte{0}, entry...))
}

// anyAlive reports whether a process of pids is alive (a zombie is not).
func anyAlive(pids []int) bool {
	for _, pid := range pids {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if f := strings.Fields(s[i+1:]); i >= 0 && len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}
