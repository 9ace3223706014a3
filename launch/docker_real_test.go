package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/smpatch/smpatch/internal/testkit/dockertest"
	"github.com/smpatch/smpatch/internal/testkit/testsvc"
)

var (
	realBaseOnce sync.Once
	realBase     string
	realBaseErr  error
)

// realDocker points the docker CLI at the test daemon and loads the
// runnable base image (busybox, the fake server) into it once.
func realDocker(t *testing.T) string {
	t.Helper()
	host := testsvc.DockerHost(t)
	t.Setenv("DOCKER_HOST", host)
	realBaseOnce.Do(func() {
		img, err := dockertest.Image(dockertest.Busybox, fakeServer)
		if err != nil {
			realBaseErr = err
			return
		}
		tag, _ := name.NewTag(fmt.Sprintf("smpatch-launch-test/base:%d", os.Getpid()))
		tar := filepath.Join(os.TempDir(), fmt.Sprintf("smpatch-launch-base-%d.tar", os.Getpid()))
		defer os.Remove(tar)
		if realBaseErr = tarball.WriteToFile(tar, tag, img); realBaseErr != nil {
			return
		}
		if out, err := exec.Command("docker", "load", "-i", tar).CombinedOutput(); err != nil {
			realBaseErr = fmt.Errorf("docker load: %v\n%s", err, out)
			return
		}
		realBase = tag.String()
	})
	if realBaseErr != nil {
		t.Fatal(realBaseErr)
	}
	return realBase
}

func containerExists(t *testing.T, name string) bool {
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "name=^"+name+"$").Output()
	if err != nil {
		t.Fatal(err)
	}
	return len(bytes.TrimSpace(out)) > 0
}

// On the real daemon, Stop sends SIGTERM and, after the grace, SIGKILL: a
// server that ends on SIGTERM exits 0 with its shutdown line in the log; one
// that ignores SIGTERM is killed (exit 137). Neither container is left.
func TestDockerRealStop(t *testing.T) {
	image := realDocker(t)
	d := Docker{GPUs: "none", ShmSize: "64m", Prefix: fmt.Sprintf("smpatch-stop-%d", os.Getpid())}
	if err := d.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode    string
		exit    string
		logLine string
	}{
		{"ok", "", "Received terminated; shutting down"},
		{"ignore-term", "exit status 137", "The server is fired up"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			port := freePort(t)
			c := &Cell{ID: tc.mode, Image: image, Command: []string{"fakeserver", "-mode", tc.mode, "-delay", "10ms", "-port", strconv.Itoa(port)}}
			var log bytes.Buffer
			var mu sync.Mutex
			srv, err := d.Start(context.Background(), c, writerFunc(func(p []byte) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				return log.Write(p)
			}))
			if err != nil {
				t.Fatal(err)
			}
			url := fmt.Sprintf("http://127.0.0.1:%d/health", port)
			deadline := time.Now().Add(time.Minute)
			for {
				resp, err := http.Get(url)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
				if time.Now().After(deadline) {
					srv.Stop(time.Second)
					t.Fatalf("not healthy at %s", url)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := srv.Stop(time.Second); err != nil {
				t.Fatal(err)
			}
			<-srv.Exited()
			got := ""
			if err := srv.ExitErr(); err != nil {
				got = err.Error()
			}
			if got != tc.exit {
				t.Errorf("docker run ended with %q, want %q", got, tc.exit)
			}
			mu.Lock()
			if !strings.Contains(log.String(), tc.logLine) {
				t.Errorf("log lacks %q:\n%s", tc.logLine, log.String())
			}
			mu.Unlock()
			if containerExists(t, d.ContainerName(c)) {
				t.Errorf("container %s left behind", d.ContainerName(c))
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// GPUs cannot run here, but the flags the runner renders reach the daemon:
// a container created with them carries the device requests.
func TestDockerRealGPUFlags(t *testing.T) {
	image := realDocker(t)
	d := Docker{Prefix: fmt.Sprintf("smpatch-gpus-%d", os.Getpid())}
	for _, tc := range []struct {
		gpus []string
		want string
	}{
		{nil, `[{"Driver":"","Count":-1,"DeviceIDs":null,"Capabilities":[["gpu"]],"Options":{}}]`},
		{[]string{"2", "3"}, `[{"Driver":"","Count":0,"DeviceIDs":["2","3"],"Capabilities":[["gpu"]],"Options":{}}]`},
	} {
		c := &Cell{ID: "gpus" + strings.Join(tc.gpus, ""), Image: image, Command: []string{"fakeserver"}, gpus: tc.gpus}
		args, err := d.RunArgs(c)
		if err != nil {
			t.Fatal(err)
		}
		if args[0] != "run" {
			t.Fatalf("args %v", args)
		}
		create := append([]string{"create"}, args[1:]...)
		out, err := exec.Command("docker", create...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(create, " "), err, out)
		}
		id := strings.TrimSpace(string(out))
		insp, err := exec.Command("docker", "inspect", "--format", "{{json .HostConfig.DeviceRequests}}", id).Output()
		exec.Command("docker", "rm", "-f", id).Run()
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(insp, &got); err != nil {
			t.Fatalf("%s: %v", insp, err)
		}
		json.Unmarshal([]byte(tc.want), &want)
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Errorf("gpus %v: DeviceRequests %s, want %s", tc.gpus, g, w)
		}
	}
}

// A daemon that does not answer is refused before anything starts, in one
// line naming where it was looked for.
func TestDockerCheckNoDaemon(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("SKIP (no docker CLI): install docker.io (scripts/services.sh up docker)")
	}
	sock := filepath.Join(t.TempDir(), "none.sock")
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	err := Docker{}.Check(context.Background())
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "docker runner: the Docker daemon at unix://"+sock+" is not reachable: ") || strings.Contains(msg, "\n") {
		t.Errorf("got %q", msg)
	}
}
