package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// helmRelease is the release the tests install; the chart's objects are named after
// the chart, not the release (one release per cluster, as with deploy/).
const helmRelease = "cgc"

// chartDir is the Helm chart's directory.
func chartDir(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "deploy", "helm", "consul-gateway-controller")
}

// helm runs the helm that `make tools` built, with its own empty configuration and
// cache; kubeconfig "" runs it without a cluster. It returns helm's standard output;
// on a failure the error carries its standard error too (helm logs there, such as the
// links base/ and crds/ resolve, at level INFO).
func helm(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	bin, err := testenv.Helm()
	if err != nil {
		t.Fatal(err)
	}
	if kubeconfig != "" {
		args = append(args, "--kubeconfig="+kubeconfig)
	}
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", args[0], err, stderr.String())
	}
	return string(out), nil
}

// renderChart is `helm template` of the chart in deploy/'s namespace, with its CRDs,
// and sets (key=value, as --set takes them), parsed.
func renderChart(t *testing.T, sets ...string) renderedDeploy {
	t.Helper()
	return renderChartFrom(t, chartDir(t), sets...)
}

// renderChartFrom renders the chart at chart: its directory, or an archive that
// helm package made of it.
func renderChartFrom(t *testing.T, chart string, sets ...string) renderedDeploy {
	t.Helper()
	out, err := helm(t, "", templateArgsFor(chart, sets...)...)
	if err != nil {
		t.Fatalf("helm template %s %v: %v\n%s", chart, sets, err, out)
	}
	return parseRendered(t, "the chart", out)
}

// packagedChart is the chart as it is published: the archive helm package makes of
// its directory. The directory links base/ and crds/ from deploy/; the archive must
// carry what they point to.
func packagedChart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := helm(t, "", "package", chartDir(t), "--destination="+dir); err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	archives, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil || len(archives) != 1 {
		t.Fatalf("helm package made %v (%v), want one archive", archives, err)
	}
	return archives[0]
}

func templateArgs(t *testing.T, sets ...string) []string {
	return templateArgsFor(chartDir(t), sets...)
}

func templateArgsFor(chart string, sets ...string) []string {
	args := []string{"template", helmRelease, chart, "--namespace=" + deployNamespace, "--include-crds"}
	for _, s := range sets {
		args = append(args, "--set="+s)
	}
	return args
}

