package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/runner"
	"github.com/smpatch/smpatch/matrix"
)

// Docker runs each cell's image through the docker CLI (which honours
// $DOCKER_HOST and docker contexts), with every GPU, the host's IPC
// namespace, the host's network or a published loopback port, and the
// cell's environment.
type Docker struct {
	// CLI is the docker executable; "docker" on PATH when empty.
	CLI string
	// ShmSize is --shm-size ("32g" when empty): NCCL needs shared memory.
	ShmSize string
	// GPUs is --gpus ("all" when empty); "none" passes no --gpus.
	GPUs string
	// Network is "host" (the default: --network=host, the server's ports
	// are the host's) or "bridge": the container gets a network of its own
	// and the health URL's port is published on 127.0.0.1 (the server must
	// listen on 0.0.0.0 inside the container).
	Network string
	// Prefix starts every container name; names end with the cell id.
	Prefix string
}

// ErrNoDocker says the docker CLI is not installed.
var ErrNoDocker = errors.New("docker runner: the docker CLI was not found on PATH (install docker, or use --runner local)")

// Kind implements Runner.
func (Docker) Kind() RunnerKind { return RunnerDocker }

func (d Docker) cli() (string, error) {
	name := d.CLI
	if name == "" {
		name = "docker"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", ErrNoDocker
	}
	return p, nil
}

// Check implements Runner: ErrNoDocker when the CLI is missing, a one-line
// refusal when the daemon does not answer, and an error for a network mode
// it does not know.
func (d Docker) Check(ctx context.Context) error {
	cli, err := d.cli()
	if err != nil {
		return err
	}
	switch d.Network {
	case "", "host", "bridge":
	default:
		return fmt.Errorf("docker runner: network %q: want host or bridge", d.Network)
	}
	res, err := runner.Run(ctx, dockerCheckTimeout, cli, "version", "--format", "{{.Server.Version}}")
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil || strings.TrimSpace(string(res.Stdout)) == "" {
		why := firstLine(string(res.Stderr))
		if why == "" && err != nil {
			why = err.Error()
		}
		where := os.Getenv("DOCKER_HOST")
		if where == "" {
			where = "the default socket"
		}
		return fmt.Errorf("docker runner: the Docker daemon at %s is not reachable: %s (start dockerd, or set DOCKER_HOST)", where, why)
	}
	return nil
}

// How long the docker CLI's short commands may take: the daemon's answer
// to "docker version", and the removal of a container.
const (
	dockerCheckTimeout  = 20 * time.Second
	dockerRemoveTimeout = 30 * time.Second
)

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// publishedPort is the port of the cell's health URL, which the bridge
// network publishes on 127.0.0.1.
func publishedPort(c *Cell) (string, error) {
	u, err := url.Parse(c.Health)
	if err != nil || c.Health == "" {
		return "", fmt.Errorf("cell %s: the bridge network publishes the health URL's port, and the cell has no health URL", c.ID)
	}
	p := u.Port()
	if p == "" {
		p = "80"
		if u.Scheme == "https" {
			p = "443"
		}
	}
	return p, nil
}

var unsafeName = lazyre.New(`[^a-zA-Z0-9_.-]+`)

// ContainerName is the container a cell runs in.
func (d Docker) ContainerName(c *Cell) string {
	p := d.Prefix
	if p == "" {
		p = "smpatch"
	}
	return unsafeName().ReplaceAllString(p+"-"+c.ID, "_")
}

