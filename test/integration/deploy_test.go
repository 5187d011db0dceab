package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// What deploy/ installs, as its manifests name it.
const (
	deployNamespace   = "consul-gateway-controller"
	deployName        = "consul-gateway-controller"
	deployTokenSecret = "consul-gateway-controller-consul-token"
	deployImage       = "ghcr.io/consul-gateway-controller/consul-gateway-controller:v0.1.0"
)

// deployKinds are the kinds `kubectl kustomize deploy` must render.
var deployKinds = []string{
	"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
	"ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "GatewayClass",
}

// renderedDeploy is `kubectl kustomize deploy`, parsed.
type renderedDeploy struct {
	dir         string
	objects     []*unstructured.Unstructured
	clusterRole rbacv1.ClusterRole
	role        rbacv1.Role
	deployment  appsv1.Deployment
	configMap   corev1.ConfigMap
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
	r := renderedDeploy{dir: dir}
	out, err := kubectl(t, "", "kustomize", r.dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("parse the rendered %s: %v", dir, err)
		}
		if len(obj.Object) > 0 {
			r.objects = append(r.objects, obj)
		}
	}
	for kind, into := range map[string]any{
		"ClusterRole": &r.clusterRole, "Role": &r.role, "Deployment": &r.deployment, "ConfigMap": &r.configMap,
	} {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.only(t, kind).Object, into); err != nil {
			t.Fatalf("rendered %s: %v", kind, err)
		}
	}
	return r
}

// only is the one rendered object of kind.
func (r renderedDeploy) only(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, obj := range r.objects {
		if obj.GetKind() == kind {
			found = append(found, obj)
		}
	}
	if len(found) != 1 {
		t.Fatalf("deploy/ renders %d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
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

// harnessFlags are set by startControllerProcess for the test's servers and ports.
var harnessFlags = []string{"--consul-http-addr", "--consul-token-file", "--metrics-bind-address", "--health-probe-bind-address", "--leader-elect-identity"}

// processArgs are the Deployment's container args as the kubelet would expand them
// for a pod named pod: $(VAR) from the container's env (the rendered ConfigMap, the
// downward API), minus the flags the harness sets itself. overrides replace the
// Deployment's flags of the same name, or are added.
func (r renderedDeploy) processArgs(t *testing.T, pod string, overrides ...string) []string {
	t.Helper()
	var args []string
	for _, arg := range r.expandedArgs(t, pod) {
		name, _, _ := strings.Cut(arg, "=")
		if slices.Contains(harnessFlags, name) || slices.ContainsFunc(overrides, func(o string) bool { return strings.HasPrefix(o, name+"=") }) {
			continue
		}
		args = append(args, arg)
	}
	return append(args, overrides...)
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
				t.Fatalf("env %s refers to ConfigMap %q; deploy/ renders %q", e.Name, ref.Name, r.configMap.Name)
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

// serviceAccountKubeconfig writes a kubeconfig holding a TokenRequest token of the
// ServiceAccount namespace/name, as a pod of it would get. via, when set, is a proxy
// (startWatchListOffProxy) to reach the API server through.
func serviceAccountKubeconfig(t *testing.T, namespace, name string, via *watchListOffProxy) string {
	t.Helper()
	tr, err := env.KubeClient.CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", namespace, name, err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kube.WriteTokenKubeconfig(path, name, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	if via == nil {
		return path
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	proxyCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: via.Certificate().Raw})
	for _, cluster := range cfg.Clusters {
		cluster.Server, cluster.CertificateAuthority, cluster.CertificateAuthorityData = via.URL, "", proxyCA
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// watchListOffProxy serves the API server the way one without WatchList does
// (Kubernetes before 1.34, or with the feature gate off): a watch that asks for its
// initial events is refused, so client-go's informers fall back to LIST and then
// WATCH. Against this test's API server they never list, so only through this proxy
// is a list grant put to the test. It serves https (client-go sends no token over
// http) with a certificate of its own.
type watchListOffProxy struct {
	*httptest.Server
	refused, lists atomic.Int64
}

func startWatchListOffProxy(t *testing.T) *watchListOffProxy {
	t.Helper()
	target, err := url.Parse(env.Kube.Host())
	if err != nil {
		t.Fatal(err)
	}
	// TLS to the API server only; each request carries the controller's own token.
	cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	cfg.BearerToken = ""
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reverse := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
	p := &watchListOffProxy{}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		query := req.URL.Query()
		switch {
		case query.Get("sendInitialEvents") == "true":
			p.refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status:   metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
				Message: "sendInitialEvents is not supported: this API server has no WatchList",
			})
			return
		case req.Method == http.MethodGet && query.Get("watch") != "true" && strings.HasPrefix(req.URL.Path, "/api"):
			p.lists.Add(1) // and gets, which the controller makes only of its Lease
		}
		reverse.ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		p.CloseClientConnections() // open watches, or Close waits for them
		p.Close()
	})
	return p
}