// TestHelmChartRendersTheBase: at its defaults the chart, as a directory and as the
// archive helm package makes of it, renders deploy/'s objects:
// the same RBAC, admission policy, CRD, PodDisruptionBudget and Service, and the same
// Deployment but for the settings the base keeps in its ConfigMap, which the chart
// gives as flags. The least-privilege proof of deploy/ (TestDeployRBACIsLeastPrivilege)
// thereby covers the chart.
func TestHelmChartRendersTheBase(t *testing.T) {
	base, chart := renderDeploy(t), renderChart(t)
	// What users install is the packaged chart: it renders what the directory does.
	if diff := cmp.Diff(chart.objects, renderChartFrom(t, packagedChart(t)).objects); diff != "" {
		t.Errorf("the packaged chart renders other objects than its directory (-directory +packaged):\n%s", diff)
	}
	wantKinds := map[string]int{
		"CustomResourceDefinition": 1, "ServiceAccount": 1, "ClusterRole": 2, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
		"Deployment": 1, "PodDisruptionBudget": 1, "Service": 1, "GatewayClass": 1, "GatewayConfig": 1,
		"ValidatingAdmissionPolicy": 4, "ValidatingAdmissionPolicyBinding": 4,
	}
	gotKinds := map[string]int{}
	for _, obj := range chart.objects {
		gotKinds[obj.GetKind()]++
	}
	if diff := cmp.Diff(wantKinds, gotKinds); diff != "" {
		t.Errorf("kinds the chart renders (-want +got):\n%s", diff)
	}
	same := func(what string, want, got any) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the chart differs from deploy/ (-deploy +chart):\n%s", what, diff)
		}
	}
	same("ClusterRole rules", base.clusterRole.Rules, chart.clusterRole.Rules)
	same("metrics-reader rules", base.metricsReader.Rules, chart.metricsReader.Rules)
	same("Role rules", base.role.Rules, chart.role.Rules)
	// The chart's YAML round trip folds the base's CEL expressions otherwise: the same
	// expressions but for whitespace.
	same("admission policy", policyWords(base.policy.Spec), policyWords(chart.policy.Spec))
	same("admission policy binding", base.binding.Spec, chart.binding.Spec)
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, field := range []string{"roleRef", "subjects"} {
			same(kind+" "+field, base.only(t, kind).Object[field], chart.only(t, kind).Object[field])
		}
	}
	for _, kind := range []string{"PodDisruptionBudget", "Service"} {
		same(kind+" spec", base.only(t, kind).Object["spec"], chart.only(t, kind).Object["spec"])
	}
	baseCRD, chartCRD := base.only(t, "CustomResourceDefinition"), chart.only(t, "CustomResourceDefinition")
	same("GatewayConfig CRD", []any{baseCRD.GetName(), baseCRD.Object["spec"]}, []any{chartCRD.GetName(), chartCRD.Object["spec"]})
	for _, obj := range chart.objects {
		// The CRD is crds/'s, which Helm installs as it is.
		if obj.GetKind() != "CustomResourceDefinition" && obj.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s %s lacks the chart's labels: %v", obj.GetKind(), obj.GetName(), obj.GetLabels())
		}
	}

	// The Deployment: the same but for the container's image, args and env, which the
	// base fills from its ConfigMap.
	bd, cd := base.deployment.DeepCopy(), chart.deployment.DeepCopy()
	same("Deployment selector", bd.Spec.Selector, cd.Spec.Selector)
	same("Deployment replicas and strategy", []any{bd.Spec.Replicas, bd.Spec.Strategy}, []any{cd.Spec.Replicas, cd.Spec.Strategy})
	same("pod labels", bd.Spec.Template.Labels, cd.Spec.Template.Labels)
	same("pod annotations", bd.Spec.Template.Annotations, cd.Spec.Template.Annotations)
	bc, cc := &bd.Spec.Template.Spec.Containers[0], &cd.Spec.Template.Spec.Containers[0]
	if cc.Image != deployImage {
		t.Errorf("image %q, want deploy/'s %q", cc.Image, deployImage)
	}
	baseArgs, chartArgs := base.expandedArgs(t, "pod-0"), chart.expandedArgs(t, "pod-0")
	// The chart names two defaults the base leaves implicit.
	baseArgs = append(baseArgs, "--controller-name="+string(gwsync.DefaultControllerName), "--deploy-gateways=true")
	slices.Sort(baseArgs)
	slices.Sort(chartArgs)
	same("container args, expanded", baseArgs, chartArgs)
	bc.Image, bc.Args, bc.Env, bc.ImagePullPolicy = "", nil, nil, ""
	cc.Image, cc.Args, cc.Env, cc.ImagePullPolicy = "", nil, nil, ""
	same("pod spec", bd.Spec.Template.Spec, cd.Spec.Template.Spec)
}

