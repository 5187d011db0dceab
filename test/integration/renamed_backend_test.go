package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A backend is the Consul service consul-k8s registers its Service's pods under: the
// pods' connect-service annotation when they have one. The binary reads the injected
// pods from the real API server and
//   - refuses the backend until Consul's catalog holds the annotation's name;
//   - routes to the annotation's name, and says so in ResolvedRefs;
//   - refuses the backend when its pods disagree on the name and when they are
//     registered with another port than the one the backendRef's Service port leads
//     to, each with its reason, and routes nothing to it;
//   - resolves it again once the cause is gone;
//   - narrows it to its namespace's instances when a pod of another namespace
//     registers under the same name.
func TestBackendIsItsPodsConsulService(t *testing.T) {
	s := newConsulStack(t, "renamed")
	app := map[string]string{"app": "echo"}
	svc, err := env.KubeClient.CoreV1().Services(s.Namespace).Get(t.Context(), s.Backend, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector = app
	if _, err := env.KubeClient.CoreV1().Services(s.Namespace).Update(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := env.NewNamespace(t, "renamed-other")
	for _, ns := range []string{s.Namespace, other} {
		env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testenv.PodServiceAccount}})
	}
	env.Create(t, testenv.InjectedPod(s.Namespace, "echo-1", app, "echo-v2", testenv.BackendPort))
	env.Create(t, s.Route("web"))
	// Declared before the controller starts, so that the controller is stopped before
	// this is removed (cleanups run last first).
	declareHTTP(t, "echo-v2")
	s.runStatusController(t, "renamed")
	routeName := s.naming.EntryName(s.Namespace, "web")
	backend := s.Namespace + "/" + s.Backend
	routesTo := func(what, name string) {
		t.Helper()
		s.waitEntry(t, consulapi.HTTPRoute, routeName, what, func(e consulapi.ConfigEntry) bool {
			return slices.Contains(httpRouteServices(e), name)
		})
	}
	routesNowhere := func(what string) {
		t.Helper()
		s.waitEntry(t, consulapi.HTTPRoute, routeName, what, func(e consulapi.ConfigEntry) bool {
			return e != nil && !slices.Contains(httpRouteServices(e), "echo-v2") && !slices.Contains(httpRouteServices(e), s.Backend)
		})
	}

	// Until consul-k8s registers a pod under the name, Consul has no such service.
	s.awaitResolvedRefs(t, "web", `False/BackendNotFound: backendRef `+backend+` is the Consul service "echo-v2" (its pods' `+backends.ServiceAnnotation+` annotation), which Consul's catalog does not hold`)
	routesNowhere("a name Consul does not hold gets no traffic")
	env.RegisterPodService(t, s.Namespace, "echo-v2", "10.4.1.1")
	s.awaitResolvedRefs(t, "web", `True/ResolvedRefs: All references are resolved; backendRef `+backend+` is the Consul service "echo-v2"`)
	routesTo("the route sends to the pods' Consul service", "echo-v2")

	// A second pod without the annotation registers as the Service's own name.
	env.Create(t, testenv.InjectedPod(s.Namespace, "echo-2", app, "", testenv.BackendPort))
	s.awaitResolvedRefs(t, "web", `False/`+backends.ReasonConsulServiceAmbiguous+`: backendRef `+backend+`: the Service's pods register under different Consul services`)
	routesNowhere("pods that disagree get no traffic")
	deletePod(t, s.Namespace, "echo-2")
	s.awaitResolvedRefs(t, "web", `True/ResolvedRefs`)
	routesTo("agreeing pods get it back", "echo-v2")

	// Registered with a port the Service port does not lead to.
	mismatched := testenv.InjectedPod(s.Namespace, "echo-3", app, "echo-v2", testenv.BackendPort)
	mismatched.Annotations[backends.PortAnnotation] = "9090"
	env.Create(t, mismatched)
	s.awaitResolvedRefs(t, "web", `False/`+backends.ReasonPortNotRegistered+`: backendRef `+backend+` port 8080 leads to port 8080 of pod echo-3, but consul-k8s registers that pod with port 9090`)
	routesNowhere("a pod registered on another port gets no traffic")
	deletePod(t, s.Namespace, "echo-3")
	s.awaitResolvedRefs(t, "web", `True/ResolvedRefs`)
	// Traffic back first: the narrowing below must replace a route to echo-v2 that
	// is in Consul now, not one of the states before.
	routesTo("the pod registered on another port gone, traffic comes back", "echo-v2")

	// Another namespace's pod registers as echo-v2 too: its traffic would be shared.
	env.Create(t, testenv.Service(other, "impostor", testenv.BackendPort))
	impostorSvc, err := env.KubeClient.CoreV1().Services(other).Get(t.Context(), "impostor", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	impostorSvc.Spec.Selector = map[string]string{"app": "impostor"}
	if _, err := env.KubeClient.CoreV1().Services(other).Update(t.Context(), impostorSvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Create(t, testenv.InjectedPod(other, "impostor-1", map[string]string{"app": "impostor"}, "echo-v2", testenv.BackendPort))
	s.awaitResolvedRefs(t, "web", `True/ResolvedRefs: All references are resolved; backendRef `+backend+` is the Consul service "echo-v2", which pods of other namespaces register too: it reaches only the instances of namespace `+s.Namespace)
	narrowed := s.naming.NarrowedServiceName(s.Namespace, "echo-v2")
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "a name another namespace's pods share is narrowed to the route namespace's", func(e consulapi.ConfigEntry) bool {
		services := httpRouteServices(e)
		return slices.Contains(services, narrowed) && !slices.Contains(services, "echo-v2")
	})
}

