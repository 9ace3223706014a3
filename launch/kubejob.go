package launch

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/smpatch/smpatch/internal/smver"
	"github.com/smpatch/smpatch/matrix"
)

// Kubernetes names used in Jobs.
const (
	gpuResource      = corev1.ResourceName("nvidia.com/gpu")
	gpuMajorLabel    = "nvidia.com/gpu.compute.major"
	cellLabel        = "smpatch.io/cell"
	matrixLabel      = "smpatch.io/matrix"
	cellAnnotation   = "smpatch.io/cell-id"
	patchAnnotation  = "smpatch.io/patches"
	sourceAnnotation = "smpatch.io/matrix-file"
)

// Job builds the batch/v1 Job of a matrix cell, with image as its image. When the cell has a bench command
// and a local health URL, the server runs as a native sidecar (an init
// container with restartPolicy Always and a startup probe on the health
// URL) and the bench is the main container, so the Job completes when the
// bench does; the pod's activeDeadlineSeconds is startup_timeout +
// bench_timeout, which the kubelet counts from the pod's start on its node,
// so time spent waiting to be scheduled does not count. The Job itself has
// no deadline: a Job's counts from the Job's start, pending included.
// Otherwise the server is the only container. GPUs come from tp, /dev/shm
// is in memory, nothing is retried.
func Job(x *matrix.Expansion, c *matrix.Cell, image string) *batchv1.Job {
	m := x.Matrix
	gpus := max(c.TP, 1)
	labels := map[string]string{
		"app.kubernetes.io/name":       "smpatch",
		"app.kubernetes.io/managed-by": "smpatch",
		cellLabel:                      labelValue(c.ID),
		matrixLabel:                    labelValue(matrix.SlugOr(m.Name, "matrix")),
	}
	var env []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: c.Env[k]})
	}
	server := corev1.Container{
		Name:       "server",
		Image:      image,
		Command:    c.Command[:1],
		Args:       c.Command[1:],
		Env:        env,
		WorkingDir: c.Workdir,
		Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{gpuResource: resource.MustParse(strconv.Itoa(gpus))},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "dshm", MountPath: "/dev/shm"}},
	}
	if len(server.Args) == 0 {
		server.Args = nil
	}
	pod := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Volumes: []corev1.Volume{{
			Name:         "dshm",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}},
		}},
	}
	probe := healthProbe(c.Health, m.Launch.StartupTimeout)
	if len(c.Bench) > 0 && probe != nil {
		always := corev1.ContainerRestartPolicyAlways
		server.RestartPolicy = &always
		server.StartupProbe = probe
		pod.InitContainers = []corev1.Container{server}
		bench := corev1.Container{
			Name:       "bench",
			Image:      image,
			Command:    c.Bench[:1],
			Args:       c.Bench[1:],
			Env:        env,
			WorkingDir: c.Workdir,
		}
		if len(bench.Args) == 0 {
			bench.Args = nil
		}
		pod.Containers = []corev1.Container{bench}
		d := int64(math.Ceil((m.Launch.StartupTimeout + m.Launch.BenchTimeout).Seconds()))
		pod.ActiveDeadlineSeconds = &d
	} else {
		pod.Containers = []corev1.Container{server}
	}
	if c.SM != "" {
		maj, _, _ := smver.Parse(c.SM)
		pod.NodeSelector = map[string]string{gpuMajorLabel: strconv.Itoa(maj)}
	}
	backoff := int32(0)
	ann := map[string]string{cellAnnotation: c.ID, sourceAnnotation: m.File}
	if len(c.Patches) > 0 {
		ann[patchAnnotation] = strings.Join(c.Patches, ",")
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        jobName(c.ID),
			Labels:      labels,
			Annotations: ann,
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       pod,
			},
		},
	}
}

// healthProbe turns a health URL on the pod itself (127.0.0.1, localhost)
// into a startup probe that waits up to the startup timeout.
func healthProbe(health string, startup time.Duration) *corev1.Probe {
	u, err := url.Parse(health)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil
	}
	switch u.Hostname() {
	case "127.0.0.1", "localhost", "0.0.0.0", "::1":
	default:
		return nil
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil
		}
		port = n
	}
	scheme := corev1.URISchemeHTTP
	if u.Scheme == "https" {
		scheme = corev1.URISchemeHTTPS
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	const period = 10
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(int32(port)), Scheme: scheme,
		}},
		PeriodSeconds:    period,
		FailureThreshold: int32(max(1, int(startup.Seconds())/period)),
	}
}

// JobYAML is a cell's Job as the YAML matrix render writes into job.yaml
// (matrix.RenderOptions.Job).
func JobYAML(x *matrix.Expansion, c *matrix.Cell, image string) ([]byte, error) {
	job := Job(x, c, image)
	if err := checkJob(job); err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(job)
	if err != nil {
		return nil, err
	}
	// A Job to create has no status.
	return bytes.TrimSuffix(b, []byte("status: {}\n")), nil
}

// checkJob refuses a Job the API server would refuse, or worse, read as
// something else: a deadline that is not positive, a probe's port out of
// 1..65535. (The matrix bounds both; this is the Job's own check.)
func checkJob(j *batchv1.Job) error {
	pod := &j.Spec.Template.Spec
	if d := pod.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		return fmt.Errorf("job %s: activeDeadlineSeconds %d is not positive", j.Name, *d)
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		if p := c.StartupProbe; p != nil && p.HTTPGet != nil {
			if n := p.HTTPGet.Port.IntValue(); n < 1 || n > 65535 {
				return fmt.Errorf("job %s: container %s: probe port %d is not 1 to 65535", j.Name, c.Name, n)
			}
		}
	}
	return nil
}

// jobName is "smpatch-<id>" as a DNS label: dots become dashes, and a name
// past 63 characters is cut and given a hash of the id.
func jobName(id string) string {
	n := "smpatch-" + strings.ReplaceAll(id, ".", "-")
	if len(n) <= 63 {
		return n
	}
	h := sha256.Sum256([]byte(id))
	return strings.TrimRight(n[:56], "-") + "-" + hex.EncodeToString(h[:])[:6]
}

// labelValue fits an id into a label value (63 characters, alphanumeric
// ends).
func labelValue(s string) string {
	if len(s) > 63 {
		h := sha256.Sum256([]byte(s))
		s = strings.TrimRight(s[:56], "-.") + "-" + hex.EncodeToString(h[:])[:6]
	}
	return strings.Trim(s, "-.")
}
