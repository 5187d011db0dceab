package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// chartGatewayClass is the managed GatewayClass's default name: neither consul-k8s
// 1.2+'s "consul" nor consul-k8s 1.1's "consul-api-gateway" (docs/consul-k8s.md).
const chartGatewayClass = "consul-gateway-controller"

// consulK8sDir holds, per consul-k8s line, an operator's consul-k8s values file, the
// table moving its keys to this chart's (keys.yaml), this chart's own settings, and
// what the rendered chart must carry.
var consulK8sDir = filepath.Join("testdata", "consulk8s")

// consulK8sWant is a line's <line>.want.yaml: what the rendered objects must carry.
type consulK8sWant struct {
	Controller struct {
		Replicas          int32               `json:"replicas"`
		PriorityClassName string              `json:"priorityClassName"`
		NodeSelector      map[string]string   `json:"nodeSelector"`
		Tolerations       []corev1.Toleration `json:"tolerations"`
		Annotations       map[string]string   `json:"annotations"`
		// Args and Env are contained in the container's.
		Args []string        `json:"args"`
		Env  []corev1.EnvVar `json:"env"`
	} `json:"controller"`
	GatewayClass  string         `json:"gatewayClass"`
	GatewayConfig map[string]any `json:"gatewayConfig"`
}

// TestHelmConsulK8sValues: an operator's consul-k8s values file of each line, its keys
// moved to this chart's by the table docs/consul-k8s.md shows (the values as they are,
// consul-k8s's YAML strings included), renders a controller and a managed class that
// carry what the values meant: placement, annotations, the log level as klog's -v,
// the TLS server name, extra environment, and the gateway pods' settings.
func TestHelmConsulK8sValues(t *testing.T) {
	var keys map[string]map[string]string
	readYAML(t, filepath.Join(consulK8sDir, "keys.yaml"), &keys)
	for _, line := range []string{"v1.1", "v1.2"} {
		t.Run(line, func(t *testing.T) {
			var consulK8s map[string]any
			readYAML(t, filepath.Join(consulK8sDir, line+".values.yaml"), &consulK8s)
			moved := moveValues(t, consulK8s, keys[line])
			var want consulK8sWant
			readYAML(t, filepath.Join(consulK8sDir, line+".want.yaml"), &want)

			r := renderChartWithValues(t, moved, filepath.Join(consulK8sDir, line+".chart.yaml"))
			pod := r.deployment.Spec.Template.Spec
			c := pod.Containers[0]
			got := consulK8sWant{GatewayClass: r.only(t, "GatewayClass").GetName()}
			got.Controller.Replicas = *r.deployment.Spec.Replicas
			got.Controller.PriorityClassName = pod.PriorityClassName
			got.Controller.NodeSelector = pod.NodeSelector
			got.Controller.Tolerations = pod.Tolerations
			got.Controller.Annotations = r.deployment.Spec.Template.Annotations
			got.Controller.Args = contained(want.Controller.Args, c.Args)
			got.Controller.Env = slices.DeleteFunc(slices.Clone(c.Env), func(e corev1.EnvVar) bool {
				return !slices.ContainsFunc(want.Controller.Env, func(w corev1.EnvVar) bool { return w.Name == e.Name })
			})
			got.GatewayConfig, _ = r.only(t, "GatewayConfig").Object["spec"].(map[string]any)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the chart rendered from consul-k8s %s's values (-%s.want.yaml +rendered):\n%s", line, line, diff)
			}
		})
	}
}

// TestHelmConsulK8sRefusals: consul-k8s keys this chart has no meaning for fail the
// install with a pointer to docs/consul-k8s.md saying what to use instead; at the
// value that asks for nothing (consul-k8s's default) they pass. A consul-k8s string
// that is not what the key takes fails naming the key.
func TestHelmConsulK8sRefusals(t *testing.T) {
	const pointer = "see docs/consul-k8s.md, section Values"
	tests := []struct{ set, says string }{
		{"managedGatewayClass.mapPrivilegedContainerPorts=2000", "bind listener ports below 1024 themselves"},
		{"managedGatewayClass.openshiftSCCName=anyuid", "grant the gateway ServiceAccounts that SCC yourself"},
		{"managedGatewayClass.scaling.enabled=true", "set managedGatewayClass.deployment"},
		{"managedGatewayClass.useHostPorts=true", "use serviceType NodePort or LoadBalancer"},
		{"managedGatewayClass.metrics.enabled=maybe", `want true, false or "-"`},
	}
	for _, tt := range tests {
		t.Run(tt.set, func(t *testing.T) {
			_, err := helm(t, "", templateArgs(t, tt.set)...)
			if err == nil || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), pointer) {
				t.Errorf("helm template --set %s: %v, want a failure saying %q and %q", tt.set, err, tt.says, pointer)
			}
		})
	}
	for _, set := range []string{
		"managedGatewayClass.mapPrivilegedContainerPorts=0", "managedGatewayClass.openshiftSCCName=restricted-v2",
		"managedGatewayClass.scaling.enabled=false", "managedGatewayClass.useHostPorts=false", "managedGatewayClass.metrics.enabled=-",
	} {
		if out, err := helm(t, "", templateArgs(t, set)...); err != nil {
			t.Errorf("helm template --set %s (consul-k8s's default): %v\n%s", set, err, out)
		}
	}
	for _, tt := range []struct{ set, says string }{
		{"nodeSelector=- pool", "nodeSelector: the string is not a YAML map"},
		{"managedGatewayClass.tolerations=key: edge", "managedGatewayClass.tolerations: the string is not a YAML list"},
		{"logLevel=verbose", "at '/logLevel'"},
	} {
		if _, err := helm(t, "", templateArgs(t, tt.set)...); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("helm template --set %s: %v, want a failure saying %q", tt.set, err, tt.says)
		}
	}
}

