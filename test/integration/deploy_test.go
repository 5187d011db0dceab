package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestDeployAppliesAndRunsWithItsOwnRBAC applies deploy/ as an operator would, then
// runs the controller binary with the Deployment's flags and its ServiceAccount's token
// (leader election on, in the deploy namespace) until an example set converges in the
// API server and in Consul, with no RBAC refusal at all and no refusal by deploy/'s
// ValidatingAdmissionPolicy, which is in effect before the controller starts, and
// serves /metrics to a scraper bound to the metrics-reader ClusterRole deploy/
// installed; then its Gateway leaves the class and the controller deletes what it
// deployed.
func TestDeployAppliesAndRunsWithItsOwnRBAC(t *testing.T) {
	r := renderDeploy(t)
	for kind, n := range deployKinds {
		if got := len(r.ofKind(kind)); got != n {
			t.Errorf("deploy/ renders %d objects of kind %s, want %d", got, kind, n)
		}
	}
	checkDeploymentSpec(t, r)

	admin := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kube.WriteKubeconfig(admin, testenv.AdminUser); err != nil {
		t.Fatal(err)
	}
	// The objects stay: the namespace could not be deleted anyway without a namespace
	// controller, and TestDeployRBACIsLeastPrivilege puts its Roles in it.
	if out, err := kubectl(t, admin, "apply", "-k", r.dir); err != nil {
		t.Fatalf("kubectl apply -k deploy: %v\n%s", err, out)
	}
	// Idempotent: a second apply succeeds and writes nothing. kubectl may still say
	// "configured" for an empty change (it does for the PodDisruptionBudget, whose
	// selector it always patches whole), so what counts is the resourceVersions.
	before := appliedVersions(t, admin, r.dir)
	if out, err := kubectl(t, admin, "apply", "-k", r.dir); err != nil {
		t.Fatalf("second kubectl apply -k deploy: %v\n%s", err, out)
	}
	after := appliedVersions(t, admin, r.dir)
	if len(before) != len(r.objects) {
		t.Errorf("the API server holds %d of the %d objects deploy/ renders: %v", len(before), len(r.objects), before)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the second apply changed objects (resourceVersions -first +second):\n%s", diff)
	}

	// The API server's RBAC cache must hold the new bindings, and its admission the
	// policy, before the controller starts, or a refusal would only show that race.
	user := serviceaccountUser(deployNamespace, deployName)
	waitAuthorized(t, user, r.clusterRole.Rules[0], "")
	waitAuthorized(t, user, r.role.Rules[0], deployNamespace)
	kubeconfig, token := serviceAccountKubeconfig(t, deployNamespace, deployName, nil)
	waitPolicyInEffect(t, r, tokenClient(token))
	suffix := utilrand.String(5)
	scraper := metricsScraper(t, deployNamespace, "prometheus-"+suffix, deployMetricsReader)
	x := newDeployExample("deploy-"+suffix, "consul")
	x.create(t)
	const pod = "consul-gateway-controller-0"
	// The start-up check of the policy is the binary's default, which the harness
	// turns off: it must pass here.
	args := r.processArgs(t, pod, "--cluster-id=deploy-"+suffix, "--manage-service-defaults", "--require-admission-policy=true")
	p := env.RunController(t, testenv.ControllerOptions{Name: pod, Kubeconfig: kubeconfig, Args: args, MetricsToken: scraper})
	t.Logf("running %s %s", pod, strings.Join(args, " "))
	// The start-up probe is refused on purpose; the count starts after it.
	testenv.Eventually(t, 30*time.Second, "the controller's check of the admission policy", func(context.Context) error {
		if !strings.Contains(p.Output(), "Admission policy in force") {
			return errors.New("not logged yet")
		}
		return nil
	})
	denied := policyDenials(t, r.policy.Name)

	start := time.Now()
	waitConverged(t, p, x, gwsync.DefaultControllerName, 90*time.Second)
	t.Logf("example converged in %s", time.Since(start).Round(time.Millisecond))
	if err := p.WaitReady(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Metrics(t.Context()); err != nil {
		t.Errorf("a scraper bound to %s: %v", deployMetricsReader, err)
	}
	leaveClass(t, p, x)
	// Also no refusal that the controller retried without logging it at -v=2.
	if denied = policyDenials(t, r.policy.Name) - denied; denied != 0 {
		t.Errorf("the policy refused requests of the controller (%v failed rules)", denied)
	}
	// The refusals namespaceOptIn provokes are the policy's, logged as "forbidden":
	// the RBAC checks look before and after them.
	assertNoRefusal(t, p)
	namespaceOptIn(t, x.class)
	optedIn := len(p.Output())

	// SIGTERM as the kubelet sends it: the leader drains and releases the Lease well
	// within the Deployment's grace period.
	grace := time.Duration(*r.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	stopping := time.Now()
	code, err := p.Terminate(grace)
	drain := time.Since(stopping)
	if err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	t.Logf("drained and exited with code %d in %s (grace period %s)", code, drain.Round(time.Millisecond), grace)
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0\n--- log tail ---\n%s", code, testenv.Tail(p.Output(), 20))
	}
	if drain > grace/3 {
		t.Errorf("drain took %s: not comfortably within the grace period %s", drain, grace)
	}
	lease, err := env.KubeClient.CoordinationV1().Leases(deployNamespace).Get(t.Context(), deployName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Lease: %v", err)
	}
	if holder := lease.Spec.HolderIdentity; holder != nil && *holder != "" {
		t.Errorf("Lease still held by %q after a graceful stop", *holder)
	}
	if found, forbidden := refusals(p.Output()[optedIn:]); len(found) > 0 || forbidden {
		t.Errorf("%s was refused by RBAC after the namespace opted in: %v\n--- log tail ---\n%s", p.Name(), found, testenv.Tail(p.Output(), 30))
	}
}

// TestDeployReadmeOverlay renders the overlay deploy/README.md shows, as written there,
// and checks that it changes what the README says it changes.
func TestDeployReadmeOverlay(t *testing.T) {
	base := renderDeploy(t)
	r := renderKustomization(t, readmeOverlay(t, base, "my-cluster"))

	if got, want := r.deployment.Spec.Template.Spec.Containers[0].Image, "registry.example.com/consul-gateway-controller:v0.1.1"; got != want {
		t.Errorf("image %q, want %q", got, want)
	}
	if r.configMap.Name == base.configMap.Name {
		t.Errorf("the ConfigMap kept its name %q: a changed setting would not roll the pods", r.configMap.Name)
	}
	args := r.expandedArgs(t, "pod")
	for _, want := range []string{"--consul-http-addr=https://consul-server.consul.svc:8501", "--cluster-id=prod-eu-1", "--manage-service-defaults"} {
		if !slices.Contains(args, want) {
			t.Errorf("overlay args lack %s: %q", want, args)
		}
	}
	if len(r.objects) != len(base.objects) {
		t.Errorf("the overlay renders %d objects, the base %d", len(r.objects), len(base.objects))
	}
}

// TestDeployReadmeOverlayWithoutPolicy renders the overlay deploy/README.md shows for
// turning the admission policies off: it must drop the four policies and their bindings,
// and nothing else, and tell the controller not to require the policy, or it would not
// start.
func TestDeployReadmeOverlayWithoutPolicy(t *testing.T) {
	base := renderDeploy(t)
	dir := readmeOverlay(t, base, "no-admission-policy")
	out, err := kubectl(t, "", "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	objects, err := decodeObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	names := func(objects []*unstructured.Unstructured) []string {
		var out []string
		for _, obj := range objects {
			out = append(out, obj.GetKind()+" "+obj.GetName())
		}
		slices.Sort(out)
		return out
	}
	want := slices.DeleteFunc(names(base.objects), func(name string) bool {
		return strings.HasPrefix(name, "ValidatingAdmissionPolicy")
	})
	if len(want) != len(base.objects)-8 {
		t.Fatalf("the base renders %d objects of the policies' kinds, want 8 (four policies, four bindings)", len(base.objects)-len(want))
	}
	if diff := cmp.Diff(want, names(objects)); diff != "" {
		t.Errorf("the overlay renders (-want +got):\n%s", diff)
	}
	if args := renderKustomization(t, dir).expandedArgs(t, "pod"); !slices.Contains(args, "--require-admission-policy=false") {
		t.Errorf("the overlay's controller args %q lack --require-admission-policy=false", args)
	}
}

// readmeOverlay writes the overlay that deploy/README.md shows in a block opening
// with "# <name>/kustomization.yaml" next to a link to deploy/ (it names ../deploy),
// and returns its directory.
func readmeOverlay(t *testing.T, base renderedDeploy, name string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(base.dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	header := "```yaml\n# " + name + "/kustomization.yaml\n"
	_, rest, found := strings.Cut(string(readme), header)
	overlay, _, closed := strings.Cut(rest, "```")
	if !found || !closed {
		t.Fatalf("deploy/README.md has no block starting %q", header)
	}
	dir := t.TempDir()
	if err := os.Symlink(base.dir, filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// checkDeploymentSpec checks what the rendered Deployment and its companions promise
// an operator: the hardening, the probes, the token file and the leader identity.
func checkDeploymentSpec(t *testing.T, r renderedDeploy) {
	t.Helper()
	d := r.deployment
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	var problems []string
	check := func(ok bool, what string) {
		if !ok {
			problems = append(problems, what)
		}
	}
	check(d.Namespace == deployNamespace, "Deployment in namespace "+deployNamespace)
	check(d.Spec.Replicas != nil && *d.Spec.Replicas == 2, "2 replicas")
	check(c.Image == deployImage, "image "+deployImage)
	check(spec.ServiceAccountName == deployName, "serviceAccountName "+deployName)
	check(spec.AutomountServiceAccountToken != nil && *spec.AutomountServiceAccountToken, "automountServiceAccountToken true")
	check(spec.TerminationGracePeriodSeconds != nil, "terminationGracePeriodSeconds set")
	check(d.Spec.Template.Annotations["consul.hashicorp.com/connect-inject"] == "false", "pods annotated consul.hashicorp.com/connect-inject: \"false\"")
	check(len(spec.TopologySpreadConstraints) > 0 || spec.Affinity != nil, "spread across nodes")
	ps := spec.SecurityContext
	check(ps != nil && ps.RunAsNonRoot != nil && *ps.RunAsNonRoot, "pod runAsNonRoot")
	check(ps != nil && ps.RunAsUser != nil && *ps.RunAsUser == 65532 && ps.RunAsGroup != nil && *ps.RunAsGroup == 65532, "pod runs as 65532:65532")
	check(ps != nil && ps.SeccompProfile != nil && ps.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "pod seccomp RuntimeDefault")
	cs := c.SecurityContext
	check(cs != nil && cs.ReadOnlyRootFilesystem != nil && *cs.ReadOnlyRootFilesystem, "readOnlyRootFilesystem")
	check(cs != nil && cs.AllowPrivilegeEscalation != nil && !*cs.AllowPrivilegeEscalation, "allowPrivilegeEscalation false")
	check(cs != nil && cs.Capabilities != nil && slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}), "capabilities drop ALL")
	check(cs != nil && cs.RunAsNonRoot != nil && *cs.RunAsNonRoot, "container runAsNonRoot")
	check(cs != nil && cs.SeccompProfile != nil && cs.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "container seccomp RuntimeDefault")
	check(c.Resources.Requests.Cpu().Sign() > 0 && c.Resources.Requests.Memory().Sign() > 0 && c.Resources.Limits.Memory().Sign() > 0,
		"cpu and memory requests, memory limit")
	probe := func(p *corev1.Probe, path string) bool {
		return p != nil && p.HTTPGet != nil && p.HTTPGet.Path == path &&
			(p.HTTPGet.Port.IntValue() == 8081 || containerPort(c, p.HTTPGet.Port.String()) == 8081)
	}
	check(probe(c.LivenessProbe, "/healthz"), "liveness /healthz on 8081")
	check(probe(c.ReadinessProbe, "/readyz"), "readiness /readyz on 8081")
	check(containerPort(c, "metrics") == 8080, "container port metrics 8080")
	check(slices.Contains(c.Args, "--leader-elect=true"), "--leader-elect=true")
	check(slices.Contains(c.Args, "--health-probe-bind-address=:8081") && slices.Contains(c.Args, "--metrics-bind-address=:8080"), "metrics :8080, probes :8081")
	check(slices.Contains(c.Args, "--metrics-auth=kubernetes") && !slices.Contains(c.Args, "--metrics-auth=none"), "--metrics-auth=kubernetes")
	check(!slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--profiling") }), "no --profiling flags (pprof stays off)")
	hostname := false
	for _, e := range c.Env {
		if e.Name == "HOSTNAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			hostname = true
		}
	}
	check(hostname, "HOSTNAME (the leader identity) from metadata.name")
	// The token file is the one key of the operator's Secret, mounted read-only; the
	// CA file the key of consul-k8s's CA Secret, and Consul is spoken to over TLS.
	tokenFile := flagValue(c.Args, "--consul-token-file")
	check(tokenFile != "" && tokenFile == mountedSecretKey(spec, c, deployTokenSecret, "token"),
		"--consul-token-file is key token of Secret "+deployTokenSecret+", mounted read-only")
	caFile := flagValue(c.Args, "--consul-cacert")
	check(caFile != "" && caFile == mountedSecretKey(spec, c, "consul-ca-cert", "tls.crt"),
		"--consul-cacert is key tls.crt of Secret consul-ca-cert, mounted read-only")
	check(strings.HasPrefix(r.configMap.Data["CONSUL_HTTP_ADDR"], "https://"), "CONSUL_HTTP_ADDR over https")
	check(!slices.Contains(c.Args, "--consul-allow-plaintext"), "no --consul-allow-plaintext")
	for _, obj := range r.objects {
		check(obj.GetKind() != "Secret", "no Secret shipped in the base")
	}
	var pdb policyv1.PodDisruptionBudget
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.only(t, "PodDisruptionBudget").Object, &pdb); err != nil {
		t.Fatal(err)
	}
	check((pdb.Spec.MaxUnavailable != nil && pdb.Spec.MaxUnavailable.IntValue() == 1) || (pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.IntValue() == 1),
		"PodDisruptionBudget maxUnavailable 1 or minAvailable 1")
	var svc corev1.Service
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.only(t, "Service").Object, &svc); err != nil {
		t.Fatal(err)
	}
	check(len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Name == "metrics" && svc.Spec.Ports[0].Port == 8080, "metrics Service port 8080 named metrics")
	class := r.only(t, "GatewayClass")
	controllerName, _, _ := unstructured.NestedString(class.Object, "spec", "controllerName")
	check(class.GetName() == "consul" && controllerName == string(gwsync.DefaultControllerName), "GatewayClass consul of the default controllerName")
	if len(problems) > 0 {
		t.Errorf("the rendered deploy/ lacks: %s", strings.Join(problems, "; "))
	}
}

