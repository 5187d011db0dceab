package xds

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// TestNarrowedBackendReachesItsNamespaceOnly: on Consul CE without namespace mirroring,
// the Services "narrowed-echo" and "narrowed-db" of two namespaces, each with an
// injected pod, are two Consul services with an instance from each namespace. The
// routes of one namespace, an HTTPRoute to its echo and a TCPRoute to its db, resolve, and the
// gateway's endpoints for them, as Consul's xDS serves them, are that namespace's
// instances alone: the other namespace's pods are never reached.
func TestNarrowedBackendReachesItsNamespaceOnly(t *testing.T) {
	setup(t)
	const ns, other = "xds-narrowed", "xds-narrowed-other"
	own := map[string]string{"narrowed-echo": "10.2.1.1", "narrowed-db": "10.2.1.3"}
	theirs := map[string]string{"narrowed-echo": "10.2.1.2", "narrowed-db": "10.2.1.4"}
	for _, n := range []string{ns, other} {
		env.Create(t, testenv.Namespace(n, nil))
		env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: testenv.PodServiceAccount}})
		for name, port := range map[string]int32{"narrowed-echo": 8080, "narrowed-db": 5432} {
			svc := testenv.Service(n, name, port)
			svc.Spec.Selector = map[string]string{"app": name}
			env.Create(t, svc)
			env.Create(t, testenv.InjectedPod(n, name+"-1", map[string]string{"app": name}, "", port))
		}
	}
	for name := range own {
		registerMeshInstance(t, ns, name, own[name])
		registerMeshInstance(t, other, name, theirs[name])
	}
	// Echo's owners declare it http, as an http-route's backend must be; the
	// controller does not write the protocol of a name several namespaces share.
	declareHTTP(t, "narrowed-echo")

	edge := testenv.Gateway(ns, "edge", "consul", testenv.HTTPListener("http", 80),
		gatewayv1.Listener{Name: "db", Protocol: gatewayv1.TCPProtocolType, Port: 9000})
	env.Create(t, edge)
	env.Create(t, testenv.HTTPRoute(ns, "web", []gatewayv1.ParentReference{{Name: "edge", SectionName: new(gatewayv1.SectionName("http"))}}, testenv.Backend("narrowed-echo", 8080)))
	env.Create(t, testenv.TCPRoute(ns, "db", []gatewayv1.ParentReference{{Name: "edge", SectionName: new(gatewayv1.SectionName("db"))}}, testenv.Backend("narrowed-db", 5432)))
	awaitProgrammed(t, ns, "edge")
	route, err := env.GatewayClient.GatewayV1().HTTPRoutes(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if msg := conditionMessage(route.Status.Parents, "ResolvedRefs"); !strings.Contains(msg, "reaches only the instances of namespace "+ns) || strings.Contains(msg, other) {
		t.Errorf("ResolvedRefs says %q, want where the traffic goes, without naming the other namespace", msg)
	}

	w := envoy.Watch(t.Context(), env.Consul.GRPCAddr(), gatewayProxy(t, ns, "edge"))
	t.Cleanup(w.Close)
	awaitEndpoints(t, w, 80, "the HTTPRoute to its own echo", own["narrowed-echo"])
	testenv.Eventually(t, 60*time.Second, "the TCPRoute to its own db reaches "+own["narrowed-db"]+" only", func(context.Context) error {
		cfg, missing := w.Partial()
		return tcpEndpoints(cfg, 9000, own["narrowed-db"], missing)
	})
}

// conditionMessage is the message of condType on the first parent status.
func conditionMessage(parents []gatewayv1.RouteParentStatus, condType string) string {
	if len(parents) == 0 {
		return ""
	}
	for _, c := range parents[0].Conditions {
		if c.Type == condType {
			return c.Message
		}
	}
	return ""
}

// tcpEndpoints: the TCP listener on port proxies to one cluster whose endpoints are
// want and nothing else.
func tcpEndpoints(cfg *envoy.Config, port uint32, want, missing string) error {
	clusters, err := tcpClusters(cfg, port)
	if err != nil {
		return fmt.Errorf("%w (missing: %s)", err, missing)
	}
	if len(clusters) != 1 {
		return fmt.Errorf("TCP listener on port %d proxies to %v, want one cluster", port, clusters)
	}
	if got := endpointAddresses(cfg.Endpoints[clusters[0]]); !slices.Equal(got, []string{want}) {
		return fmt.Errorf("cluster %s has endpoints %v, want [%s] (missing: %s)", clusters[0], got, want, missing)
	}
	return nil
}
