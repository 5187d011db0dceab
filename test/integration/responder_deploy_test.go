package integration

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The responder's name in deploy/responder and the chart: its Deployment, PDB,
// ServiceAccount and Consul service.
const responderName = "consul-gateway-controller-responder"

// The responder as deploy/responder/ and the chart (responder.enabled) install it:
// two replicas of its own, with its own ServiceAccount (no Kubernetes token), a
// PodDisruptionBudget that counts its pods and no controller pod (nor the other way
// round), the controller's pod and container hardening, and the controller told to use
// the service the responder registers as.
func TestResponderDeployIsHardenedLikeTheController(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kustomized := func(dir string) []*unstructured.Unstructured {
		out, err := kubectl(t, "", "kustomize", filepath.Join(root, dir))
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
		}
		objs, err := decodeObjects(out)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	chart, err := helm(t, "", templateArgs(t, "responder.enabled=true")...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, chart)
	}
	chartObjects, err := decodeObjects(chart)
	if err != nil {
		t.Fatal(err)
	}
	for name, objects := range map[string][]*unstructured.Unstructured{
		"deploy/ and deploy/responder/": append(kustomized("deploy"), kustomized("deploy/responder")...),
		"the chart":                     chartObjects,
	} {
		t.Run(name, func(t *testing.T) { checkResponderDeploy(t, objects, name == "the chart") })
	}
}

func checkResponderDeploy(t *testing.T, objects []*unstructured.Unstructured, chart bool) {
	var controller, resp appsv1.Deployment
	var controllerPDB, respPDB policyv1.PodDisruptionBudget
	into := map[[2]string]any{
		{"Deployment", deployName}: &controller, {"Deployment", responderName}: &resp,
		{"PodDisruptionBudget", deployName}: &controllerPDB, {"PodDisruptionBudget", responderName}: &respPDB,
	}
	serviceAccount := false
	for _, obj := range objects {
		serviceAccount = serviceAccount || (obj.GetKind() == "ServiceAccount" && obj.GetName() == responderName && obj.Object["automountServiceAccountToken"] == false)
		target, ok := into[[2]string{obj.GetKind(), obj.GetName()}]
		if !ok {
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, target); err != nil {
			t.Fatal(err)
		}
		delete(into, [2]string{obj.GetKind(), obj.GetName()})
	}
	if len(into) > 0 {
		t.Fatalf("not rendered: %v", into)
	}
	if !serviceAccount {
		t.Errorf("no ServiceAccount %s without a mounted token", responderName)
	}
	pod, controllerPod := resp.Spec.Template, controller.Spec.Template
	if resp.Spec.Replicas == nil || *resp.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", resp.Spec.Replicas)
	}
	if pod.Spec.ServiceAccountName != responderName || pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("pods run as %q with token automount %v, want %s without", pod.Spec.ServiceAccountName, pod.Spec.AutomountServiceAccountToken, responderName)
	}
	if diff := cmp.Diff(controllerPod.Spec.SecurityContext, pod.Spec.SecurityContext); diff != "" {
		t.Errorf("pod securityContext differs from the controller's (-controller +responder):\n%s", diff)
	}
	if diff := cmp.Diff(controllerPod.Spec.Containers[0].SecurityContext, pod.Spec.Containers[0].SecurityContext); diff != "" {
		t.Errorf("container securityContext differs from the controller's (-controller +responder):\n%s", diff)
	}
	if pod.Annotations["consul.hashicorp.com/connect-inject"] != "false" {
		t.Error("responder pods may get a consul-k8s sidecar: it is connect-native")
	}
	selects := func(pdb policyv1.PodDisruptionBudget, pod map[string]string) bool {
		s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		return s.Matches(labels.Set(pod))
	}
	if !selects(respPDB, pod.Labels) || selects(respPDB, controllerPod.Labels) || selects(controllerPDB, pod.Labels) {
		t.Errorf("PDBs %v and %v do not keep to their own pods %v and %v", respPDB.Spec.Selector, controllerPDB.Spec.Selector, pod.Labels, controllerPod.Labels)
	}
	args := pod.Spec.Containers[0].Args
	if len(args) == 0 || args[0] != "responder" || !slices.Contains(args, "--service="+responderName) {
		t.Errorf("responder args %v, want the responder command as service %s", args, responderName)
	}
	// The chart turns the controller's use of it on; with kustomize an overlay does
	// (deploy/README.md).
	if got := slices.Contains(controllerPod.Spec.Containers[0].Args, "--responder-service="+responderName); got != chart {
		t.Errorf("controller args %v: --responder-service=%s %v, want %v", controllerPod.Spec.Containers[0].Args, responderName, got, chart)
	}
}
