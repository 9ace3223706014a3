package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/smpatch/smpatch/internal/testkit/dockertest"
	"github.com/smpatch/smpatch/internal/testkit/testsvc"
)

// TestDockerScripts runs the stories in testdata/docker against the real
// services of scripts/services.sh: a distribution registry
// ($SMPATCH_TEST_REGISTRY) and a Docker daemon ($SMPATCH_TEST_DOCKER_HOST).
// Without them it skips, loudly; with SMPATCH_REQUIRE_SERVICES=1 (CI) it
// fails. The setup builds the static fake server and a runnable base image
// holding it and a synthetic installed sglang ($WORK/base, an OCI layout).
func TestDockerScripts(t *testing.T) {
	reg := testsvc.Registry(t)
	host := testsvc.DockerHost(t)
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatalf("the docker CLI is not on PATH (scripts/services.sh up installs docker.io): %v", err)
	}
	shared := t.TempDir()
	fs := filepath.Join(shared, "fakeserver")
	if err := dockertest.BuildFakeServer("../../testdata/fakeserver", fs); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(shared, "base")
	if _, err := dockertest.WriteLayout(base, dockertest.Busybox, fs); err != nil {
		t.Fatal(err)
	}
	// Repositories and container names of this run, so that runs sharing
	// the services do not meet.
	run := fmt.Sprintf("t%d", time.Now().UnixNano()%1e9)
	p := scriptParams("testdata/docker", func(e *testscript.Env) error {
		e.Setenv("DOCKER_CONFIG", e.WorkDir+"/.docker")
		e.Setenv("DOCKER_HOST", host)
		e.Setenv("REGISTRY", reg)
		e.Setenv("RUN", run)
		// The story's fake matrix as it is, on the runnable base.
		story, err := os.ReadFile("../../examples/fake/matrix.toml")
		if err != nil {
			return err
		}
		story = append(story, "\n[base]\nimage = \"oci:base\"\n"...)
		if err := os.WriteFile(filepath.Join(e.WorkDir, "story.toml"), story, 0o644); err != nil {
			return err
		}
		return os.Symlink(base, filepath.Join(e.WorkDir, "base"))
	})
	p.Cmds["refenv"] = cmdRefEnv
	p.Cmds["registrycheck"] = cmdRegistryCheck
	p.Cmds["waitcontainer"] = cmdWaitContainer
	testscript.Run(t, p)
}

// refenv FILE CELL VAR: sets $VAR to CELL's reference in the refs file.
func cmdRefEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: refenv FILE CELL VAR")
	}
	refs := map[string]string{}
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &refs))
	ref, ok := refs[args[1]]
	if !ok {
		ts.Fatalf("%s: no cell %s", args[0], args[1])
	}
	ts.Setenv(args[2], ref)
}

// registrycheck FILE: every reference of the refs file is read back from
// the registry: the tag (the cell id) names the recorded digest, the image
// holds /etc/smpatch/manifest.json for that cell, and its installed
// communicator.py has the SM120 gate exactly when the cell has the
// sm120-fusion patch.
func cmdRegistryCheck(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: registrycheck FILE")
	}
	refs := map[string]string{}
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &refs))
	if len(refs) == 0 {
		ts.Fatalf("%s: no refs", args[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for cell, ref := range refs {
		d, err := name.NewDigest(ref)
		ts.Check(err)
		tag, err := name.NewTag(d.Context().String() + ":" + cell)
		ts.Check(err)
		desc, err := remote.Head(tag, remote.WithContext(ctx))
		ts.Check(err)
		if desc.Digest.String() != d.DigestStr() {
			ts.Fatalf("%s: the registry's tag %s is %s, refs.json says %s", cell, tag, desc.Digest, d.DigestStr())
		}
		img, err := remote.Image(d, remote.WithContext(ctx))
		ts.Check(err)
		got, err := img.Digest()
		ts.Check(err)
		if got.String() != d.DigestStr() {
			ts.Fatalf("%s: pulled %s, want %s", cell, got, d.DigestStr())
		}
		files := readImageFiles(ts, img, "etc/smpatch/manifest.json", "usr/local/lib/python3.12/dist-packages/sglang/srt/layers/communicator.py")
		var m struct {
			Cell    string `json:"cell"`
			Patches []struct {
				Name string `json:"name"`
			} `json:"patches"`
		}
		ts.Check(json.Unmarshal([]byte(files["etc/smpatch/manifest.json"]), &m))
		if m.Cell != cell {
			ts.Fatalf("%s: manifest names cell %q", cell, m.Cell)
		}
		patched := strings.HasPrefix(cell, "sm120-fusion.")
		if hasGate := strings.Contains(files["usr/local/lib/python3.12/dist-packages/sglang/srt/layers/communicator.py"], "_is_sm120_supported"); hasGate != patched {
			ts.Fatalf("%s: communicator.py has the SM120 gate: %v, want %v", cell, hasGate, patched)
		}
		if patched && (len(m.Patches) != 1 || m.Patches[0].Name != "sm120-fusion") {
			ts.Fatalf("%s: manifest patches %+v", cell, m.Patches)
		}
		ts.Logf("%s: %s ok (manifest, communicator.py gate %v)", cell, ref, patched)
	}
}

// readImageFiles reads files from an image, layer by layer from the top,
// stopping once every path is found (the patch layer and the synthetic
// sglang's layer are small; the binaries' layers below are not read).
func readImageFiles(ts *testscript.TestScript, img v1.Image, paths ...string) map[string]string {
	layers, err := img.Layers()
	ts.Check(err)
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	out := map[string]string{}
	for i := len(layers) - 1; i >= 0 && len(out) < len(paths); i-- {
		rc, err := layers[i].Uncompressed()
		ts.Check(err)
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			ts.Check(err)
			n := strings.TrimPrefix(h.Name, "/")
			if _, seen := out[n]; want[n] && !seen {
				b, err := io.ReadAll(tr)
				ts.Check(err)
				out[n] = string(b)
			}
		}
		rc.Close()
	}
	for _, p := range paths {
		if _, ok := out[p]; !ok {
			ts.Fatalf("image has no %s", p)
		}
	}
	return out
}

// waitcontainer RE: waits (up to a minute) until a container whose whole
// name matches the regular expression runs on the daemon.
func cmdWaitContainer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitcontainer RE")
	}
	re := regexp.MustCompile(args[0])
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		cmd := exec.Command("docker", "ps", "--format", "{{.Names}}")
		cmd.Env = append(os.Environ(), "DOCKER_HOST="+ts.Getenv("DOCKER_HOST"))
		out, _ := cmd.Output()
		for _, name := range strings.Fields(string(out)) {
			if re.MatchString(name) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("no container matching %s running after a minute", args[0])
}