// renderChartWithValues renders the chart with values (written to a file) and then
// the files, as helm template --values takes them.
func renderChartWithValues(t *testing.T, values map[string]any, files ...string) renderedDeploy {
	t.Helper()
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(moved, data, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(templateArgs(t), "--values="+moved)
	for _, f := range files {
		args = append(args, "--values="+f)
	}
	out, err := helm(t, "", args...)
	if err != nil {
		t.Fatalf("helm template with %s and %v: %v\n%s", data, files, err, out)
	}
	return parseRendered(t, "the chart", out)
}

// moveValues is the chart's values: each consul-k8s key of keys that values holds,
// moved to the chart key keys names, its value as it is.
func moveValues(t *testing.T, values map[string]any, keys map[string]string) map[string]any {
	t.Helper()
	if len(keys) == 0 {
		t.Fatal("no keys to move")
	}
	out := map[string]any{}
	for from, to := range keys {
		v, ok := valueAt(values, strings.Split(from, "."))
		if !ok {
			continue
		}
		setValueAt(out, strings.Split(to, "."), v)
	}
	return out
}

func valueAt(values map[string]any, path []string) (any, bool) {
	v, ok := values[path[0]]
	if !ok || len(path) == 1 {
		return v, ok
	}
	next, isMap := v.(map[string]any)
	if !isMap {
		return nil, false
	}
	return valueAt(next, path[1:])
}

func setValueAt(values map[string]any, path []string, v any) {
	if len(path) == 1 {
		values[path[0]] = v
		return
	}
	next, ok := values[path[0]].(map[string]any)
	if !ok {
		next = map[string]any{}
		values[path[0]] = next
	}
	setValueAt(next, path[1:], v)
}

// contained is want's items that got holds, in want's order.
func contained(want, got []string) []string {
	return slices.DeleteFunc(slices.Clone(want), func(w string) bool { return !slices.Contains(got, w) })
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestHelmDefaultImageIsTheLocalBuild: no image is published, so the chart's default
// image must be what `make image IMAGE_VERSION=<appVersion>` tags its tarball with:
// tools/image's default repository (its title), no registry host, and the chart's
// appVersion.
func TestHelmDefaultImageIsTheLocalBuild(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	imageTool, err := os.ReadFile(filepath.Join(root, "tools", "image", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	title := regexp.MustCompile(`(?m)^\s*title\s*=\s*"([^"]+)"`).FindSubmatch(imageTool)
	if title == nil {
		t.Fatal("tools/image/main.go names no title, the repository its tarball is tagged with")
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, filepath.Join(chartDir(t), "Chart.yaml"), &chart)
	want := string(title[1]) + ":" + chart.AppVersion
	if got := renderChart(t).deployment.Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("the chart's default image %q, want %q, what make image IMAGE_VERSION=%s builds", got, want, chart.AppVersion)
	}
}

// TestConsulK8sCRDsBesideV163 checks, on the real API server with the v1.6.3 standard
// CRDs and their safe-upgrades policy installed (as the chart's crds.enabled or the
// upstream install does), what docs/consul-k8s.md says for consul-k8s 1.2 and later:
// its chart's rewrite of a Gateway API CRD (bundle v0.6.2, channel experimental, both
// as labels) is refused, so its next helm upgrade fails while it still manages them;
// and the standard channel does not serve the TCPRoute v1alpha2 its controller
// watches.
func TestConsulK8sCRDsBesideV163(t *testing.T) {
	ext, err := apiextensionsclient.NewForConfig(env.Kube.Config(testenv.AdminUser))
	if err != nil {
		t.Fatal(err)
	}
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	live, err := crds.Get(t.Context(), "gateways.gateway.networking.k8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// consul-k8s 1.2.9's templates/crd-gateways.yaml: its bundle and channel are labels,
	// and it carries no such annotation.
	rewrite := live.DeepCopy()
	delete(rewrite.Annotations, "gateway.networking.k8s.io/bundle-version")
	delete(rewrite.Annotations, "gateway.networking.k8s.io/channel")
	if rewrite.Labels == nil {
		rewrite.Labels = map[string]string{}
	}
	rewrite.Labels["gateway.networking.k8s.io/bundle-version"] = "v0.6.2"
	rewrite.Labels["gateway.networking.k8s.io/channel"] = "experimental"
	_, err = crds.Update(t.Context(), rewrite, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "safe-upgrades.gateway.networking.k8s.io") {
		t.Errorf("consul-k8s's v0.6.2 rewrite of %s: %v, want the safe-upgrades policy's refusal", live.Name, err)
	}

	resources, err := env.KubeClient.Discovery().ServerResourcesForGroupVersion("gateway.networking.k8s.io/v1alpha2")
	if err == nil && slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "tcproutes" }) {
		t.Error("the v1.6.3 standard CRDs serve tcproutes v1alpha2, which docs/consul-k8s.md says they do not")
	}
}
