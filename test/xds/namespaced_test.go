package xds

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// The Kubernetes namespace of each instance, in the service meta key consul-k8s's
// endpoints controller records it under, and an instance of "echo" in each of two
// namespaces, registered as consul-k8s registers a mesh pod (the sidecar carries the
// meta too: the gateway's endpoints are the sidecars).
const kubeNamespaceMeta = "k8s-namespace"

var echoInstances = map[string]string{"demo": "127.0.0.2", "evil": "127.0.0.3"}

// TestSubsetRedirectServesOneNamespace shows, against Consul 1.15.4's xDS, the means
// a route can have to reach only its own namespace's instances of a Consul name that
// several Kubernetes namespaces register (Consul CE without namespace mirroring):
//   - a route to the name itself gets the instances of every namespace;
//   - a route to a name of ours whose service-resolver redirects to a subset of the
//     name, filtered on the instances' k8s-namespace meta, gets only its namespace's.
//
// Only the instances Consul holds are in a subset, whatever Kubernetes Services exist.
// The subset must be defined by the name's own service-resolver (Consul looks the
// redirect's subset up there: agent/consul/discoverychain/compile.go "does not have a
// subset named"), and the name of ours needs service-defaults http, as every service
// of an http-route does.
func TestSubsetRedirectServesOneNamespace(t *testing.T) {
	agent, client := startOwnConsul(t)
	const ours = "consul_gateway_controller_demo_echo"
	gw := registerNamespacedFixture(t, client, []consulapi.ConfigEntry{
		&consulapi.ServiceResolverConfigEntry{
			Kind: consulapi.ServiceResolver, Name: "echo",
			Subsets: map[string]consulapi.ServiceResolverSubset{
				"k8s-demo": {Filter: fmt.Sprintf(`Service.Meta[%q] == "demo"`, kubeNamespaceMeta)},
				"k8s-evil": {Filter: fmt.Sprintf(`Service.Meta[%q] == "evil"`, kubeNamespaceMeta)},
			},
		},
		&consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: ours, Protocol: "http"},
		&consulapi.ServiceResolverConfigEntry{
			Kind: consulapi.ServiceResolver, Name: ours,
			Redirect: &consulapi.ServiceResolverRedirect{Service: "echo", ServiceSubset: "k8s-demo"},
		},
		routeOn("itself", "echo", "front"),
		routeOn("subset", ours, "back"),
	})
	w := envoy.Watch(t.Context(), agent.GRPCAddr(), gw)
	t.Cleanup(w.Close)
	awaitEndpoints(t, w, 8080, "the route to echo itself", echoInstances["demo"], echoInstances["evil"])
	awaitEndpoints(t, w, 8081, "the route to the subset of demo", echoInstances["demo"])

	// Consul 1.15.4's gateway chain synthesizer (agent/consul/discoverychain/gateway.go
	// Synthesize) compiles the route's services without their resolvers, and keeps the
	// resolver node of the name of ours beside the redirected one: the gateway gets a
	// cluster for it whose endpoints Consul never sends. No route uses it; a real Envoy
	// stops waiting for them after its initial fetch timeout (15s by default).
	cfg, _ := w.Partial()
	var orphans []string
	for name := range cfg.Clusters {
		if _, sent := cfg.Endpoints[name]; !sent && strings.HasPrefix(name, ours+".default.dc1.") {
			orphans = append(orphans, name)
		}
	}
	if len(orphans) != 1 {
		t.Errorf("clusters of %s without endpoints: %v, want one: Consul's synthesizer may have changed", ours, orphans)
	}
}

// routeOn is an http-route of gw's listener to service.
func routeOn(name, service, listener string) *consulapi.HTTPRouteConfigEntry {
	r := routeTo(name, service)
	r.Parents[0].SectionName = listener
	return r
}

// registerNamespacedFixture writes an api-gateway "gw" with the HTTP listeners "front"
// on 8080 and "back" on 8081, echo's protocol and entries, and an instance of echo
// (with its sidecar) in each namespace of echoInstances; it returns the gateway's
// proxy. The entries are all written before the gateway is registered: Consul 1.15
// may forget a route's chain that changes under a running gateway (see
// TestUnboundChainIsForgotten).
func registerNamespacedFixture(t *testing.T, client *consulapi.Client, entries []consulapi.ConfigEntry) envoy.Proxy {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "Consul's leader", func(ctx context.Context) error {
		_, err := client.Status().Leader()
		return err
	})
	writeEntry(t, client, echoDefaults("namespaced"))
	writeEntry(t, client, &consulapi.APIGatewayConfigEntry{
		Kind: consulapi.APIGateway, Name: "gw",
		Listeners: []consulapi.APIGatewayListener{{Name: "front", Port: 8080, Protocol: "http"}, {Name: "back", Port: 8081, Protocol: "http"}},
	})
	for _, e := range entries {
		writeEntry(t, client, e)
	}
	regs := []*consulapi.CatalogRegistration{{Node: "gw-node", Address: "127.0.0.1", Service: &consulapi.AgentService{
		Kind: consulapi.ServiceKindAPIGateway, ID: "gw-1", Service: "gw", Address: "127.0.0.1", Port: 8080}}}
	for ns, addr := range echoInstances {
		meta := map[string]string{kubeNamespaceMeta: ns}
		node := "k8s-" + ns
		regs = append(regs,
			&consulapi.CatalogRegistration{Node: node, Address: addr, Service: &consulapi.AgentService{
				ID: "echo-" + ns, Service: "echo", Address: addr, Port: 8081, Meta: meta}},
			&consulapi.CatalogRegistration{Node: node, Address: addr, Service: &consulapi.AgentService{
				Kind: consulapi.ServiceKindConnectProxy, ID: "echo-" + ns + "-sidecar-proxy", Service: "echo-sidecar-proxy",
				Address: addr, Port: 20000, Meta: meta,
				Proxy: &consulapi.AgentServiceConnectProxyConfig{DestinationServiceName: "echo", DestinationServiceID: "echo-" + ns, LocalServicePort: 8081}}})
	}
	for _, reg := range regs {
		if _, err := client.Catalog().Register(reg, nil); err != nil {
			t.Fatal(err)
		}
	}
	return envoy.Proxy{ID: "gw-1", Node: "gw-node"}
}

// awaitEndpoints waits until a GET / on port is routed to a cluster whose endpoints
// are the addresses want, no more and no fewer.
func awaitEndpoints(t *testing.T, w *envoy.Watcher, port uint32, what string, want ...string) {
	t.Helper()
	slices.Sort(want)
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("%s: GET / on port %d reaches %v", what, port, want), func(context.Context) error {
		cfg, missing := w.Partial()
		ans, err := envoy.ServeHTTP(cfg, envoy.HTTPRequest{Port: port, Host: "example.com", Target: "/"}, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			return fmt.Errorf("%w (missing: %s)", err, missing)
		}
		if got := endpointAddresses(cfg.Endpoints[ans.Cluster]); !slices.Equal(got, want) {
			return fmt.Errorf("cluster %s has endpoints %v", ans.Cluster, got)
		}
		return nil
	})
}
