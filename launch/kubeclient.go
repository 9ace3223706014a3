package launch

import (
	"context"
	"fmt"
	"io"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeClient speaks to one namespace of a cluster's API server, with
// client-go's REST client and a scheme of only the core and batch groups
// (the full typed clientset would register every API group). Making one
// reads the kubeconfig and builds the clients: the command layer makes it
// only for a run on Kubernetes.
type KubeClient struct {
	core, batch *rest.RESTClient
	params      runtime.ParameterCodec
	ns          string
}

// NewKubeClient connects to the cluster of a kubeconfig ("" for
// $KUBECONFIG, else ~/.kube/config), for the Jobs of namespace ("" for
// "default").
func NewKubeClient(kubeconfig, namespace string) (*KubeClient, error) {
	if namespace == "" {
		namespace = "default"
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes runner: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := batchv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)
	mk := func(gv schema.GroupVersion, api string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = api
		c.NegotiatedSerializer = codecs.WithoutConversion()
		c.UserAgent = "smpatch"
		if c.QPS == 0 {
			c.QPS, c.Burst = 50, 100
		}
		return rest.RESTClientFor(c)
	}
	k := &KubeClient{params: runtime.NewParameterCodec(scheme), ns: namespace}
	if k.core, err = mk(corev1.SchemeGroupVersion, "/api"); err != nil {
		return nil, err
	}
	if k.batch, err = mk(batchv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	return k, nil
}

// Namespace is the namespace the client's Jobs are in.
func (k *KubeClient) Namespace() string { return k.ns }

// host is the API server's host:port, for messages.
func (k *KubeClient) host() string { return k.core.Get().URL().Host }

// checkNamespace reports whether the namespace exists.
func (k *KubeClient) checkNamespace(ctx context.Context) error {
	err := k.core.Get().Resource("namespaces").Name(k.ns).Do(ctx).Into(&corev1.Namespace{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kubernetes runner: namespace %s does not exist (create it, or pass --namespace)", k.ns)
	case err != nil:
		return fmt.Errorf("kubernetes runner: %s: %w", k.host(), err)
	}
	return nil
}

func (k *KubeClient) createJob(ctx context.Context, job *batchv1.Job, dryRun bool) (*batchv1.Job, error) {
	req := k.batch.Post().Namespace(k.ns).Resource("jobs").Body(job)
	if dryRun {
		req = req.Param("dryRun", "All")
	}
	out := &batchv1.Job{}
	return out, req.Do(ctx).Into(out)
}

func (k *KubeClient) getJob(ctx context.Context, name string) (*batchv1.Job, error) {
	out := &batchv1.Job{}
	return out, k.batch.Get().Namespace(k.ns).Resource("jobs").Name(name).Do(ctx).Into(out)
}

func (k *KubeClient) deleteJob(ctx context.Context, name string) error {
	bg := metav1.DeletePropagationBackground
	err := k.batch.Delete().Namespace(k.ns).Resource("jobs").Name(name).
		Body(&metav1.DeleteOptions{PropagationPolicy: &bg}).Do(ctx).Error()
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (k *KubeClient) listJobs(ctx context.Context, selector string) (*batchv1.JobList, error) {
	out := &batchv1.JobList{}
	return out, k.batch.Get().Namespace(k.ns).Resource("jobs").
		VersionedParams(&metav1.ListOptions{LabelSelector: selector}, k.params).Do(ctx).Into(out)
}

func (k *KubeClient) watchJobs(ctx context.Context, selector string) (watch.Interface, error) {
	return k.batch.Get().Namespace(k.ns).Resource("jobs").
		VersionedParams(&metav1.ListOptions{LabelSelector: selector, Watch: true}, k.params).Watch(ctx)
}

func (k *KubeClient) listPods(ctx context.Context, selector string) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	return out, k.core.Get().Namespace(k.ns).Resource("pods").
		VersionedParams(&metav1.ListOptions{LabelSelector: selector}, k.params).Do(ctx).Into(out)
}

func (k *KubeClient) deletePods(ctx context.Context, selector string) error {
	return k.core.Delete().Namespace(k.ns).Resource("pods").
		VersionedParams(&metav1.ListOptions{LabelSelector: selector}, k.params).Do(ctx).Error()
}

func (k *KubeClient) listNodes(ctx context.Context) (*corev1.NodeList, error) {
	out := &corev1.NodeList{}
	return out, k.core.Get().Resource("nodes").Do(ctx).Into(out)
}

// events lists the events of one object (by uid: an earlier Job of the
// same name has its own).
func (k *KubeClient) events(ctx context.Context, uid string) (*corev1.EventList, error) {
	out := &corev1.EventList{}
	return out, k.core.Get().Namespace(k.ns).Resource("events").
		VersionedParams(&metav1.ListOptions{FieldSelector: "involvedObject.uid=" + uid}, k.params).Do(ctx).Into(out)
}

// logs streams a container's log to w, at most max bytes of it; it
// returns how many bytes it passed on.
func (k *KubeClient) logs(ctx context.Context, pod, container string, w io.Writer, max int64) (int64, error) {
	rc, err := k.core.Get().Namespace(k.ns).Resource("pods").Name(pod).SubResource("log").
		Param("container", container).Stream(ctx)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	return io.Copy(w, io.LimitReader(rc, max))
}
