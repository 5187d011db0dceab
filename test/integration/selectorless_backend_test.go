package integration

import (
	"slices"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A backend Service without a selector, whose EndpointSlice (written by hand, as the
// conformance test HTTPRouteServiceTypes writes them) points at an injected pod, is
// the Consul service consul-k8s registers that pod under: the name of the Service
// that selects it. The binary reads the slices from the real API server, routes to
// that service and says so, and refuses the backend once an endpoint is not a pod,
// with its reason, until the slice points at pods only again.
func TestSelectorlessBackendResolvesThroughEndpointSlices(t *testing.T) {
	s := newConsulStack(t, "selectorless")
	app := map[string]string{"app": "echo"}
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: testenv.PodServiceAccount}})
	selecting := testenv.Service(s.Namespace, "echo-pods", testenv.BackendPort)
	selecting.Spec.Selector = app
	env.Create(t, selecting)
	env.Create(t, testenv.InjectedPod(s.Namespace, "echo-1", app, "", testenv.BackendPort))
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Backend + "-manual", Labels: map[string]string{discoveryv1.LabelServiceName: s.Backend}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new(""), Port: new(int32(testenv.BackendPort))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.4.2.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "echo-1"}}},
	}
	sliceClient := env.KubeClient.DiscoveryV1().EndpointSlices(s.Namespace)
	if _, err := sliceClient.Create(t.Context(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Create(t, s.Route("web"))
	declareHTTP(t, "echo-pods")
	env.RegisterPodService(t, s.Namespace, "echo-pods", "10.4.2.1")
	s.runStatusController(t, "selectorless")
	routeName := s.naming.EntryName(s.Namespace, "web")
	backend := s.Namespace + "/" + s.Backend

	s.awaitResolvedRefs(t, "web", `True/ResolvedRefs: All references are resolved; backendRef `+backend+` is the Consul service "echo-pods"`)
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "the route sends to the Consul service of the slice's pod", func(e consulapi.ConfigEntry) bool {
		return containsService(e, "echo-pods")
	})

	// An endpoint that is no pod: no Consul service is known for it.
	testenv.Update(t, sliceClient.Get, sliceClient.Update, slice.Name, func(es *discoveryv1.EndpointSlice) {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{"192.0.2.7"}})
	})
	s.awaitResolvedRefs(t, "web", `False/`+backends.ReasonEndpointsUnregistered+`: backendRef `+backend+`: the Service has no selector, and its endpoint 192.0.2.7 has no targetRef`)
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "an endpoint without a pod gets the backend no traffic", func(e consulapi.ConfigEntry) bool {
		return e != nil && !containsService(e, "echo-pods") && !containsService(e, s.Backend)
	})
}

func containsService(e consulapi.ConfigEntry, name string) bool {
	return slices.Contains(httpRouteServices(e), name)
}