// TestHelmChartValues: what the values change in the rendered chart.
func TestHelmChartValues(t *testing.T) {
	t.Run("Gateway API CRDs", func(t *testing.T) {
		r := renderChart(t, "crds.enabled=true")
		crds := r.ofKind("CustomResourceDefinition")
		var gatewayAPI []string
		for _, crd := range crds {
			if strings.HasSuffix(crd.GetName(), ".gateway.networking.k8s.io") {
				gatewayAPI = append(gatewayAPI, crd.GetName())
				if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
					t.Errorf("CRD %s is not kept on uninstall", crd.GetName())
				}
				if v := crd.GetAnnotations()["gateway.networking.k8s.io/bundle-version"]; v != "v1.6.3" {
					t.Errorf("CRD %s of bundle %q, want v1.6.3", crd.GetName(), v)
				}
			}
		}
		if len(gatewayAPI) != 10 {
			t.Errorf("Gateway API CRDs: %v, want the 10 of the standard channel", gatewayAPI)
		}
		if len(r.ofKind("ValidatingAdmissionPolicy")) != 5 || r.named(t, "ValidatingAdmissionPolicy", "safe-upgrades.gateway.networking.k8s.io") == nil {
			t.Errorf("want the chart's four admission policies and the Gateway API's safe-upgrades policy")
		}
		keep := renderChart(t, "crds.enabled=true", "crds.keep=false")
		for _, crd := range keep.ofKind("CustomResourceDefinition") {
			if _, ok := crd.GetAnnotations()["helm.sh/resource-policy"]; ok {
				t.Errorf("crds.keep=false: CRD %s still kept", crd.GetName())
			}
		}
	})
	t.Run("Consul without TLS or ACLs", func(t *testing.T) {
		r := renderChart(t, "consul.address=http://consul.consul.svc:8500", "consul.allowPlaintext=true",
			"consul.tls.caCert.secretName=", "consul.acls.token.secretName=")
		args := r.expandedArgs(t, "pod-0")
		for _, gone := range []string{"--consul-cacert", "--consul-token-file"} {
			if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, gone) }) {
				t.Errorf("%s without its Secret: %v", gone, args)
			}
		}
		for _, want := range []string{"--consul-http-addr=http://consul.consul.svc:8500", "--consul-allow-plaintext"} {
			if !slices.Contains(args, want) {
				t.Errorf("args %v lack %s", args, want)
			}
		}
		if pod := r.deployment.Spec.Template.Spec; len(pod.Volumes) != 0 || len(pod.Containers[0].VolumeMounts) != 0 {
			t.Errorf("volumes %v, mounts %v: want none without Secrets", pod.Volumes, pod.Containers[0].VolumeMounts)
		}
	})
	t.Run("managed GatewayClass", func(t *testing.T) {
		r := renderChart(t, "managedGatewayClass.name=edge", "managedGatewayClass.serviceType=NodePort",
			"managedGatewayClass.deployment.defaultInstances=2", "managedGatewayClass.deployment.maxInstances=3",
			"managedGatewayClass.copyAnnotations.service.annotations={external-dns.alpha.kubernetes.io/hostname}",
			"controllerName=example.com/edge")
		class, config := r.only(t, "GatewayClass"), r.only(t, "GatewayConfig")
		if got := class.Object["spec"].(map[string]any)["controllerName"]; got != "example.com/edge" || class.GetName() != "edge" {
			t.Errorf("GatewayClass %s of %v, want edge of example.com/edge", class.GetName(), got)
		}
		ref := class.Object["spec"].(map[string]any)["parametersRef"].(map[string]any)
		if ref["name"] != config.GetName() || ref["namespace"] != config.GetNamespace() || ref["kind"] != "GatewayConfig" {
			t.Errorf("parametersRef %v does not name GatewayConfig %s/%s", ref, config.GetNamespace(), config.GetName())
		}
		want := map[string]any{
			"replicas": map[string]any{"default": float64(2), "min": float64(1), "max": float64(3)},
			"service":  map[string]any{"type": "NodePort", "copyAnnotations": []any{"external-dns.alpha.kubernetes.io/hostname"}},
		}
		if diff := cmp.Diff(want, config.Object["spec"]); diff != "" {
			t.Errorf("GatewayConfig spec (-want +got):\n%s", diff)
		}
		if !slices.Contains(r.expandedArgs(t, "pod-0"), "--controller-name=example.com/edge") {
			t.Error("the controller does not serve the managed class's controllerName")
		}
		if none := renderChart(t, "managedGatewayClass.enabled=false"); len(none.ofKind("GatewayClass"))+len(none.ofKind("GatewayConfig")) != 0 {
			t.Error("managedGatewayClass.enabled=false still renders a GatewayClass or GatewayConfig")
		}
	})
	t.Run("metrics", func(t *testing.T) {
		r := renderChart(t, "metrics.serviceMonitor.enabled=true", "metrics.prometheusServiceAccount.name=prometheus",
			"metrics.prometheusServiceAccount.namespace=monitoring")
		// prometheus-operator's endpoint authorization, from a Secret of the
		// ServiceMonitor's namespace; not the deprecated bearerTokenFile.
		monitor := r.only(t, "ServiceMonitor")
		endpoint := monitor.Object["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
		wantAuth := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "consul-gateway-controller-metrics-scraper", "key": "token"}}
		if diff := cmp.Diff(wantAuth, endpoint["authorization"]); endpoint["port"] != "metrics" || diff != "" {
			t.Errorf("ServiceMonitor endpoint port %v, authorization (-want +got):\n%s", endpoint["port"], diff)
		}
		for _, deprecated := range []string{"bearerTokenFile", "bearerTokenSecret"} {
			if _, ok := endpoint[deprecated]; ok {
				t.Errorf("ServiceMonitor endpoint sets the deprecated %s", deprecated)
			}
		}
		// The chart's Secret holds the token of its own ServiceAccount, which may get
		// /metrics and nothing else.
		secret := r.named(t, "Secret", "consul-gateway-controller-metrics-scraper")
		if secret.Object["type"] != "kubernetes.io/service-account-token" || secret.GetNamespace() != deployNamespace ||
			secret.GetAnnotations()["kubernetes.io/service-account.name"] != "consul-gateway-controller-metrics-scraper" {
			t.Errorf("token Secret %s/%s of type %v for %q, want the scraper ServiceAccount's token in the release namespace",
				secret.GetNamespace(), secret.GetName(), secret.Object["type"], secret.GetAnnotations()["kubernetes.io/service-account.name"])
		}
		r.named(t, "ServiceAccount", "consul-gateway-controller-metrics-scraper")
		scraper := r.named(t, "ClusterRoleBinding", "consul-gateway-controller-metrics-scraper")
		wantScraper := []any{map[string]any{"kind": "ServiceAccount", "name": "consul-gateway-controller-metrics-scraper", "namespace": deployNamespace}}
		if diff := cmp.Diff(wantScraper, scraper.Object["subjects"]); diff != "" || scraper.Object["roleRef"].(map[string]any)["name"] != deployMetricsReader {
			t.Errorf("scraper binding to %v, subjects (-want +got):\n%s", scraper.Object["roleRef"], diff)
		}
		binding := r.named(t, "ClusterRoleBinding", deployMetricsReader)
		want := []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}}
		if diff := cmp.Diff(want, binding.Object["subjects"]); diff != "" {
			t.Errorf("metrics-reader binding subjects (-want +got):\n%s", diff)
		}

		// A Secret of the user's: named in the ServiceMonitor, and nothing made for it.
		own := renderChart(t, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.tokenSecret.name=prometheus-token",
			"metrics.serviceMonitor.tokenSecret.key=bearer")
		endpoint = own.only(t, "ServiceMonitor").Object["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
		auth, _ := endpoint["authorization"].(map[string]any)
		if got := auth["credentials"]; !cmp.Equal(got, map[string]any{"name": "prometheus-token", "key": "bearer"}) {
			t.Errorf("credentials %v, want the user's Secret prometheus-token, key bearer", got)
		}
		if n := len(own.ofKind("Secret")) + len(own.ofKind("ClusterRoleBinding")) - 1; n != 0 {
			t.Errorf("with the user's Secret the chart still renders %d scraper objects", n)
		}
	})
	t.Run("alerts and dashboard", func(t *testing.T) {
		if off := renderChart(t); len(off.ofKind("PrometheusRule")) != 0 || len(off.ofKind("ConfigMap")) != 0 {
			t.Error("the chart renders alert rules or a dashboard by default")
		}
		checkChartRulesRendered(t, renderChart(t, "prometheusRule.enabled=true", "grafanaDashboard.enabled=true"), `job="consul-gateway-controller-metrics"`)
		checkChartRulesRendered(t, renderChart(t, "prometheusRule.enabled=true", "grafanaDashboard.enabled=true",
			`prometheusRule.selector=namespace="edge"\,service="cgc"`), `namespace="edge",service="cgc"`)
	})
	t.Run("placement and flags", func(t *testing.T) {
		r := renderChart(t, "replicas=3", "logLevel=4", "nodeSelector.pool=infra", "extraArgs={--consul-workers=8}",
			"image.tag=v9.9.9", "admissionPolicy.enabled=false", "leaderElection.enabled=true", "podAnnotations.team=infra")
		pod := r.deployment.Spec.Template.Spec
		if *r.deployment.Spec.Replicas != 3 || pod.NodeSelector["pool"] != "infra" || !strings.HasSuffix(pod.Containers[0].Image, ":v9.9.9") {
			t.Errorf("replicas %d, nodeSelector %v, image %s", *r.deployment.Spec.Replicas, pod.NodeSelector, pod.Containers[0].Image)
		}
		// podAnnotations add to the base's, which keep consul-k8s's injector away.
		want := map[string]string{"team": "infra", "consul.hashicorp.com/connect-inject": "false"}
		if diff := cmp.Diff(want, r.deployment.Spec.Template.Annotations); diff != "" {
			t.Errorf("pod annotations (-want +got):\n%s", diff)
		}
		args := r.expandedArgs(t, "pod-0")
		// Without the policy the controller must not require it, or it would not start.
		for _, want := range []string{"-v=4", "--consul-workers=8", "--require-admission-policy=false"} {
			if !slices.Contains(args, want) {
				t.Errorf("args %v lack %s", args, want)
			}
		}
		if len(r.ofKind("ValidatingAdmissionPolicy")) != 0 {
			t.Error("admissionPolicy.enabled=false still renders the policy")
		}
	})
}

