package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

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
	// The Gateways' namespace opts in to the admission policy of deploy/.
	env.Create(t, testenv.Namespace(x.ns, gatewaysNamespaceLabels))
	env.Create(t, testenv.Namespace(x.backends, nil))
	cert, key := testenv.SelfSigned(t, "secure.example.com")
	env.Create(t, testenv.TLSSecret(x.ns, "tls", cert, key))
	env.Create(t, testenv.Service(x.ns, x.service("web"), 8080))
	env.Create(t, testenv.Service(x.ns, x.service("db"), 5432))
	env.Create(t, testenv.Service(x.backends, x.service("other"), 8080))
	env.Create(t, testenv.ReferenceGrant(x.backends, "routes", "Service", testenv.GrantFrom("HTTPRoute", x.ns)))
	// The Gateway's own parameters: a ClusterIP Service, so the gateway gets an address
	// without a cloud load balancer.
	env.Create(t, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "edge"},
		Spec:       v1alpha1.GatewayConfigSpec{Service: &v1alpha1.ServiceConfig{Type: new(corev1.ServiceTypeClusterIP)}},
	})
	edgeGateway := testenv.Gateway(x.ns, "edge", x.class,
		testenv.HTTPListener("http", 8080),
		testenv.HTTPSListener("https", 8443, gatewayv1.SecretObjectReference{Name: "tls"}),
		gatewayv1.Listener{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType},
	)
	edgeGateway.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{
		ParametersRef: &gatewayv1.LocalParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "edge"},
	}
	edgeGateway.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: new(gatewayv1.NamespacesFromSame)}}
	env.Create(t, edgeGateway)
	x.createLeftGateway(t)
	// A ListenerSet, so the controller writes a ListenerSet's status (RBAC
	// listenersets/status) and merges its listener into the api-gateway entry.
	env.Create(t, testenv.ListenerSet(x.ns, "extra", gatewayv1.ParentGatewayReference{Name: "edge"},
		gatewayv1.ListenerEntry{Name: "alt", Port: 9080, Protocol: gatewayv1.HTTPProtocolType}))
	edge := func(section gatewayv1.SectionName) []gatewayv1.ParentReference {
		ref := gatewayv1.ParentReference{Name: "edge"}
		if section != "" {
			ref.SectionName = &section
		}
		return []gatewayv1.ParentReference{ref}
	}
	httpRoute := func(name string, section gatewayv1.SectionName, backendNS, backend string) *gatewayv1.HTTPRoute {
		ref := testenv.Backend(backend, 8080)
		if backendNS != "" {
			ref.Namespace = new(gatewayv1.Namespace(backendNS))
		}
		r := testenv.HTTPRoute(x.ns, name, edge(section), ref)
		r.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(name + ".example.com")}
		return r
	}
	env.Create(t, httpRoute("web", "", "", x.service("web")))
	env.Create(t, httpRoute("cross", "http", x.backends, x.service("other")))
	env.Create(t, httpRoute("broken", "http", "", x.service("missing")))
	db := testenv.Backend(x.service("db"), 5432)
	env.Create(t, testenv.TCPRoute(x.ns, "db", edge("tcp"), db))
	env.Create(t, testenv.GRPCRoute(x.ns, "rpc", edge("http")))
	env.Create(t, testenv.TLSRoute(x.ns, "passthrough", edge(""), []gatewayv1.Hostname{"db.example.com"}, db))
	env.Create(t, testenv.UDPRoute(x.ns, "dns", edge(""), db))
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
// the ServiceAccount, Deployment, Service and PodDisruptionBudget the controller would
// have deployed for it in x.class: a Gateway that left our class, whose objects the
// controller deletes (RBAC delete on all four).
func (x deployExample) createLeftGateway(t *testing.T) {
	t.Helper()
	left := testenv.Gateway(x.ns, "left", x.class+"-gone", testenv.HTTPListener("http", 8080))
	env.Create(t, left)
	meta := metav1.ObjectMeta{
		Namespace: x.ns, Name: x.leftObjects(),
		Labels: map[string]string{dataplane.GatewayNameLabel: "left", dataplane.GatewayClassLabel: x.class,
			dataplane.ManagedByLabel: dataplane.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway",
			Name: "left", UID: left.UID, Controller: new(true)}},
	}
	pods := map[string]string{"app": "left"}
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: meta})
	env.Create(t, &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
	env.Create(t, &appsv1.Deployment{ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: pods},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pods},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}}}}}})
	env.Create(t, &policyv1.PodDisruptionBudget{ObjectMeta: meta,
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: new(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: pods}}})
}

func (x deployExample) leftObjects() string { return "left-" + x.class }

func ignoreResult[T any](_ T, err error) error { return err }

// leftObjectsGone says which of the objects of Gateway "left" still exist.
func (x deployExample) leftObjectsGone(ctx context.Context) []string {
	var problems []string
	core, name, get := env.KubeClient.CoreV1(), x.leftObjects(), metav1.GetOptions{}
	for what, err := range map[string]error{
		"ServiceAccount":      ignoreResult(core.ServiceAccounts(x.ns).Get(ctx, name, get)),
		"Service":             ignoreResult(core.Services(x.ns).Get(ctx, name, get)),
		"Deployment":          ignoreResult(env.KubeClient.AppsV1().Deployments(x.ns).Get(ctx, name, get)),
		"PodDisruptionBudget": ignoreResult(env.KubeClient.PolicyV1().PodDisruptionBudgets(x.ns).Get(ctx, name, get)),
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
	want("GatewayClass Accepted", testenv.ConditionReason(class.Status.Conditions, "Accepted"), "True/Accepted")
	edge, err := gw.Gateways(x.ns).Get(ctx, "edge", metav1.GetOptions{})
	if err != nil {
		return err
	}
	want("Gateway Programmed", testenv.ConditionReason(edge.Status.Conditions, "Programmed"), "True/Programmed")
	extra, err := gw.ListenerSets(x.ns).Get(ctx, "extra", metav1.GetOptions{})
	if err != nil {
		return err
	}
	want("ListenerSet Accepted", testenv.ConditionReason(extra.Status.Conditions, "Accepted"), "True/Accepted")
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
		want(name+" Accepted", testenv.ConditionReason(conds, "Accepted"), "True/Accepted")
		want(name+" ResolvedRefs", testenv.ConditionReason(conds, "ResolvedRefs"), okRefs)
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
