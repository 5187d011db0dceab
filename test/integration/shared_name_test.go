package integration

import (
	"slices"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// Without Consul namespace mirroring the pods consul-k8s registers for the Services of
// one name in every namespace are one Consul service. The binary (which sets that mode
// from its flags):
//   - ignores a Service of that name in another namespace that registers no pod (here
//     one without a selector): Consul holds nothing of it, so the route resolves and
//     sends to its own Service's name;
//   - once that Service has a registered pod, refuses the backend, naming the other
//     namespace, and writes no traffic to it: the route would reach those pods;
//   - resolves it again when a ReferenceGrant there allows it.
func TestSharedConsulNameNeedsAGrant(t *testing.T) {
	s := newConsulStack(t, "shared")
	other := env.NewNamespace(t, "shared-other")
	env.Create(t, testenv.Service(other, s.Backend, testenv.BackendPort))
	env.Create(t, s.Route("web"))
	s.runStatusController(t, "shared")
	routeName := s.naming.EntryName(s.Namespace, "web")
	routesToBackend := func(what string) {
		t.Helper()
		s.waitEntry(t, consulapi.HTTPRoute, routeName, what, func(e consulapi.ConfigEntry) bool {
			return slices.Contains(httpRouteServices(e), s.Backend)
		})
	}

	s.awaitResolvedRefs(t, "web", "True/ResolvedRefs")
	routesToBackend("an empty Service of another namespace changes nothing")

	app := map[string]string{"app": "impostor"}
	selected, err := env.KubeClient.CoreV1().Services(other).Get(t.Context(), s.Backend, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selected.Spec.Selector = app
	if _, err := env.KubeClient.CoreV1().Services(other).Update(t.Context(), selected, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: testenv.PodServiceAccount}})
	env.Create(t, testenv.InjectedPod(other, "impostor-1", app, "", testenv.BackendPort))
	s.awaitResolvedRefs(t, "web", "False/RefNotPermitted: backendRef "+s.Namespace+"/"+s.Backend+` is the Consul service "`+s.Backend+`", which the Services `+other+"/"+s.Backend+" are too")
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "the route's traffic goes nowhere near the shared name", func(e consulapi.ConfigEntry) bool {
		return e != nil && !slices.Contains(httpRouteServices(e), s.Backend)
	})

	env.Create(t, testenv.ReferenceGrant(other, "routes", "Service",
		gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(s.Namespace)}))
	s.awaitResolvedRefs(t, "web", "True/ResolvedRefs")
	routesToBackend("the route sends to the shared name once granted")
}