// flagValue is the value of the last --name=value in args, "" for none.
func flagValue(args []string, name string) string {
	value := ""
	for _, arg := range args {
		if v, ok := strings.CutPrefix(arg, name+"="); ok {
			value = v
		}
	}
	return value
}

// mountedSecretKey is the path where c reads key of Secret secret from a read-only
// mount, "" when it does not.
func mountedSecretKey(spec corev1.PodSpec, c corev1.Container, secret, key string) string {
	for _, v := range spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != secret {
			continue
		}
		for _, m := range c.VolumeMounts {
			for _, item := range v.Secret.Items {
				if m.Name == v.Name && m.ReadOnly && item.Key == key {
					return filepath.Join(m.MountPath, item.Path)
				}
			}
		}
	}
	return ""
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// leaveClass moves the example's Gateway edge, which the controller deployed under
// the policy, out of its class, and waits until the controller has deleted its
// ServiceAccount, Deployment and Service: the Gateway stays, so the garbage collector
// does not. The policy must let the controller delete what it made.
func leaveClass(t *testing.T, p *testenv.Controller, x deployExample) {
	t.Helper()
	gateways := env.GatewayClient.GatewayV1().Gateways(x.ns)
	edge, err := gateways.Get(t.Context(), "edge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := dataplane.Name(edge)
	core, apps, get := env.KubeClient.CoreV1(), env.KubeClient.AppsV1(), metav1.GetOptions{}
	objects := func(ctx context.Context) map[string]error {
		return map[string]error{
			"ServiceAccount": ignoreResult(core.ServiceAccounts(x.ns).Get(ctx, name, get)),
			"Deployment":     ignoreResult(apps.Deployments(x.ns).Get(ctx, name, get)),
			"Service":        ignoreResult(core.Services(x.ns).Get(ctx, name, get)),
		}
	}
	for kind, err := range objects(t.Context()) {
		if err != nil {
			t.Fatalf("%s %s/%s of the programmed Gateway edge: %v", kind, x.ns, name, err)
		}
	}
	testenv.Update(t, gateways.Get, gateways.Update, "edge", func(gw *gatewayv1.Gateway) {
		gw.Spec.GatewayClassName = gatewayv1.ObjectName(x.class + "-gone")
	})
	start := time.Now()
	testenv.Eventually(t, 60*time.Second, "the objects of Gateway edge deleted after it left the class", func(ctx context.Context) error {
		assertNoRefusal(t, p)
		var left []string
		for kind, err := range objects(ctx) {
			if !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%s: %v", kind, err))
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("still there: %s", strings.Join(left, "; "))
		}
		return nil
	})
	t.Logf("Gateway edge left its class; its objects were deleted in %s", time.Since(start).Round(time.Millisecond))
}

// TestDeployRefusesToStartWithoutAdmissionPolicy runs the controller binary as an
// identity the admission policy of deploy/ does not judge (the admin), so that the
// policy is not in force for it whether or not another test installed it: by default
// it refuses to start, saying why and how to go on; it starts when it deploys no
// gateways, or when told not to require the policy.
func TestDeployRefusesToStartWithoutAdmissionPolicy(t *testing.T) {
	suffix := utilrand.String(5)
	flags := func(name string, more ...string) []string {
		return append([]string{"--controller-name=example.com/" + name + "-" + suffix, "--cluster-id=" + name + "-" + suffix,
			"--leader-elect=false"}, more...)
	}

	refused := env.RunController(t, testenv.ControllerOptions{Name: "policy-required-" + suffix,
		Args: flags("policy-required", "--require-admission-policy=true")})
	code, err := refused.Wait(60 * time.Second)
	if err != nil {
		t.Fatalf("without the admission policy in force: %v; want it to refuse to start", err)
	}
	out := refused.Output()
	if code == 0 || !strings.Contains(out, "refusing to deploy gateways") || !strings.Contains(out, "is not in force") ||
		!strings.Contains(out, "--require-admission-policy=false") {
		t.Errorf("without the admission policy in force: exit code %d, log:\n%s\nwant a non-zero exit that says the policy is not in force and how to run without it", code, out)
	}

	for _, c := range []struct{ name, flag string }{
		{"no-gateways", "--deploy-gateways=false"},
		{"policy-optional", "--require-admission-policy=false"},
	} {
		t.Run(c.flag, func(t *testing.T) {
			p := env.RunController(t, testenv.ControllerOptions{Name: c.name + "-" + suffix,
				Args: flags(c.name, "--require-admission-policy=true", c.flag)})
			if err := p.WaitReady(t.Context(), 60*time.Second); err != nil {
				t.Fatalf("%v; log:\n%s", err, p.Output())
			}
		})
	}
}

// namespaceOptIn creates a Gateway of class in a namespace without the opt-in label,
// for the running controller: the policy refuses its objects, and its Programmed
// condition says so with the rule; once the cluster admin labels the namespace, the
// controller's retry deploys it.
func namespaceOptIn(t *testing.T, class string) {
	t.Helper()
	ns := "closed-" + utilrand.String(5)
	env.Create(t, testenv.Namespace(ns, nil))
	gw := testenv.Gateway(ns, "edge", class, testenv.HTTPListener("http", 8080))
	env.Create(t, gw)
	testenv.Eventually(t, 60*time.Second, "Programmed=False/Invalid with the policy's rule namespace-label", func(ctx context.Context) error {
		got, err := env.GatewayClient.GatewayV1().Gateways(ns).Get(ctx, gw.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(gatewayv1.GatewayReasonInvalid) ||
			!strings.Contains(c.Message, "rule namespace-label: ") {
			return fmt.Errorf("Programmed %+v", c)
		}
		return nil
	})
	_, err := env.KubeClient.CoreV1().Namespaces().Patch(t.Context(), ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"consul-gateway-controller.github.io/gateways":"enabled"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("label the namespace: %v", err)
	}
	testenv.Eventually(t, 60*time.Second, "the Gateway's Deployment once its namespace opted in", func(ctx context.Context) error {
		_, err := env.KubeClient.AppsV1().Deployments(ns).Get(ctx, dataplane.Name(gw), metav1.GetOptions{})
		return err
	})
	// Deleted while the controller runs: the namespace only goes Terminating here,
	// and a Gateway left in it would keep the class's gateway-exists finalizer for
	// good (a later helm uninstall would wait on it).
	if err := env.GatewayClient.GatewayV1().Gateways(ns).Delete(t.Context(), gw.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the Gateway: %v", err)
	}
}
