package testsvc

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A module of its own run by a copy of scripts/services.sh: up starts it
// once and says where it listens, up again keeps it, env exports it, down
// stops what up started and nothing else, an unknown name fails.
func TestServicesScript(t *testing.T) {
	root := t.TempDir()
	scripts := filepath.Join(root, "scripts")
	if err := os.MkdirAll(filepath.Join(scripts, "services.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../../scripts/services.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scripts, "services.sh"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	module := `
sleeper_up() {
  local dir
  dir="$(svc_dir sleeper)"
  if svc_running "$dir/pid"; then
    echo "sleeper: already running (pid $(cat "$dir/pid"))"
    return
  fi
  svc_start "$dir/pid" "$dir/log" sleep 600
  echo "sleeper: listening nowhere (pid $(cat "$dir/pid"))"
}
sleeper_down() { svc_stop "$SMPATCH_SERVICES_DIR/sleeper/pid" 5; }
sleeper_env() {
  svc_running "$SMPATCH_SERVICES_DIR/sleeper/pid" && echo "export SMPATCH_TEST_SLEEPER=$(cat "$SMPATCH_SERVICES_DIR/sleeper/pid")" || true
}
`
	if err := os.WriteFile(filepath.Join(scripts, "services.d", "sleeper.sh"), []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "services")
	sh := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(scripts, "services.sh"), args...)
		cmd.Env = append(os.Environ(), "SMPATCH_SERVICES_DIR="+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// A process of the same kind that the script did not start.
	other := exec.Command("sleep", "600")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()

	out, err := sh("up")
	// A timestamped header per service, then what the service says.
	if err != nil || !strings.Contains(out, "\nsleeper: listening nowhere (pid ") || !regexp.MustCompile(`=== \[\d\d:\d\d:\d\d\] services: up sleeper\n`).MatchString(out) {
		t.Fatalf("up: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "sleeper", "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("pid %q not running", data)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	if out, err := sh("up", "sleeper"); err != nil || !strings.Contains(out, "already running (pid "+strconv.Itoa(pid)+")") {
		t.Fatalf("up again: %v\n%s", err, out)
	}
	out, err = sh("env")
	if err != nil || !strings.Contains(out, "export SMPATCH_SERVICES_DIR="+dir+"\n") || !strings.Contains(out, "export SMPATCH_TEST_SLEEPER="+strconv.Itoa(pid)+"\n") {
		t.Fatalf("env: %v\n%s", err, out)
	}
	if out, err := sh("up", "nosuch"); err == nil || !strings.Contains(out, "unknown service nosuch (known: sleeper)") {
		t.Fatalf("unknown: %v\n%s", err, out)
	}
	if out, err := sh("down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still running after down", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("down stopped a process it did not start: %v", err)
	}
	if out, err := sh("env"); err != nil || strings.Contains(out, "SLEEPER") {
		t.Errorf("env after down: %v\n%s", err, out)
	}
	if out, err := sh("status"); err != nil || out != "sleeper: stopped\n" {
		t.Errorf("status after down: %v\n%q", err, out)
	}
}

func zombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] == "Z"
}