// TestHelmValuesSchemaRefusesWrongValues: a wrong value fails at install, naming it,
// not at run time.
func TestHelmValuesSchemaRefusesWrongValues(t *testing.T) {
	tests := []struct{ set, says string }{
		{"replicas=0", "at '/replicas'"},
		{"managedGatewayClass.serviceType=External", "at '/managedGatewayClass/serviceType'"},
		{"consul.adress=http://x:8500", "'adress' not allowed"},
		{"consul.address=consul:8500", "at '/consul/address'"},
		{"logLevel=high", "at '/logLevel'"},
		{"managedGatewayClass.deployment.maxInstances=0", "at '/managedGatewayClass/deployment/maxInstances'"},
		{"controllerName=no-path", "at '/controllerName'"},
		{"extraArgs={consul-workers=8}", "at '/extraArgs/0'"},
		{"prometheusRule.selector=job", "at '/prometheusRule/selector'"},
		{"metrics.serviceMonitor.tokenSecret.name=Not_A_Name", "at '/metrics/serviceMonitor/tokenSecret/name'"},
	}
	for _, tt := range tests {
		t.Run(tt.set, func(t *testing.T) {
			_, err := helm(t, "", templateArgs(t, tt.set)...)
			if err == nil {
				t.Fatalf("helm template --set %s succeeded", tt.set)
			}
			if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("helm template --set %s: want a schema error saying %s, got: %v", tt.set, tt.says, err)
			}
		})
	}
}