// deletePod deletes a pod at once: no kubelet runs it, so a grace period would keep it.
func deletePod(t *testing.T, namespace, name string) {
	t.Helper()
	if err := env.KubeClient.CoreV1().Pods(namespace).Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
}

// A MeshService backendRef is the Consul service its spec.name names, such as one on
// VMs: the binary (the MeshService CRD is served here, from deploy/consul-k8s) routes to it
// and says so, refuses one of another namespace until a ReferenceGrant allows it, one
// of a cluster peer, one naming a service Consul's catalog does not hold until it is
// registered, and one that is deleted, each with its reason.
func TestMeshServiceBackend(t *testing.T) {
	s := newConsulStack(t, "meshsvc")
	legacy := env.NewNamespace(t, "meshsvc-legacy")
	env.CreateMeshService(t, testenv.MeshService(s.Namespace, "billing", "billing-vm", ""))
	env.CreateMeshService(t, testenv.MeshService(s.Namespace, "remote", "billing", "dc2"))
	env.CreateMeshService(t, testenv.MeshService(legacy, "ledger", "ledger-vm", ""))
	env.CreateMeshService(t, testenv.MeshService(s.Namespace, "ghost", "ghost-vm", ""))
	env.RegisterOutsideService(t, "billing-vm", "10.4.0.1")
	env.RegisterOutsideService(t, "ledger-vm", "10.4.0.2")
	mesh := func(namespace, name string) gatewayv1.BackendObjectReference {
		ref := gatewayv1.BackendObjectReference{
			Group: new(gatewayv1.Group(gatewayapi.MeshServiceGroup)), Kind: new(gatewayv1.Kind(gatewayapi.MeshServiceKind)), Name: gatewayv1.ObjectName(name),
		}
		if namespace != "" {
			ref.Namespace = new(gatewayv1.Namespace(namespace))
		}
		return ref
	}
	parents := []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(s.GatewayName)}}
	routes := map[string]gatewayv1.BackendObjectReference{
		"vm": mesh("", "billing"), "peer": mesh("", "remote"), "cross": mesh(legacy, "ledger"), "ghost": mesh("", "ghost"),
	}
	for name, ref := range routes {
		r := testenv.HTTPRoute(s.Namespace, name, parents, ref)
		r.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(name + ".example.com")}
		env.Create(t, r)
	}
	// The controller writes service-defaults for the Services it routes to, so that
	// it writes none for a MeshService's Consul service means something; the route
	// "plain" to the stack's own Service is the control.
	env.Create(t, s.Route("plain"))
	s.runStatusController(t, "meshsvc", "--manage-service-defaults")
	s.waitEntry(t, consulapi.ServiceDefaults, s.Backend, "service-defaults written for the routed Service (the control)", present)
	routesTo := func(route, what, consulName string, want bool) {
		t.Helper()
		s.waitEntry(t, consulapi.HTTPRoute, s.naming.EntryName(s.Namespace, route), what, func(e consulapi.ConfigEntry) bool {
			return e != nil && slices.Contains(httpRouteServices(e), consulName) == want
		})
	}

	s.awaitResolvedRefs(t, "vm", `True/ResolvedRefs: All references are resolved; backendRef `+s.Namespace+`/billing is the Consul service "billing-vm", as the MeshService's spec.name says`)
	routesTo("vm", "the route sends to the MeshService's Consul service", "billing-vm", true)
	if e := s.entry(t, consulapi.ServiceDefaults, "billing-vm"); e != nil {
		t.Errorf("service-defaults written for a MeshService's Consul service: %+v", e)
	}
	s.awaitResolvedRefs(t, "peer", `False/`+gwsync.ReasonPeerNotSupported+`: backendRef `+s.Namespace+`/remote is the Consul service "billing" of the cluster peer "dc2"`)
	routesTo("peer", "a peer's service gets no traffic", "billing", false)
	s.awaitResolvedRefs(t, "cross", `False/RefNotPermitted: backendRef `+legacy+`/ledger is not permitted`)
	routesTo("cross", "an ungranted MeshService gets no traffic", "ledger-vm", false)

	s.awaitResolvedRefs(t, "ghost", `False/BackendNotFound: backendRef `+s.Namespace+`/ghost is the Consul service "ghost-vm", which Consul's catalog does not hold`)
	routesTo("ghost", "a service Consul does not hold gets no traffic", "ghost-vm", false)
	env.RegisterOutsideService(t, "ghost-vm", "10.4.0.3")
	s.awaitResolvedRefs(t, "ghost", `True/ResolvedRefs`)
	routesTo("ghost", "once registered, it gets the traffic", "ghost-vm", true)

	grant := testenv.ReferenceGrant(legacy, "routes", gatewayapi.MeshServiceKind,
		gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(s.Namespace)})
	grant.Spec.To[0].Group = gatewayapi.MeshServiceGroup
	env.Create(t, grant)
	s.awaitResolvedRefs(t, "cross", `True/ResolvedRefs`)
	routesTo("cross", "a granted MeshService gets the traffic", "ledger-vm", true)

	if err := env.MeshServices(t, s.Namespace).Delete(t.Context(), "billing", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.awaitResolvedRefs(t, "vm", `False/BackendNotFound: backendRef `+s.Namespace+`/billing refers to a MeshService that does not exist`)
	routesTo("vm", "a deleted MeshService gets no traffic", "billing-vm", false)
}

