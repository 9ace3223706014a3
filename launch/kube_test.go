package launch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/smpatch/smpatch/internal/testkit/testsvc"
	"github.com/smpatch/smpatch/matrix"
)

// kubeconfig is the test control plane's ($SMPATCH_TEST_KUBECONFIG, which
// scripts/services.sh env sets).
func kubeconfig(t *testing.T) string {
	t.Helper()
	return testsvc.Need(t, "kubernetes", "SMPATCH_TEST_KUBECONFIG")
}

// Values YAML 1.1 reads as something other than a string when unquoted.
const trickyMatrix = `name = "yaml-tricky"
[axes]
flag = ["y", "n", "on", "off", "yes", "null", "1.0", "0x1F", "012", "1e3", "true"]
[launch]
env = { SMPATCH_FLAG = "{{.flag}}", SMPATCH_TILDE = "~" }
command = ["fakeserver", "--tp", "8", "--flag", "{{.flag}}", "--port", "30000"]
health = "http://127.0.0.1:30000/health"
bench = ["fakeserver", "bench", "-url", "http://127.0.0.1:30000"]
`

// Every Job manifest matrix render writes — the story's and one whose cells
// are named by values YAML would misread (a cell named y) — reads back as
// the same Job, and the real API server accepts it (server-side dry run).
func TestKubeJobManifestsDryRun(t *testing.T) {
	kc := kubeconfig(t)
	dir := t.TempDir()
	tricky := filepath.Join(dir, "tricky.toml")
	if err := os.WriteFile(tricky, []byte(trickyMatrix), 0o644); err != nil {
		t.Fatal(err)
	}
	const image = "registry.example/smpatch/cells@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, file := range []string{"../examples/fake/matrix.toml", tricky} {
		m, err := matrix.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		x, err := m.Expand(matrix.ExpandOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refs := map[string]string{}
		for _, c := range x.Cells {
			refs[c.ID] = image
		}
		files, err := matrix.Render(x, matrix.RenderOptions{Refs: refs, Job: JobYAML})
		if err != nil {
			t.Fatal(err)
		}
		k := &Kube{Client: kubeClientFor(kc, "default"), Jobs: map[string]*batchv1.Job{}}
		var cells []*Cell
		deadlines := 0
		for _, c := range x.Cells {
			if c.Pruned != nil {
				continue
			}
			data := files[c.ID+"/job.yaml"]
			if data == nil {
				t.Fatalf("%s: no job.yaml for %s", file, c.ID)
			}
			var job batchv1.Job
			if err := yaml.UnmarshalStrict(data, &job); err != nil {
				t.Fatalf("%s: %s/job.yaml does not read back: %v\n%s", file, c.ID, err, data)
			}
			if want := Job(x, c, image); !equality.Semantic.DeepEqual(&job, want) {
				t.Fatalf("%s: %s/job.yaml reads back as another Job:\n%s", file, c.ID, data)
			}
			if d := job.Spec.Template.Spec.ActiveDeadlineSeconds; d != nil {
				deadlines++
			}
			k.Jobs[c.ID] = &job
			cells = append(cells, &Cell{ID: c.ID})
		}
		// Every cell has a bench and a local health URL: the API server
		// judges the pod's deadline too.
		if deadlines != len(cells) {
			t.Fatalf("%s: %d of %d Jobs have a pod deadline", file, deadlines, len(cells))
		}
		if strings.HasSuffix(file, "tricky.toml") && k.Jobs["y"] == nil {
			t.Fatalf("no cell named y: %v", cells)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		err = k.ValidateJobs(ctx, cells)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		t.Logf("%s: %d Jobs accepted by the API server (dry run) in %s", file, len(cells), time.Since(start).Round(time.Millisecond))
	}
}

// A Job the API server refuses stops the run before anything is created,
// naming the cell.
func TestKubeValidateRefuses(t *testing.T) {
	kc := kubeconfig(t)
	bad := &batchv1.Job{}
	bad.Name = "Not_A_DNS_Name"
	bad.Spec.Template.Spec.Containers = append(bad.Spec.Template.Spec.Containers, corev1Container("x", "img"))
	k := &Kube{Client: kubeClientFor(kc, "default"), Jobs: map[string]*batchv1.Job{"c1": bad}}
	err := k.ValidateJobs(context.Background(), []*Cell{{ID: "c1"}})
	if err == nil || !strings.Contains(err.Error(), "cell c1: the API server refuses its Job Not_A_DNS_Name") {
		t.Fatalf("got %v", err)
	}
	k = &Kube{Client: kubeClientFor(kc, "no-such-namespace")}
	if err := k.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "namespace no-such-namespace does not exist") {
		t.Fatalf("got %v", err)
	}
}

func corev1Container(name, image string) corev1.Container {
	return corev1.Container{Name: name, Image: image}
}

// Ctrl-C while a Job runs: RunBatch deletes the Jobs it created and records
// nothing for them.
func TestKubeInterruptDeletes(t *testing.T) {
	kc := kubeconfig(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "hang.toml")
	os.WriteFile(file, []byte(`name = "hang"
base = { image = "registry.example/hang:1" }
[axes]
case = ["interrupted"]
[presets.case.interrupted]
SMPATCH_KWOK_HANG = "1"
[launch]
command = ["fakeserver", "--tp", "1", "--port", "30000"]
health = "http://127.0.0.1:30000/health"
bench = ["fakeserver", "bench", "-url", "http://127.0.0.1:30000"]
`), 0o644)
	m, err := matrix.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Expand(matrix.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := Job(x, x.Cells[0], "registry.example/hang:1")
	k := &Kube{Client: kubeClientFor(kc, "default"), Jobs: map[string]*batchv1.Job{x.Cells[0].ID: job}, Poll: 100 * time.Millisecond}
	o := &Options{Out: dir}
	o.defaults()
	od, err := holdOut(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer od.close()
	od.mkdirAll(LogsDir)
	o.out = od
	watcher, err := NewKubeClient(kc, "default")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	recorded := 0
	go func() {
		done <- k.RunBatch(ctx, []*Cell{{ID: x.Cells[0].ID}}, o, func(*Cell, *Result) error { recorded++; return nil })
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if j, err := watcher.getJob(context.Background(), job.Name); err == nil && j.Status.Active > 0 && j.Labels[RunLabel] != "" {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the Job never became active")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if recorded != 0 {
		t.Errorf("%d results recorded for an interrupted run", recorded)
	}
	j, err := watcher.getJob(context.Background(), job.Name)
	if err == nil && j.DeletionTimestamp == nil {
		t.Fatalf("Job %s is still there, not being deleted", job.Name)
	}
}

// kubeClientFor is Kube.Client for the kubeconfig kc and namespace ns.
func kubeClientFor(kc, ns string) func() (*KubeClient, error) {
	return func() (*KubeClient, error) { return NewKubeClient(kc, ns) }
}
