package matrix

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// The batch/v1 Job a cell renders to, as the fields of k8s.io/api's types
// that smpatch sets, with the same JSON names and omitempty rules, so the
// YAML is what k8s.io/api would write (TestJobYAMLRoundTrip decodes it into
// k8s.io/api's Job and writes it back). Local types keep the k8s.io
// packages, and their init work, out of every smpatch command.

// BatchJob is a batch/v1 Job.
type BatchJob struct {
	APIVersion string     `json:"apiVersion,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       JobSpec    `json:"spec"`
}

// ObjectMeta is the metadata of a Job or pod template.
type ObjectMeta struct {
	Name        string            `json:"name,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// JobSpec is a Job's spec.
type JobSpec struct {
	ActiveDeadlineSeconds *int64          `json:"activeDeadlineSeconds,omitempty"`
	BackoffLimit          *int32          `json:"backoffLimit,omitempty"`
	Template              PodTemplateSpec `json:"template"`
}

// PodTemplateSpec is a Job's pod template.
type PodTemplateSpec struct {
	Metadata ObjectMeta `json:"metadata"`
	Spec     PodSpec    `json:"spec"`
}

// PodSpec is the pod a Job runs.
type PodSpec struct {
	Volumes        []Volume          `json:"volumes,omitempty"`
	InitContainers []Container       `json:"initContainers,omitempty"`
	Containers     []Container       `json:"containers"`
	RestartPolicy  string            `json:"restartPolicy,omitempty"`
	NodeSelector   map[string]string `json:"nodeSelector,omitempty"`
}

// Volume is a pod volume; smpatch only uses emptyDir.
type Volume struct {
	Name     string          `json:"name"`
	EmptyDir *EmptyDirSource `json:"emptyDir,omitempty"`
}

// EmptyDirSource is an emptyDir volume.
type EmptyDirSource struct {
	Medium string `json:"medium,omitempty"`
}

// Container is one container of the pod.
type Container struct {
	Name          string               `json:"name"`
	Image         string               `json:"image,omitempty"`
	Command       []string             `json:"command,omitempty"`
	Args          []string             `json:"args,omitempty"`
	WorkingDir    string               `json:"workingDir,omitempty"`
	Env           []EnvVar             `json:"env,omitempty"`
	Resources     ResourceRequirements `json:"resources"`
	RestartPolicy *string              `json:"restartPolicy,omitempty"`
	VolumeMounts  []VolumeMount        `json:"volumeMounts,omitempty"`
	StartupProbe  *Probe               `json:"startupProbe,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

// ResourceRequirements are a container's limits (quantities in canonical
// text: "8", "1k").
type ResourceRequirements struct {
	Limits map[string]string `json:"limits,omitempty"`
}

// VolumeMount mounts a volume into a container.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
}

// Probe is an HTTP startup probe.
type Probe struct {
	HTTPGet          *HTTPGetAction `json:"httpGet,omitempty"`
	PeriodSeconds    int32          `json:"periodSeconds,omitempty"`
	FailureThreshold int32          `json:"failureThreshold,omitempty"`
}

// HTTPGetAction is the request a probe makes.
type HTTPGetAction struct {
	Path   string `json:"path,omitempty"`
	Port   int32  `json:"port"`
	Scheme string `json:"scheme,omitempty"`
}

// quantity is n as Kubernetes writes a decimal quantity: trailing groups of
// three zeros become k, M, G, T, P, E.
func quantity(n int) string {
	suffix := ""
	for _, s := range []string{"k", "M", "G", "T", "P", "E"} {
		if n == 0 || n%1000 != 0 {
			break
		}
		n /= 1000
		suffix = s
	}
	return strconv.Itoa(n) + suffix
}

// Kubernetes names used in Jobs.
const (
	gpuResource      = "nvidia.com/gpu"
	gpuMajorLabel    = "nvidia.com/gpu.compute.major"
	cellLabel        = "smpatch.io/cell"
	matrixLabel      = "smpatch.io/matrix"
	cellAnnotation   = "smpatch.io/cell-id"
	patchAnnotation  = "smpatch.io/patches"
	sourceAnnotation = "smpatch.io/matrix-file"
)

// Job builds the batch/v1 Job of a cell. When the cell has a bench command
// and a local health URL, the server runs as a native sidecar (an init
// container with restartPolicy Always and a startup probe on the health
// URL) and the bench is the main container, so the Job completes when the
// bench does and the deadline is startup_timeout + bench_timeout. Otherwise
// the server is the only container. GPUs come from tp, /dev/shm is in
// memory, nothing is retried.
func Job(x *Expansion, c *Cell, image string) *BatchJob {
	m := x.Matrix
	gpus := max(c.TP, 1)
	labels := map[string]string{
		"app.kubernetes.io/name":       "smpatch",
		"app.kubernetes.io/managed-by": "smpatch",
		cellLabel:                      labelValue(c.ID),
		matrixLabel:                    labelValue(slugOr(m.Name, "matrix")),
	}
	var env []EnvVar
	for _, k := range sortedKeys(c.Env) {
		env = append(env, EnvVar{Name: k, Value: c.Env[k]})
	}
	server := Container{
		Name:       "server",
		Image:      image,
		Command:    c.Command[:1],
		Args:       c.Command[1:],
		Env:        env,
		WorkingDir: c.Workdir,
		Resources: ResourceRequirements{
			Limits: map[string]string{gpuResource: quantity(gpus)},
		},
		VolumeMounts: []VolumeMount{{Name: "dshm", MountPath: "/dev/shm"}},
	}
	if len(server.Args) == 0 {
		server.Args = nil
	}
	pod := PodSpec{
		RestartPolicy: "Never",
		Volumes: []Volume{{
			Name:     "dshm",
			EmptyDir: &EmptyDirSource{Medium: "Memory"},
		}},
	}
	var deadline *int64
	probe := healthProbe(c.Health, m.Launch.StartupTimeout)
	if len(c.Bench) > 0 && probe != nil {
		always := "Always"
		server.RestartPolicy = &always
		server.StartupProbe = probe
		pod.InitContainers = []Container{server}
		bench := Container{
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
		pod.Containers = []Container{bench}
		d := int64((m.Launch.StartupTimeout + m.Launch.BenchTimeout).Seconds())
		deadline = &d
	} else {
		pod.Containers = []Container{server}
	}
	if c.SM != "" {
		maj, _, _ := parseSM(c.SM)
		pod.NodeSelector = map[string]string{gpuMajorLabel: strconv.Itoa(maj)}
	}
	backoff := int32(0)
	ann := map[string]string{cellAnnotation: c.ID, sourceAnnotation: m.File}
	if len(c.Patches) > 0 {
		ann[patchAnnotation] = strings.Join(c.Patches, ",")
	}
	return &BatchJob{
		APIVersion: "batch/v1",
		Kind:       "Job",
		Metadata: ObjectMeta{
			Name:        jobName(c.ID),
			Labels:      labels,
			Annotations: ann,
		},
		Spec: JobSpec{
			BackoffLimit:          &backoff,
			ActiveDeadlineSeconds: deadline,
			Template: PodTemplateSpec{
				Metadata: ObjectMeta{Labels: labels},
				Spec:     pod,
			},
		},
	}
}

// healthProbe turns a health URL on the pod itself (127.0.0.1, localhost)
// into a startup probe that waits up to the startup timeout.
func healthProbe(health string, startup time.Duration) *Probe {
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
		if err != nil {
			return nil
		}
		port = n
	}
	scheme := "HTTP"
	if u.Scheme == "https" {
		scheme = "HTTPS"
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	const period = 10
	return &Probe{
		HTTPGet:          &HTTPGetAction{Path: path, Port: int32(port), Scheme: scheme},
		PeriodSeconds:    period,
		FailureThreshold: int32(max(1, int(startup.Seconds())/period)),
	}
}

func jobYAML(x *Expansion, c *Cell, image string) ([]byte, error) {
	b, err := yaml.Marshal(Job(x, c, image))
	if err != nil {
		return nil, err
	}
	return b, nil
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