// deployExample is what an operator would apply next to deploy/, in namespace ns: a
// Gateway with HTTP, HTTPS (a kubernetes.io/tls Secret) and TCP listeners, an
// HTTPRoute, a TCPRoute, a GRPCRoute (Consul 1.15 serves none, but it gets a status), a
// route to a Service of namespace ns-be allowed by a ReferenceGrant there, and a route
// to a Service that does not exist. Service names carry ns because Consul names
// service-defaults after the Service alone.
type deployExample struct {
	ns, backends string
	class        string
}

func newDeployExample(ns, class string) deployExample {
	return deployExample{ns: ns, backends: ns + "-be", class: class}
}

func (x deployExample) service(name string) string { return x.ns + "-" + name }

func (x deployExample) create(t *testing.T) {
	t.Helper()
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: x.ns}})
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: x.backends}})
	cert, key, err := testcerts.SelfSigned("secure.example.com")
	if err != nil {
		t.Fatal(err)
	}
	createObject(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}})
	for _, svc := range []struct {
		ns, name string
		port     int32
	}{{x.ns, x.service("web"), 8080}, {x.ns, x.service("db"), 5432}, {x.backends, x.service("other"), 8080}} {
		createObject(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.ns, Name: svc.name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: svc.port}}}})
	}
	createObject(t, &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.backends, Name: "routes"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(x.ns)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	})
	createObject(t, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "edge"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(x.class), Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType},
			{Name: "https", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType,
				TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "tls"}}}},
			{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType},
		}},
	})
	edge := func(section gatewayv1.SectionName) []gatewayv1.ParentReference {
		ref := gatewayv1.ParentReference{Name: "edge"}
		if section != "" {
			ref.SectionName = &section
		}
		return []gatewayv1.ParentReference{ref}
	}
	httpRoute := func(name string, section gatewayv1.SectionName, backendNS, backend string) *gatewayv1.HTTPRoute {
		ref := gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(backend), Port: new(gatewayv1.PortNumber(8080))}
		if backendNS != "" {
			ref.Namespace = new(gatewayv1.Namespace(backendNS))
		}
		return &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: name},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: edge(section)},
				Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(name + ".example.com")},
				Rules:           []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: ref}}}}},
			},
		}
	}
	createObject(t, httpRoute("web", "", "", x.service("web")))
	createObject(t, httpRoute("cross", "http", x.backends, x.service("other")))
	createObject(t, httpRoute("broken", "http", "", x.service("missing")))
	createObject(t, &gatewayv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "db"},
		Spec: gatewayv1.TCPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: edge("tcp")},
			Rules: []gatewayv1.TCPRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(x.service("db")), Port: new(gatewayv1.PortNumber(5432))}}}}},
		},
	})
	createObject(t, &gatewayv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "rpc"},
		Spec:       gatewayv1.GRPCRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: edge("http")}},
	})
	// Without a namespace controller the namespaces only go Terminating and keep their
	// objects: delete the Gateway and routes, or a later controller of the same class
	// (TestDeployAppliesAndRunsWithItsOwnRBAC again, with -count) would judge them and
	// write Events into a Terminating namespace. This runs after the controller
	// process is stopped (cleanups run last-registered first).
	t.Cleanup(func() {
		ctx, gw, del := context.Background(), env.GatewayClient.GatewayV1(), metav1.DeleteOptions{}
		for _, name := range []string{"web", "cross", "broken"} {
			_ = gw.HTTPRoutes(x.ns).Delete(ctx, name, del)
		}
		_ = gw.TCPRoutes(x.ns).Delete(ctx, "db", del)
		_ = gw.GRPCRoutes(x.ns).Delete(ctx, "rpc", del)
		_ = gw.Gateways(x.ns).Delete(ctx, "edge", del)
		x.deleteConsulEntries()
	})
}