// RunArgs is the docker command line (without the executable) that starts
// a cell.
func (d Docker) RunArgs(c *Cell) ([]string, error) {
	if c.Image == "" {
		return nil, fmt.Errorf("cell %s: no image to run (build the cells' images first: smpatch matrix build, then pass --refs)", c.ID)
	}
	if !isRegistryRef(c.Image) {
		return nil, fmt.Errorf("cell %s: image %s is not in a registry, and docker runs only registry images (build with smpatch matrix build --push REPO, then pass those refs)", c.ID, c.Image)
	}
	if err := registryRefErr(c.Image); err != nil {
		return nil, fmt.Errorf("cell %s: %w", c.ID, err)
	}
	shm := d.ShmSize
	if shm == "" {
		shm = "32g"
	}
	gpus := d.GPUs
	if gpus == "" {
		gpus = "all"
	}
	if len(c.gpus) > 0 {
		// The quotes keep docker from splitting the list at its commas.
		gpus = `"device=` + strings.Join(c.gpus, ",") + `"`
	}
	// Every option carries its value in the same word, and "--" ends the
	// options: nothing from the matrix or the refs can be read as one.
	args := []string{"run", "--rm", "--name=" + d.ContainerName(c)}
	if gpus != "none" {
		args = append(args, "--gpus="+gpus)
	}
	args = append(args, "--ipc=host")
	switch d.Network {
	case "", "host":
		args = append(args, "--network=host")
	case "bridge":
		p, err := publishedPort(c)
		if err != nil {
			return nil, err
		}
		args = append(args, "--network=bridge", "--publish=127.0.0.1:"+p+":"+p)
	default:
		return nil, fmt.Errorf("docker runner: network %q: want host or bridge", d.Network)
	}
	args = append(args, "--shm-size="+shm)
	keys := slices.Sorted(maps.Keys(c.Env))
	for _, k := range keys {
		args = append(args, "--env="+k+"="+c.Env[k])
	}
	if c.Workdir != "" {
		args = append(args, "--workdir="+c.Workdir)
	}
	args = append(args, "--", c.Image)
	return append(args, c.Command...), nil
}

// registryRefErr refuses what is not a registry image reference: one that
// starts with '-' (docker would read it as an option: "--volume=/:/host"
// mounts the host's root), or that does not parse as one.
func registryRefErr(s string) error {
	if err := matrix.ImageRefErr(s); err != nil {
		return err
	}
	if _, err := name.ParseReference(s); err != nil {
		return fmt.Errorf("%q is not an image reference: %v", s, err)
	}
	return nil
}

// Start implements Runner: "docker run" in the foreground, its output to
// log. The container outlives ctx: Stop ends it.
func (d Docker) Start(ctx context.Context, c *Cell, log io.Writer) (Server, error) {
	cli, err := d.cli()
	if err != nil {
		return nil, err
	}
	args, err := d.RunArgs(c)
	if err != nil {
		return nil, err
	}
	name := d.ContainerName(c)
	// A container left by an interrupted earlier run would take the name.
	_, _ = runner.Run(ctx, dockerRemoveTimeout, cli, "rm", "-f", name)
	fmt.Fprintf(log, "### smpatch: docker %s\n", strings.Join(args, " "))
	p, err := runner.Start(context.Background(), runner.Command{Argv: append([]string{cli}, args...), Stdout: log, MaxOutput: MaxCellLog})
	if err != nil {
		return nil, fmt.Errorf("cell %s: docker run: %w", c.ID, err)
	}
	return &dockerServer{proc: p, log: log, cli: cli, name: name}, nil
}

// dockerServer is a container and the local "docker run" client that
// started it.
type dockerServer struct {
	proc      *runner.Process
	log       io.Writer
	cli, name string
	once      sync.Once
	err       error
}

func (s *dockerServer) Exited() <-chan struct{} { return s.proc.Exited() }

func (s *dockerServer) ExitErr() error { return s.proc.ExitErr() }

// Exec runs argv inside the cell's container ("docker exec"); the container
// already has the cell's environment.
func (s *dockerServer) Exec(ctx context.Context, argv []string, out io.Writer) error {
	return runBeside(ctx, append([]string{s.cli, "exec", s.name}, argv...), nil, "", out)
}

// Stop asks docker to stop the container (SIGTERM, SIGKILL after grace),
// removes it, then ends the local "docker run" client.
func (s *dockerServer) Stop(grace time.Duration) error {
	s.once.Do(func() {
		secs := int(grace.Round(time.Second) / time.Second)
		if secs < 1 {
			secs = 1
		}
		ctx := context.Background()
		_, stopErr := runner.Run(ctx, grace+dockerRemoveTimeout, s.cli, "stop", "-t", strconv.Itoa(secs), s.name)
		_, _ = runner.Run(ctx, dockerRemoveTimeout, s.cli, "rm", "-f", s.name)
		s.err = s.proc.Stop(grace)
		noteDropped(s.log, s.proc.Dropped())
		if s.err == nil && stopErr != nil && !s.exitedNow() {
			s.err = fmt.Errorf("docker stop %s: %w", s.name, stopErr)
		}
	})
	return s.err
}

func (s *dockerServer) exitedNow() bool {
	select {
	case <-s.proc.Exited():
		return true
	default:
		return false
	}
}