// TestHelmLint: helm lint --strict finds nothing at the defaults and with the
// optional parts on.
func TestHelmLint(t *testing.T) {
	for _, sets := range [][]string{nil, {"crds.enabled=true", "metrics.serviceMonitor.enabled=true", "metrics.prometheusServiceAccount.name=p",
		"prometheusRule.enabled=true", "grafanaDashboard.enabled=true"}} {
		args := []string{"lint", "--strict", chartDir(t)}
		for _, s := range sets {
			args = append(args, "--set="+s)
		}
		out, err := helm(t, "", args...)
		if err != nil || !strings.Contains(out, "0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
			t.Errorf("helm lint --strict %v: %v\n%s", sets, err, out)
		}
	}
}

// TestHelmInstallBringsTheExampleToProgrammed installs the chart with helm, taking
// over what deploy/ applied when an earlier test left it (a move from kustomize to
// Helm), runs the controller as the installed Deployment's pod would, with its
// ServiceAccount, brings the example to Programmed under the managed GatewayClass,
// and uninstalls: nothing the chart made is left but the GatewayConfig CRD, which
// Helm never deletes.
func TestHelmInstallBringsTheExampleToProgrammed(t *testing.T) {
	suffix := utilrand.String(5)
	c := installChart(t, "helm-"+suffix)
	admin, manifest, r := c.admin, c.manifest, c.rendered

	user := serviceaccountUser(deployNamespace, deployName)
	waitAuthorized(t, user, r.clusterRole.Rules[0], "")
	waitAuthorized(t, user, r.role.Rules[0], deployNamespace)
	kubeconfig, token := serviceAccountKubeconfig(t, deployNamespace, deployName, nil)
	waitPolicyInEffect(t, r, tokenClient(token))
	x := newDeployExample("helm-"+suffix, chartGatewayClass)
	x.create(t)
	const pod = "consul-gateway-controller-helm-0"
	args := r.processArgs(t, pod, "--require-admission-policy=true") // the default, which the harness turns off
	p := env.RunController(t, testenv.ControllerOptions{Name: pod, Kubeconfig: kubeconfig, Args: args})
	t.Logf("running %s %s", pod, strings.Join(args, " "))
	start := time.Now()
	waitConverged(t, p, x, gwsync.DefaultControllerName, 90*time.Second)
	t.Logf("example converged in %s", time.Since(start).Round(time.Millisecond))
	testenv.Eventually(t, 30*time.Second, "the managed GatewayClass "+chartGatewayClass+" accepted", func(ctx context.Context) error {
		class, err := env.GatewayClient.GatewayV1().GatewayClasses().Get(ctx, chartGatewayClass, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(class.Status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted)) {
			return fmt.Errorf("conditions %v", class.Status.Conditions)
		}
		return nil
	})
	leaveClass(t, p, x)
	if code, err := p.Terminate(10 * time.Second); err != nil || code != 0 {
		t.Fatalf("SIGTERM: exit code %d, %v", code, err)
	}

	c.uninstall(t, "--wait")
	assertUninstalled(t, admin, manifest)
}

