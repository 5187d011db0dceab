package integration

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// deploy/ as kubectl renders it, and the controller process it describes.

// What deploy/ installs, as its manifests name it.
const (
	deployNamespace     = "consul-gateway-controller"
	deployName          = "consul-gateway-controller"
	deployTokenSecret   = "consul-gateway-controller-consul-token"
	deployImage         = "consul-gateway-controller:v0.1.0"
	deployMetricsReader = "consul-gateway-controller-metrics-reader"
)

// deployKinds are the kinds `kubectl kustomize deploy` must render, and how many of
// each.
var deployKinds = map[string]int{
	"Namespace": 1, "ServiceAccount": 1, "ClusterRole": 2, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
	"ConfigMap": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1, "GatewayClass": 1,
	"ValidatingAdmissionPolicy": 4, "ValidatingAdmissionPolicyBinding": 4,
}

// renderedDeploy is `kubectl kustomize deploy`, parsed.
type renderedDeploy struct {
	dir         string
	objects     []*unstructured.Unstructured
	clusterRole rbacv1.ClusterRole // the controller's
	// metricsReader is the scrapers' ClusterRole: get on /metrics.
	metricsReader rbacv1.ClusterRole
	role          rbacv1.Role
	deployment    appsv1.Deployment
	configMap     corev1.ConfigMap
	policy        admissionregistrationv1.ValidatingAdmissionPolicy
	binding       admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

func renderDeploy(t *testing.T) renderedDeploy {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return renderKustomization(t, filepath.Join(root, "deploy"))
}

// renderKustomization is `kubectl kustomize dir` (deploy/ or an overlay of it), parsed.
func renderKustomization(t *testing.T, dir string) renderedDeploy {
	t.Helper()
	out, err := kubectl(t, "", "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return parseRendered(t, dir, out)
}

// parseRendered parses the manifests rendered from dir (deploy/, an overlay, or the
// Helm chart, which has no ConfigMap).
func parseRendered(t *testing.T, dir, manifests string) renderedDeploy {
	t.Helper()
	r := renderedDeploy{dir: dir}
	var err error
	if r.objects, err = decodeObjects(manifests); err != nil {
		t.Fatalf("parse the rendered %s: %v", dir, err)
	}
	if len(r.ofKind("ConfigMap")) > 0 {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.only(t, "ConfigMap").Object, &r.configMap); err != nil {
			t.Fatalf("rendered ConfigMap: %v", err)
		}
	}
	// The controller's admission policy, when rendered (the chart may also render the
	// Gateway API's own, or leave it out).
	for kind, into := range map[string]any{"ValidatingAdmissionPolicy": &r.policy, "ValidatingAdmissionPolicyBinding": &r.binding} {
		for _, obj := range r.ofKind(kind) {
			if obj.GetName() != deployName {
				continue
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
				t.Fatalf("rendered %s: %v", kind, err)
			}
		}
	}
	for kind, into := range map[string]any{"Role": &r.role, "Deployment": &r.deployment} {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.only(t, kind).Object, into); err != nil {
			t.Fatalf("rendered %s: %v", kind, err)
		}
	}
	for name, into := range map[string]*rbacv1.ClusterRole{deployName: &r.clusterRole, deployMetricsReader: &r.metricsReader} {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.named(t, "ClusterRole", name).Object, into); err != nil {
			t.Fatalf("rendered ClusterRole %s: %v", name, err)
		}
	}
	return r
}

// decodeObjects reads every object of a YAML (or JSON) stream of documents.
func decodeObjects(text string) ([]*unstructured.Unstructured, error) {
	var objects []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objects, nil
		} else if err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			objects = append(objects, obj)
		}
	}
}

// only is the one rendered object of kind.
func (r renderedDeploy) only(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	found := r.ofKind(kind)
	if len(found) != 1 {
		t.Fatalf("%s renders %d objects of kind %s, want 1", r.dir, len(found), kind)
	}
	return found[0]
}

// named is the rendered object of kind named name.
func (r renderedDeploy) named(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range r.ofKind(kind) {
		if obj.GetName() == name {
			return obj
		}
	}
	t.Fatalf("%s renders no %s named %s", r.dir, kind, name)
	return nil
}

