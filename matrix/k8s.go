package matrix

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

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

// Job builds the batch/v1 Job of a cell: one container running the cell's
// command with its env, a GPU limit from tp, /dev/shm in memory, no retries.
func Job(x *Expansion, c *Cell, image string) *batchv1.Job {
	m := x.Matrix
	gpus := max(c.TP, 1)
	labels := map[string]string{
		"app.kubernetes.io/name":       "smpatch",
		"app.kubernetes.io/managed-by": "smpatch",
		cellLabel:                      labelValue(c.ID),
		matrixLabel:                    labelValue(slugOr(m.Name, "matrix")),
	}
	var env []corev1.EnvVar
	for _, k := range sortedKeys(c.Env) {
		env = append(env, corev1.EnvVar{Name: k, Value: c.Env[k]})
	}
	ctr := corev1.Container{
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
	if len(ctr.Args) == 0 {
		ctr.Args = nil
	}
	pod := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{ctr},
		Volumes: []corev1.Volume{{
			Name:         "dshm",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}},
		}},
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

func jobYAML(x *Expansion, c *Cell, image string) ([]byte, error) {
	b, err := yaml.Marshal(Job(x, c, image))
	if err != nil {
		return nil, err
	}
	// A Job to create has no status.
	return bytes.TrimSuffix(b, []byte("status: {}\n")), nil
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
