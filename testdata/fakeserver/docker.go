package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fakeDocker is the fake server invoked under the name "docker": just enough
// of the docker CLI for the matrix runner's docker runner. A "container" is a
// process started in a session of its own (so, as with real docker, killing
// the "docker run" client does not stop it); $FAKEDOCKER_STATE holds, per
// container name, its pid (NAME.pid), environment (NAME.env) and the full
// command line it was run with (NAME.run).
//
//	docker version [--format F]
//	docker run --rm --name N [--gpus G] [--ipc=host] [--network=host] [--shm-size S] [-e K=V]... [-w DIR] [--] IMAGE CMD...
//	docker exec N CMD...
//	docker stop -t SECONDS N
//	docker rm -f N
func fakeDocker(args []string) int {
	state := os.Getenv("FAKEDOCKER_STATE")
	if state == "" {
		fmt.Fprintln(os.Stderr, "fake docker: $FAKEDOCKER_STATE is not set")
		return 125
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "fake docker: no command")
		return 125
	}
	switch args[0] {
	case "version":
		fmt.Println("fake")
		return 0
	case "run":
		return dockerRun(state, args[1:])
	case "exec":
		return dockerExec(state, args[1:])
	case "stop":
		return dockerStop(state, args[1:])
	case "rm":
		return dockerRm(state, args[1:])
	}
	fmt.Fprintf(os.Stderr, "fake docker: unsupported command %q\n", args[0])
	return 125
}

func dockerRun(state string, args []string) int {
	var name, dir string
	env := map[string]string{}
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		if args[i] == "--" { // the end of the options: the image comes next
			i++
			break
		}
		flag, val, hasVal := strings.Cut(args[i], "=")
		value := func() string {
			if hasVal {
				return val
			}
			i++
			if i < len(args) {
				return args[i]
			}
			return ""
		}
		switch flag {
		case "--rm":
		case "--name":
			name = value()
		case "-e", "--env":
			k, v, _ := strings.Cut(value(), "=")
			env[k] = v
		case "-w", "--workdir":
			dir = value()
		case "--gpus", "--shm-size", "--ipc", "--network":
			value()
		default:
			fmt.Fprintf(os.Stderr, "fake docker: unknown flag %s\n", flag)
			return 125
		}
	}
	if name == "" || i+1 >= len(args) {
		fmt.Fprintln(os.Stderr, "fake docker: run needs --name, an image and a command")
		return 125
	}
	cmdline := args[i+1:]
	os.WriteFile(filepath.Join(state, name+".run"), []byte(strings.Join(append([]string{"run"}, args...), " ")), 0o644)
	envJSON, _ := json.Marshal(env)
	os.WriteFile(filepath.Join(state, name+".env"), envJSON, 0o644)

	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Env = withEnv(env)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "docker: Error response from daemon: %v\n", err)
		return 127
	}
	pidFile := filepath.Join(state, name+".pid")
	os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	// The client ignores SIGTERM like docker run without --sig-proxy would
	// not; only "docker stop" ends the container.
	signal.Ignore(syscall.SIGTERM)
	err := cmd.Wait()
	// As with docker, the container ends with its first process.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	os.Remove(pidFile)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() < 0 {
			return 137
		}
		return ee.ExitCode()
	}
	return 0
}

func withEnv(env map[string]string) []string {
	out := os.Environ()
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func dockerExec(state string, args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "fake docker: exec needs a container and a command")
		return 125
	}
	name := args[0]
	if _, err := os.Stat(filepath.Join(state, name+".pid")); err != nil {
		fmt.Fprintf(os.Stderr, "Error response from daemon: No such container: %s\n", name)
		return 1
	}
	env := map[string]string{}
	data, _ := os.ReadFile(filepath.Join(state, name+".env"))
	json.Unmarshal(data, &env)
	cmd := exec.Command(args[1], args[2:]...)
	cmd.Env = withEnv(env)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 126
	}
	return 0
}

func containerPid(state, name string) int {
	data, err := os.ReadFile(filepath.Join(state, name+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(data))
	return pid
}

// alive reports whether the container's session still has a live process.
func alive(pid int) bool {
	return syscall.Kill(-pid, 0) == nil
}

func dockerStop(state string, args []string) int {
	timeout := 10
	var name string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-t", "--time":
			i++
			if i < len(args) {
				timeout, _ = strconv.Atoi(args[i])
			}
		default:
			name = args[i]
		}
	}
	pid := containerPid(state, name)
	if pid == 0 {
		fmt.Fprintf(os.Stderr, "Error response from daemon: No such container: %s\n", name)
		return 1
	}
	syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(time.Duration(timeout) * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	fmt.Println(name)
	return 0
}

func dockerRm(state string, args []string) int {
	name := args[len(args)-1]
	if pid := containerPid(state, name); pid != 0 {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
	return 0
}
