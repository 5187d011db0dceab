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

	consulapi "github.com/hashicorp/consul/api"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
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

// kubeReverseProxy forwards to the API server over TLS only; each request carries the
// client's own token.
func kubeReverseProxy(t *testing.T) *httputil.ReverseProxy {
	t.Helper()
	target, err := url.Parse(env.Kube.Host())
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	cfg.BearerToken = ""
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
}

func startWatchListOffProxy(t *testing.T) *watchListOffProxy {
	t.Helper()
	reverse := kubeReverseProxy(t)
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
// HTTPRoute, a TCPRoute, a GRPCRoute, TLSRoute and UDPRoute (Consul 1.15 serves none of
// those, but they get a status), a
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
	// The Gateway's own parameters: a ClusterIP Service, so the gateway gets an address
	// without a cloud load balancer.
	createObject(t, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "edge"},
		Spec:       v1alpha1.GatewayConfigSpec{Service: &v1alpha1.ServiceConfig{Type: new(corev1.ServiceTypeClusterIP)}},
	})
	createObject(t, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "edge"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(x.class), Infrastructure: &gatewayv1.GatewayInfrastructure{
			ParametersRef: &gatewayv1.LocalParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "edge"},
		}, Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType},
			{Name: "https", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType,
				TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "tls"}}}},
			{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType},
		}, AllowedListeners: &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: new(gatewayv1.NamespacesFromSame)}}},
	})
	x.createLeftGateway(t)
	// A ListenerSet, so the controller writes a ListenerSet's status (RBAC
	// listenersets/status) and merges its listener into the api-gateway entry.
	createObject(t, &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "extra"},
		Spec: gatewayv1.ListenerSetSpec{
			ParentRef: gatewayv1.ParentGatewayReference{Name: "edge"},
			Listeners: []gatewayv1.ListenerEntry{{Name: "alt", Port: 9080, Protocol: gatewayv1.HTTPProtocolType}},
		},
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
	dbBackend := []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(x.service("db")), Port: new(gatewayv1.PortNumber(5432))}}}
	createObject(t, &gatewayv1.TLSRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "passthrough"},
		Spec: gatewayv1.TLSRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: edge("")},
			Hostnames:       []gatewayv1.Hostname{"db.example.com"},
			Rules:           []gatewayv1.TLSRouteRule{{BackendRefs: dbBackend}},
		},
	})
	createObject(t, &gatewayv1.UDPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "dns"},
		Spec: gatewayv1.UDPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: edge("")},
			Rules:           []gatewayv1.UDPRouteRule{{BackendRefs: dbBackend}},
		},
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
		_ = gw.TLSRoutes(x.ns).Delete(ctx, "passthrough", del)
		_ = gw.UDPRoutes(x.ns).Delete(ctx, "dns", del)
		_ = gw.ListenerSets(x.ns).Delete(ctx, "extra", del)
		_ = gw.Gateways(x.ns).Delete(ctx, "edge", del)
		_ = gw.Gateways(x.ns).Delete(ctx, "left", del)
		x.deleteConsulEntries()
	})
}

// createLeftGateway creates the Gateway "left", of a class that does not exist, with
// the ServiceAccount, Deployment and Service the controller would have deployed for it
// in x.class: a Gateway that left our class, whose objects the controller deletes
// (RBAC delete on all three).
func (x deployExample) createLeftGateway(t *testing.T) {
	t.Helper()
	createObject(t, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "left"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(x.class + "-gone"),
			Listeners: []gatewayv1.Listener{{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}}},
	})
	ctx := t.Context()
	left, err := env.GatewayClient.GatewayV1().Gateways(x.ns).Get(ctx, "left", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta := metav1.ObjectMeta{
		Namespace: x.ns, Name: x.leftObjects(),
		Labels: map[string]string{dataplane.GatewayNameLabel: "left", dataplane.GatewayClassLabel: x.class,
			dataplane.ManagedByLabel: dataplane.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway",
			Name: "left", UID: left.UID, Controller: new(true)}},
	}
	pods := map[string]string{"app": "left"}
	core := env.KubeClient.CoreV1()
	for what, err := range map[string]error{
		"ServiceAccount": ignoreResult(core.ServiceAccounts(x.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})),
		"Service": ignoreResult(core.Services(x.ns).Create(ctx, &corev1.Service{ObjectMeta: meta,
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}}, metav1.CreateOptions{})),
		"Deployment": ignoreResult(env.KubeClient.AppsV1().Deployments(x.ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{Replicas: new(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: pods},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pods},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}}}}}}, metav1.CreateOptions{})),
	} {
		if err != nil {
			t.Fatalf("create %s of Gateway left: %v", what, err)
		}
	}
}

func (x deployExample) leftObjects() string { return "left-" + x.class }

func ignoreResult[T any](_ T, err error) error { return err }

// leftObjectsGone says which of the objects of Gateway "left" still exist.
func (x deployExample) leftObjectsGone(ctx context.Context) []string {
	var problems []string
	core, name, get := env.KubeClient.CoreV1(), x.leftObjects(), metav1.GetOptions{}
	for what, err := range map[string]error{
		"ServiceAccount": ignoreResult(core.ServiceAccounts(x.ns).Get(ctx, name, get)),
		"Service":        ignoreResult(core.Services(x.ns).Get(ctx, name, get)),
		"Deployment":     ignoreResult(env.KubeClient.AppsV1().Deployments(x.ns).Get(ctx, name, get)),
	} {
		if !apierrors.IsNotFound(err) {
			problems = append(problems, fmt.Sprintf("%s %s of Gateway left, not ours: %v", what, name, err))
		}
	}
	return problems
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
	extra, err := gw.ListenerSets(x.ns).Get(ctx, "extra", metav1.GetOptions{})
	if err != nil {
		return err
	}
	want("ListenerSet Accepted", conditionReason(extra.Status.Conditions, "Accepted"), "True/Accepted")
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
	problems = append(problems, x.leftObjectsGone(ctx)...)
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
	var n translate.Naming
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