// converged returns nil once the API server and Consul hold what the controller must
// make of the example, and what is missing otherwise.
func (x deployExample) converged(t *testing.T, controller gatewayv1.GatewayController) error {
	ctx := t.Context()
	gw := env.GatewayClient.GatewayV1()
	var problems []string
	want := func(what, got, want string) {
		if got != want {
			problems = append(problems, fmt.Sprintf("%s = %q, want %q", what, got, want))
		}
	}
	class, err := gw.GatewayClasses().Get(ctx, x.class, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want("GatewayClass Accepted", conditionReason(class.Status.Conditions, "Accepted"), "True/Accepted")
	edge, err := gw.Gateways(x.ns).Get(ctx, "edge", metav1.GetOptions{})
	if err != nil {
		return err
	}
	want("Gateway Programmed", conditionReason(edge.Status.Conditions, "Programmed"), "True/Programmed")
	routeParents := func(name string, parents []gatewayv1.RouteParentStatus) {
		var conds []metav1.Condition
		for _, p := range parents {
			if p.ControllerName == controller {
				conds = p.Conditions
			}
		}
		okRefs := "True/ResolvedRefs"
		if name == "broken" {
			okRefs = "False/BackendNotFound"
		}
		want(name+" Accepted", conditionReason(conds, "Accepted"), "True/Accepted")
		want(name+" ResolvedRefs", conditionReason(conds, "ResolvedRefs"), okRefs)
	}
	for _, name := range []string{"web", "cross", "broken"} {
		r, err := gw.HTTPRoutes(x.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		routeParents(name, r.Status.Parents)
	}
	db, err := gw.TCPRoutes(x.ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		return err
	}
	routeParents("db", db.Status.Parents)
	for _, e := range x.consulEntries() {
		if _, _, err := env.ConsulClient.ConfigEntries().Get(e.kind, e.name, nil); err != nil {
			problems = append(problems, fmt.Sprintf("Consul %s %s: %v", e.kind, e.name, err))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

type consulEntry struct{ kind, name string }

// consulEntries are the entries the example must produce (with
// --manage-service-defaults, as deploy_test runs the controller).
func (x deployExample) consulEntries() []consulEntry {
	var n consul.Naming
	return []consulEntry{
		{consulapi.APIGateway, n.EntryName(x.ns, "edge")},
		{consulapi.InlineCertificate, n.CertificateName(x.ns, "tls")},
		{consulapi.HTTPRoute, n.EntryName(x.ns, "web")},
		{consulapi.HTTPRoute, n.EntryName(x.ns, "cross")},
		{consulapi.TCPRoute, n.EntryName(x.ns, "db")},
		{consulapi.ServiceDefaults, x.service("web")},
		{consulapi.ServiceDefaults, x.service("other")},
	}
}

// deleteConsulEntries removes what the example left in the shared Consul once the
// controller that owns it is gone (no controller is left to collect it).
func (x deployExample) deleteConsulEntries() {
	for _, e := range x.consulEntries() {
		_, _ = env.ConsulClient.ConfigEntries().Delete(e.kind, e.name, nil)
	}
}

// refusal is one RBAC refusal the API server answered, as client-go logs it.
type refusal struct{ verb, resource, group string }

func (r refusal) String() string { return fmt.Sprintf("%s %s (group %q)", r.verb, r.resource, r.group) }

// refusalPattern matches the authorizer's "forbidden" message; the quotes are escaped
// when the message is a structured log value.
var refusalPattern = regexp.MustCompile(`cannot (\w+) resource \\?"([^"\\]*)\\?" in API group \\?"([^"\\]*)\\?"`)

// refusals lists the RBAC refusals in a process log. mentionsForbidden also reports a
// "forbidden" the pattern could not parse, so no refusal goes unnoticed.
func refusals(log string) (found []refusal, mentionsForbidden bool) {
	for _, m := range refusalPattern.FindAllStringSubmatch(log, -1) {
		r := refusal{m[1], m[2], m[3]}
		if !slices.Contains(found, r) {
			found = append(found, r)
		}
	}
	return found, strings.Contains(strings.ToLower(log), "forbidden")
}

// refusalLine is the first log line refusing r, shortened, to show what refused it.
func refusalLine(log string, r refusal) string {
	for line := range strings.Lines(log) {
		for _, m := range refusalPattern.FindAllStringSubmatch(line, -1) {
			if (refusal{m[1], m[2], m[3]}) == r {
				if line = strings.TrimSpace(line); len(line) > 300 {
					line = line[:300] + "..."
				}
				return line
			}
		}
	}
	return ""
}

// logTail is the end of a process log, for failure messages.
func logTail(log string, lines int) string {
	all := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// assertNoRefusal fails the test if the process was refused anything by RBAC.
func assertNoRefusal(t *testing.T, p *controllerProcess) {
	t.Helper()
	log := p.output()
	if found, forbidden := refusals(log); len(found) > 0 || forbidden {
		t.Fatalf("%s was refused by RBAC: %v\n--- log tail ---\n%s", p.name, found, logTail(log, 30))
	}
}

// waitConverged waits for the example to converge under p, failing early if p exits or
// is refused anything.
func waitConverged(t *testing.T, p *controllerProcess, x deployExample, controller gatewayv1.GatewayController, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		assertNoRefusal(t, p)
		if !p.running() {
			t.Fatalf("%s exited before the example converged: %v\n--- log tail ---\n%s", p.name, p.exitErr, logTail(p.output(), 30))
		}
		if last = x.converged(t, controller); last == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the example did not converge within %s: %v\n--- log tail ---\n%s", timeout, last, logTail(p.output(), 30))
}

// TestDeployAppliesAndRunsWithItsOwnRBAC applies deploy/ as an operator would, then
// runs the controller binary with the Deployment's flags and its ServiceAccount's token
// (leader election on, in the deploy namespace) until an example set converges in the
// API server and in Consul, with no RBAC refusal at all.
func TestDeployAppliesAndRunsWithItsOwnRBAC(t *testing.T) {
	r := renderDeploy(t)
	for _, kind := range deployKinds {
		r.only(t, kind)
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

	// The API server's RBAC cache must hold the new bindings before the controller
	// starts, or a refusal would only show that race.
	user := serviceaccountUser(deployNamespace, deployName)
	waitAuthorized(t, user, r.clusterRole.Rules[0], "")
	waitAuthorized(t, user, r.role.Rules[0], deployNamespace)
	kubeconfig := serviceAccountKubeconfig(t, deployNamespace, deployName, nil)
	suffix := utilrand.String(5)
	x := newDeployExample("deploy-"+suffix, "consul")
	x.create(t)
	const pod = "consul-gateway-controller-0"
	args := r.processArgs(t, pod, "--cluster-id=deploy-"+suffix, "--manage-service-defaults")
	p := startControllerProcess(t, pod, processOptions{kubeconfig: kubeconfig, args: args})
	t.Logf("running %s %s", pod, strings.Join(args, " "))

	start := time.Now()
	waitConverged(t, p, x, gwsync.DefaultControllerName, 90*time.Second)
	t.Logf("example converged in %s", time.Since(start).Round(time.Millisecond))
	p.waitReady(10 * time.Second)

	// SIGTERM as the kubelet sends it: the leader drains and releases the Lease well
	// within the Deployment's grace period.
	grace := time.Duration(*r.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	stopping := time.Now()
	code, err := p.terminate(grace)
	drain := time.Since(stopping)
	if err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	t.Logf("drained and exited with code %d in %s (grace period %s)", code, drain.Round(time.Millisecond), grace)
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0\n--- log tail ---\n%s", code, logTail(p.output(), 20))
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
	assertNoRefusal(t, p)
}

// TestDeployReadmeOverlay renders the overlay deploy/README.md shows, as written there,
// and checks that it changes what the README says it changes.
func TestDeployReadmeOverlay(t *testing.T) {
	base := renderDeploy(t)
	readme, err := os.ReadFile(filepath.Join(base.dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const header = "```yaml\n# my-cluster/kustomization.yaml\n"
	_, rest, found := strings.Cut(string(readme), header)
	overlay, _, closed := strings.Cut(rest, "```")
	if !found || !closed {
		t.Fatalf("deploy/README.md has no block starting %q", header)
	}
	// The overlay names ../deploy: lay it out next to a link to deploy/.
	dir := t.TempDir()
	if err := os.Symlink(base.dir, filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "my-cluster"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "my-cluster", "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	r := renderKustomization(t, filepath.Join(dir, "my-cluster"))

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
	hostname := false
	for _, e := range c.Env {
		if e.Name == "HOSTNAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			hostname = true
		}
	}
	check(hostname, "HOSTNAME (the leader identity) from metadata.name")
	// The token file is the one key of the operator's Secret, mounted read-only.
	tokenFile := ""
	for _, arg := range c.Args {
		if v, ok := strings.CutPrefix(arg, "--consul-token-file="); ok {
			tokenFile = v
		}
	}
	mounted := false
	for _, v := range spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != deployTokenSecret {
			continue
		}
		for _, m := range c.VolumeMounts {
			for _, item := range v.Secret.Items {
				if m.Name == v.Name && m.ReadOnly && item.Key == "token" && filepath.Join(m.MountPath, item.Path) == tokenFile {
					mounted = true
				}
			}
		}
	}
	check(tokenFile != "" && mounted, "--consul-token-file is key token of Secret "+deployTokenSecret+", mounted read-only")
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

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// grant is one verb on one resource of one rule of the ClusterRole or the Role.
type grant struct {
	role     string // "ClusterRole" or "Role"
	rule     int
	verb     string
	resource string // with its subresource, as the authorizer names it
	group    string
}

func (g grant) String() string {
	return fmt.Sprintf("%s rule %d: %s %s", g.role, g.rule, g.verb, strings.TrimPrefix(g.resource+"."+g.group, "."))
}

// grants splits every rule into single grants.
func grants(role string, rules []rbacv1.PolicyRule) []grant {
	var out []grant
	for i, rule := range rules {
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				for _, verb := range rule.Verbs {
					out = append(out, grant{role: role, rule: i, verb: verb, resource: resource, group: group})
				}
			}
		}
	}
	return out
}

// without returns rules with the one grant g removed; the rest of g's rule stays, split
// into a rule for the other resources and one for the other verbs of g's resource.
func without(rules []rbacv1.PolicyRule, role string, g *grant) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for i, rule := range rules {
		if g == nil || g.role != role || g.rule != i {
			out = append(out, *rule.DeepCopy())
			continue
		}
		if len(rule.APIGroups) != 1 {
			panic("a rule with several apiGroups: split it in deploy/ so each grant can be tested")
		}
		others := slices.DeleteFunc(slices.Clone(rule.Resources), func(r string) bool { return r == g.resource })
		if len(others) > 0 {
			r := *rule.DeepCopy()
			r.Resources = others
			out = append(out, r)
		}
		verbs := slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == g.verb })
		if len(verbs) > 0 {
			r := *rule.DeepCopy()
			r.Resources, r.Verbs = []string{g.resource}, verbs
			out = append(out, r)
		}
	}
	return out
}

// rbacCase runs the controller with the deploy/ roles minus one grant (nil: the full
// roles, which must show no refusal).
type rbacCase struct {
	name      string
	removed   *grant
	watchList bool // false: through startWatchListOffProxy
}

// TestDeployRBACIsLeastPrivilege removes each grant of the ClusterRole and the Role
// that deploy/ renders, one per case, and runs the controller binary with what is left
// against an example that provokes every grant: each removal must show as a refusal
// of exactly that grant (or a non-zero exit) within a bounded time, and the full roles
// must show none. A grant whose removal shows nothing is a grant the controller does
// not need.
func TestDeployRBACIsLeastPrivilege(t *testing.T) {
	start := time.Now()
	r := renderDeploy(t)
	checkLeaseRule(t, r.role)
	ensureNamespace(t, r.role.Namespace)

	cases := []rbacCase{
		{name: "full roles", watchList: true},
		{name: "full roles, API server without WatchList", watchList: false},
	}
	for _, g := range append(grants("ClusterRole", r.clusterRole.Rules), grants("Role", r.role.Rules)...) {
		// Informers list only where the API server lacks WatchList (see
		// startWatchListOffProxy); there, and only there, is a list grant needed.
		cases = append(cases, rbacCase{name: "without " + g.String(), removed: &g, watchList: g.verb != "list"})
	}
	t.Cleanup(func() { t.Logf("%d cases, wall time %s", len(cases), time.Since(start).Round(time.Millisecond)) })
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runRBACCase(t, r, c, fmt.Sprintf("rbac-%s-%d", utilrand.String(4), i))
		})
	}
}

// checkLeaseRule checks that the Role's get and update on leases name exactly the
// Lease the controller uses by default; the cases rename it to their own Lease.
func checkLeaseRule(t *testing.T, role rbacv1.Role) {
	t.Helper()
	want := options.New().Leader
	if role.Namespace != want.Namespace {
		t.Errorf("Role in namespace %q; the controller's Lease is in %q", role.Namespace, want.Namespace)
	}
	for _, rule := range role.Rules {
		if len(rule.ResourceNames) > 0 && !slices.Equal(rule.ResourceNames, []string{want.Name}) {
			t.Errorf("Role rule %v names %v; the controller's Lease is %q", rule.Verbs, rule.ResourceNames, want.Name)
		}
	}
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := env.KubeClient.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// runRBACCase gives a fresh ServiceAccount copies of the roles without c.removed (the
// Role's Lease renamed to the case's own), creates the example for a fresh
// GatewayClass, and runs the controller with the ServiceAccount's token.
func runRBACCase(t *testing.T, r renderedDeploy, c rbacCase, id string) {
	ctx := t.Context()
	controller := gatewayv1.GatewayController("example.com/" + id)
	x := newDeployExample(id, id)
	createObject(t, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: gatewayv1.GatewayClassSpec{ControllerName: controller}})
	x.create(t)

	core, rbac := env.KubeClient.CoreV1(), env.KubeClient.RbacV1()
	if _, err := core.ServiceAccounts(x.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: id}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: id, Namespace: x.ns}}
	clusterRules := without(r.clusterRole.Rules, "ClusterRole", c.removed)
	roleRules := without(r.role.Rules, "Role", c.removed)
	for i := range roleRules {
		if len(roleRules[i].ResourceNames) > 0 {
			roleRules[i].ResourceNames = []string{id} // the case's Lease (checkLeaseRule)
		}
	}
	create := func(what string, err error) {
		if err != nil {
			t.Fatalf("create %s: %v", what, err)
		}
	}
	meta := metav1.ObjectMeta{Name: id}
	_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: clusterRules}, metav1.CreateOptions{})
	create("ClusterRole", err)
	_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: id}}, metav1.CreateOptions{})
	create("ClusterRoleBinding", err)
	leaseNS := r.role.Namespace
	_, err = rbac.Roles(leaseNS).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: roleRules}, metav1.CreateOptions{})
	create("Role", err)
	_, err = rbac.RoleBindings(leaseNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: id}}, metav1.CreateOptions{})
	create("RoleBinding", err)
	t.Cleanup(func() {
		ctx, del := t.Context(), metav1.DeleteOptions{}
		_ = rbac.ClusterRoleBindings().Delete(ctx, id, del)
		_ = rbac.ClusterRoles().Delete(ctx, id, del)
		_ = rbac.RoleBindings(leaseNS).Delete(ctx, id, del)
		_ = rbac.Roles(leaseNS).Delete(ctx, id, del)
		_ = env.KubeClient.CoordinationV1().Leases(leaseNS).Delete(ctx, id, del)
	})
	user := serviceaccountUser(x.ns, id)
	waitAuthorized(t, user, clusterRules[0], "")
	waitAuthorized(t, user, roleRules[0], leaseNS)

	var proxy *watchListOffProxy
	if !c.watchList {
		proxy = startWatchListOffProxy(t)
	}
	args := r.processArgs(t, id,
		"--controller-name="+string(controller),
		"--cluster-id="+id,
		"--manage-service-defaults",
		"--leader-elect-resource-namespace="+leaseNS,
		"--leader-elect-resource-name="+id,
	)
	p := startControllerProcess(t, id, processOptions{kubeconfig: serviceAccountKubeconfig(t, x.ns, id, proxy), args: args})
	started := time.Now()
	if c.removed == nil {
		waitConverged(t, p, x, controller, 90*time.Second)
		t.Logf("converged in %s with no refusal", time.Since(started).Round(time.Millisecond))
		if proxy != nil && (proxy.refused.Load() == 0 || proxy.lists.Load() == 0) {
			t.Errorf("through the proxy: %d watch-lists refused, %d lists: the informers did not take the LIST path", proxy.refused.Load(), proxy.lists.Load())
		}
		return
	}
	outcome := awaitDegradation(t, p, *c.removed, 45*time.Second)
	t.Logf("%s: %s after %s", c.removed, outcome, time.Since(started).Round(time.Millisecond))
	p.kill() // decided: free the CPU for the other cases
}

func serviceaccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// waitAuthorized waits until the API server's RBAC cache allows user the first grant
// of rule, so the controller does not race the bindings just created.
func waitAuthorized(t *testing.T, user string, rule rbacv1.PolicyRule, namespace string) {
	t.Helper()
	attrs := &authorizationv1.ResourceAttributes{Namespace: namespace, Group: rule.APIGroups[0], Verb: rule.Verbs[0]}
	attrs.Resource, attrs.Subresource, _ = strings.Cut(rule.Resources[0], "/")
	if len(rule.ResourceNames) > 0 {
		attrs.Name = rule.ResourceNames[0]
	}
	eventually(t, 10*time.Second, "RBAC allows "+user+" to "+attrs.Verb+" "+rule.Resources[0], func() (bool, error) {
		sar, err := env.KubeClient.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	})
}

// awaitDegradation waits until the controller visibly suffers the removal of g: the API
// server refuses it exactly g, or it exits non-zero. It fails the test on anything
// else: a refusal of another grant, a clean exit, or nothing within timeout.
func awaitDegradation(t *testing.T, p *controllerProcess, g grant, timeout time.Duration) string {
	t.Helper()
	want := refusal{g.verb, g.resource, g.group}
	deadline := time.Now().Add(timeout)
	for {
		log := p.output()
		found, _ := refusals(log)
		if slices.Contains(found, want) {
			return "refused " + want.String() + " in: " + refusalLine(log, want)
		}
		if len(found) > 0 {
			t.Fatalf("%s: refused %v, not the removed grant\n--- log tail ---\n%s", g, found, logTail(log, 30))
		}
		if !p.running() {
			code, _ := p.wait(time.Second)
			if code != 0 {
				return fmt.Sprintf("exited with code %d", code)
			}
			t.Fatalf("%s: the controller exited with code 0 and no refusal\n--- log tail ---\n%s", g, logTail(log, 30))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no visible degradation within %s (no refusal, still running): the grant looks unneeded, or the example does not provoke it\n--- log tail ---\n%s",
				g, timeout, logTail(log, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