// assertUninstalled checks that no object of the installed manifest is left, and that
// the GatewayConfig CRD (the chart's crds/, which Helm installs but never deletes) is.
func assertUninstalled(t *testing.T, kubeconfig, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "every object the chart made deleted", func(context.Context) error {
		out, err := kubectl(t, kubeconfig, "get", "-f", file, "--ignore-not-found", "-o", "name")
		switch {
		case err != nil:
			return fmt.Errorf("kubectl get: %w: %s", err, out)
		case strings.TrimSpace(out) != "":
			return fmt.Errorf("left after helm uninstall: %s", strings.Fields(out))
		}
		return nil
	})
	if _, err := env.KubeClient.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String()); err != nil {
		t.Errorf("the GatewayConfig CRD after helm uninstall: %v", err)
	}
}

// policyWords is spec with each CEL expression's whitespace collapsed.
func policyWords(spec admissionregistrationv1.ValidatingAdmissionPolicySpec) admissionregistrationv1.ValidatingAdmissionPolicySpec {
	spec = *spec.DeepCopy()
	words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for i := range spec.Validations {
		spec.Validations[i].Expression = words(spec.Validations[i].Expression)
	}
	for i := range spec.Variables {
		spec.Variables[i].Expression = words(spec.Variables[i].Expression)
	}
	for i := range spec.MatchConditions {
		spec.MatchConditions[i].Expression = words(spec.MatchConditions[i].Expression)
	}
	return spec
}

// installedChart is the chart as helm installed it for a test, with the admin's
// kubeconfig that installed it and its manifest.
type installedChart struct {
	admin, manifest string
	rendered        renderedDeploy
	uninstalled     bool
}

// installChart installs the chart as the admin, taking over what an earlier test
// left, with clusterID and service-defaults managed; the release is uninstalled when
// the test ends unless the test did it (uninstall).
func installChart(t *testing.T, clusterID string) *installedChart {
	t.Helper()
	c := &installedChart{admin: filepath.Join(t.TempDir(), "kubeconfig")}
	if err := env.Kube.WriteKubeconfig(c.admin, testenv.AdminUser); err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, c.admin, "install", helmRelease, chartDir(t), "--namespace="+deployNamespace, "--create-namespace",
		"--take-ownership", "--force-conflicts", "--set=clusterID="+clusterID, "--set=manageServiceDefaults=true")
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if !c.uninstalled {
			_, _ = helm(t, c.admin, "uninstall", helmRelease, "--namespace="+deployNamespace)
		}
	})
	if c.manifest, err = helm(t, c.admin, "get", "manifest", helmRelease, "--namespace="+deployNamespace); err != nil {
		t.Fatalf("helm get manifest: %v\n%s", err, c.manifest)
	}
	c.rendered = parseRendered(t, "the installed chart", c.manifest)
	return c
}

// uninstall runs helm uninstall of the release with flags.
func (c *installedChart) uninstall(t *testing.T, flags ...string) {
	t.Helper()
	if out, err := helm(t, c.admin, append([]string{"uninstall", helmRelease, "--namespace=" + deployNamespace}, flags...)...); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	c.uninstalled = true
}