// httpRouteServices are the Consul services an http-route entry sends traffic to.
func httpRouteServices(e consulapi.ConfigEntry) []string {
	var names []string
	if r, ok := e.(*consulapi.HTTPRouteConfigEntry); ok {
		for _, rule := range r.Rules {
			for _, svc := range rule.Services {
				names = append(names, svc.Name)
			}
		}
	}
	return names
}

// A backend Service deleted while routed: the route says BackendNotFound, and its
// other backend keeps its share while the deleted one's goes to the blackhole.
func TestDeletedBackendKeepsTheOthers(t *testing.T) {
	s := newConsulStack(t, "deleted")
	env.Create(t, testenv.Service(s.Namespace, "spare", testenv.BackendPort))
	env.Create(t, testenv.HTTPRoute(s.Namespace, "web", []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(s.GatewayName)}},
		testenv.Backend(s.Backend, testenv.BackendPort), testenv.Backend("spare", testenv.BackendPort)))
	s.runStatusController(t, "deleted")
	entry := s.naming.EntryName(s.Namespace, "web")
	s.waitEntry(t, consulapi.HTTPRoute, entry, "both backends routed", func(e consulapi.ConfigEntry) bool {
		services := httpRouteServices(e)
		return slices.Contains(services, s.Backend) && slices.Contains(services, "spare")
	})

	if err := env.KubeClient.CoreV1().Services(s.Namespace).Delete(t.Context(), "spare", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "ResolvedRefs BackendNotFound", func(context.Context) error {
		if got := s.routeCondition(t, "web", "ResolvedRefs"); got != "False/BackendNotFound" {
			return fmt.Errorf("ResolvedRefs %s", got)
		}
		return nil
	})
	s.waitEntry(t, consulapi.HTTPRoute, entry, "the remaining backend keeps its share, the deleted one's goes to the blackhole", func(e consulapi.ConfigEntry) bool {
		services := httpRouteServices(e)
		return slices.Contains(services, s.Backend) && !slices.Contains(services, "spare") && slices.Contains(services, s.naming.BlackholeService())
	})
}

// runStatusController runs the binary as controller name for the stack, without
// deploying gateways.
func (s consulStack) runStatusController(t *testing.T, name string, args ...string) {
	t.Helper()
	env.RunController(t, testenv.ControllerOptions{Name: name, Args: append([]string{
		"--controller-name=" + string(s.Controller), "--cluster-id=" + name, "--deploy-gateways=false",
		"--leader-elect-resource-namespace=" + s.Namespace,
	}, args...)})
}

// awaitResolvedRefs waits until the HTTPRoute route's ResolvedRefs condition of ours,
// as "Status/Reason: message", starts with want.
func (s consulStack) awaitResolvedRefs(t *testing.T, route, want string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, route+" ResolvedRefs "+want, func(ctx context.Context) error {
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Get(ctx, route, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p := testenv.ParentOf(r.Status.Parents, s.Controller)
		if p == nil {
			return fmt.Errorf("no status of ours")
		}
		if got := testenv.ConditionText(p.Conditions, "ResolvedRefs"); !strings.HasPrefix(got, want) {
			return fmt.Errorf("ResolvedRefs %q", got)
		}
		return nil
	})
}