func (r renderedDeploy) ofKind(kind string) []*unstructured.Unstructured {
	var found []*unstructured.Unstructured
	for _, obj := range r.objects {
		if obj.GetKind() == kind {
			found = append(found, obj)
		}
	}
	return found
}

// kubectl runs the kubectl built for the harness; kubeconfig "" runs it without one.
func kubectl(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	bin, err := testenv.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	if kubeconfig != "" {
		args = append([]string{"--kubeconfig=" + kubeconfig}, args...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// processArgs are the Deployment's container args as the kubelet would expand them
// for a pod named pod: $(VAR) from the container's env (the rendered ConfigMap, the
// downward API), minus the flags the harness sets itself (testenv.HarnessFlags): the
// servers, token file, ports and identity of the test's process, and the CA file of the
// Consul the base points at (the harness's Consul is its own). overrides replace the
// Deployment's flags of the same name, or are added.
func (r renderedDeploy) processArgs(t *testing.T, pod string, overrides ...string) []string {
	t.Helper()
	var args []string
	for _, arg := range r.expandedArgs(t, pod) {
		name, _, _ := strings.Cut(arg, "=")
		if slices.Contains(testenv.HarnessFlags, name) || name == "--consul-cacert" || slices.ContainsFunc(overrides, func(o string) bool { return strings.HasPrefix(o, name+"=") }) {
			continue
		}
		args = append(args, arg)
	}
	return append(args, overrides...)
}

// containerResource is what the kubelet gives a resourceFieldRef to a container's
// memory limit, with no divisor: the limit in bytes. Other references fail the test.
func containerResource(t *testing.T, spec corev1.PodSpec, container string, ref *corev1.ResourceFieldSelector) string {
	t.Helper()
	if ref.ContainerName != "" {
		container = ref.ContainerName
	}
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 || ref.Resource != "limits.memory" || !ref.Divisor.IsZero() {
		t.Fatalf("resourceFieldRef %+v: this test resolves a container's limits.memory without a divisor", ref)
	}
	limit, ok := spec.Containers[i].Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatalf("resourceFieldRef %+v: container %s has no memory limit", ref, container)
	}
	return strconv.FormatInt(limit.Value(), 10)
}

// expandedArgs are the Deployment's container args with $(VAR) expanded as the kubelet
// does for a pod named pod.
func (r renderedDeploy) expandedArgs(t *testing.T, pod string) []string {
	t.Helper()
	c := r.deployment.Spec.Template.Spec.Containers[0]
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			if ref.Name != r.configMap.Name {
				t.Fatalf("env %s refers to ConfigMap %q; %s renders %q", e.Name, ref.Name, r.dir, r.configMap.Name)
			}
			value, ok := r.configMap.Data[ref.Key]
			if !ok {
				t.Fatalf("env %s refers to key %q, which ConfigMap %s lacks", e.Name, ref.Key, ref.Name)
			}
			vars[e.Name] = value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			vars[e.Name] = pod
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			vars[e.Name] = r.deployment.Namespace
		case e.ValueFrom.ResourceFieldRef != nil:
			vars[e.Name] = containerResource(t, r.deployment.Spec.Template.Spec, c.Name, e.ValueFrom.ResourceFieldRef)
		default:
			t.Fatalf("env %s: a source this test cannot resolve", e.Name)
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var args []string
	for _, arg := range c.Args {
		arg = ref.ReplaceAllStringFunc(arg, func(m string) string {
			value, ok := vars[ref.FindStringSubmatch(m)[1]]
			if !ok {
				// The kubelet would pass "$(VAR)" on literally.
				t.Fatalf("arg %q refers to %s, which the container's env does not define", arg, m)
			}
			return value
		})
		args = append(args, arg)
	}
	return args
}

// appliedVersions maps each object of the kustomization dir, as the API server holds
// it, to its resourceVersion.
func appliedVersions(t *testing.T, kubeconfig, dir string) map[string]string {
	t.Helper()
	out, err := kubectl(t, kubeconfig, "get", "-k", dir, "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get -k: %v\n%s", err, out)
	}
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON([]byte(out)); err != nil {
		t.Fatalf("kubectl get -k: %v", err)
	}
	versions := map[string]string{}
	for _, obj := range list.Items {
		versions[obj.GetKind()+" "+obj.GetNamespace()+"/"+obj.GetName()] = obj.GetResourceVersion()
	}
	return versions
}
