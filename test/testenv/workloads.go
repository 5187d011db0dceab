package testenv

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Workloads is what turns workload objects into running pods without any container:
// kube-controller-manager (Deployments, ReplicaSets, EndpointSlices, namespace deletion,
// the garbage collector), kube-scheduler, and kwok, which plays the kubelet of the fake
// Nodes: it keeps their Lease and turns the Pods scheduled to them Running and Ready
// with an IP, using kwok's own stages (bin/kwok-stages.yaml, written by `make tools`)
// and the harness's: a pod labelled NotReadyLabel turns and stays not Ready, one
// labelled ContainerStateLabel gets the container statuses of a container that cannot
// run.
type Workloads struct {
	controllerManager *process
	scheduler         *process
	kwok              *process
	// Nodes are the fake Nodes kwok manages.
	Nodes []string
}

// NodeIP is the InternalIP kwok gives every fake Node.
const NodeIP = "10.1.0.1"

// NotReadyLabel, set to "true" on a Running and Ready pod, makes kwok turn the pod not
// Ready for good, as a pod whose readiness probe fails; other pods are left alone.
const NotReadyLabel = "testenv.consul-gateway-controller.github.io/not-ready"

// notReadyStage is the kwok Stage that does it.
//
//go:embed kwok-stage-not-ready.yaml
var notReadyStage []byte

// ContainerStateLabel on a pod when it is created makes kwok give it, instead of Running
// and Ready, the container statuses of a container that cannot run: one of the
// ContainerState values. Put it on a Gateway's spec.infrastructure.labels (allowed by
// the controller's --gateway-infrastructure-keys) and its pods are created with it.
const ContainerStateLabel = "testenv.consul-gateway-controller.github.io/container-state"

// Values of ContainerStateLabel, and what each container of the pod then reports
// (kwok-stage-container-states.yaml).
const (
	// ContainerStateCrashLoopBackOff: waiting CrashLoopBackOff, its last exit code 1
	// (Error) with a log as termination message whose last line is
	// ContainerStateCrashLoopBackOffLine after a timestamp.
	ContainerStateCrashLoopBackOff = "crash-loop-back-off"
	// ContainerStateImagePullBackOff: waiting ImagePullBackOff, the pull of the
	// container's image "not found".
	ContainerStateImagePullBackOff = "image-pull-back-off"
	// ContainerStateCreateContainerConfigError: waiting CreateContainerConfigError,
	// secret "consul-ca" not found.
	ContainerStateCreateContainerConfigError = "create-container-config-error"
)

// ContainerStateCrashLoopBackOffLine is the last line of a crash-looping container's
// termination message, after its log timestamp.
const ContainerStateCrashLoopBackOffLine = "[ERROR] consul-dataplane: failed to log in to Consul: ACL not found"

// containerStatesStages are the kwok Stages that do it.
//
//go:embed kwok-stage-container-states.yaml
var containerStatesStages []byte

// podCIDR is where kwok takes pod IPs from: outside the Service range (10.96.0.0/16).
const podCIDR = "10.244.0.0/16"

func startWorkloads(ctx context.Context, dir, logDir string, kube *KubeAPI, nodes int) (*Workloads, error) {
	kubeconfig := filepath.Join(dir, "workloads.kubeconfig")
	if err := kube.WriteKubeconfig(kubeconfig, AdminUser); err != nil {
		return nil, err
	}
	w := &Workloads{}
	var err error
	if w.controllerManager, err = workloadProcess("kube-controller-manager", logDir,
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		// Tokens come from the TokenRequest API; the legacy token controller would need
		// the service-account signing key, and nothing here uses its Secrets.
		"--controllers=*,-serviceaccount-token",
		"--use-service-account-credentials=false",
		// A deleted Deployment's pods go at once; the tests are about what the
		// controller did, not about waiting.
		"--concurrent-gc-syncs=5",
	); err != nil {
		return nil, err
	}
	if w.scheduler, err = workloadProcess("kube-scheduler", logDir,
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	); err != nil {
		return nil, err
	}
	stages, err := binary("kwok-stages.yaml")
	if err != nil {
		return nil, err
	}
	harnessStages := filepath.Join(dir, "kwok-harness-stages.yaml")
	if err := os.WriteFile(harnessStages, slices.Concat(notReadyStage, []byte("\n---\n"), containerStatesStages), 0o600); err != nil {
		return nil, err
	}
	if w.kwok, err = workloadProcess("kwok", logDir,
		"--kubeconfig="+kubeconfig,
		"--config="+stages,
		"--config="+harnessStages,
		"--manage-all-nodes",
		"--node-ip="+NodeIP,
		"--cidr="+podCIDR,
		"--node-lease-duration-seconds=40",
	); err != nil {
		return nil, err
	}
	for _, p := range []*process{w.controllerManager, w.scheduler, w.kwok} {
		if err := p.start(); err != nil {
			w.stop()
			return nil, err
		}
	}
	client, err := kubernetes.NewForConfig(kube.Config(AdminUser))
	if err != nil {
		w.stop()
		return nil, err
	}
	for i := range nodes {
		name := fmt.Sprintf("kwok-node-%d", i)
		if err := createNode(ctx, client, name); err != nil {
			w.stop()
			return nil, err
		}
		w.Nodes = append(w.Nodes, name)
	}
	if err := w.waitNodesReady(ctx, client); err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}

func workloadProcess(name, logDir string, args ...string) (*process, error) {
	path, err := binary(name)
	if err != nil {
		return nil, err
	}
	return &process{name: name, path: path, args: args, logPath: filepath.Join(logDir, name+".log")}, nil
}

// createNode registers a fake Node. It carries no taint, so ordinary pods schedule to
// it; kwok's node-initialize stage fills in its status.
func createNode(ctx context.Context, client kubernetes.Interface, name string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			corev1.LabelHostname: name,
			corev1.LabelOSStable: "linux",
			"type":               "kwok",
		},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
	}}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create Node %s: %w", name, err)
	}
	return nil
}

// waitNodesReady waits until kwok reports every Node Ready.
func (w *Workloads) waitNodesReady(ctx context.Context, client kubernetes.Interface) error {
	return w.kwok.waitFor(30*time.Second, func() error {
		for _, name := range w.Nodes {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !nodeReady(node) {
				return fmt.Errorf("node %s is not Ready", name)
			}
		}
		return nil
	})
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (w *Workloads) stop() []error {
	var errs []error
	for _, p := range []*process{w.kwok, w.scheduler, w.controllerManager} {
		if p == nil {
			continue
		}
		if err := p.stop(10 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", p.name, err))
		}
	}
	return errs
}
