package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-cleanhttp"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The entries of a backend demo/echo narrowed to namespace demo's instances of the
// Consul service echo, as the translation writes them on Consul CE without namespace
// mirroring (consul-k8s registers every namespace's echo as one service "echo", with
// the instance meta k8s-namespace).
const (
	narrowedName = "consul_gateway_controller_demo_echo"
	demoFilter   = `Service.Meta["k8s-namespace"] == "demo"`
)

var narrowedOwnership = translate.Ownership{Controller: "example.com/narrowed", ClusterID: "narrowed"}

// narrowedEntries are the api-gateway demo/gw, the http-route demo/web, and, when
// narrowed, the route's backend under a name of ours redirected to the subset demo of
// echo; otherwise the route names echo itself.
func narrowedEntries(narrowed bool) []consulapi.ConfigEntry {
	meta := func(kind, namespace, name string) map[string]string {
		return narrowedOwnership.Meta(translate.Owner{Kind: kind, Namespace: namespace, Name: name, UID: "uid-" + name})
	}
	gateway := &consulapi.APIGatewayConfigEntry{Kind: consulapi.APIGateway, Name: "gw", Meta: meta("Gateway", "demo", "gw"),
		Listeners: []consulapi.APIGatewayListener{{Name: "http", Port: 8080, Protocol: "http"}}}
	backend := "echo"
	if narrowed {
		backend = narrowedName
	}
	route := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "web.demo", Meta: meta("HTTPRoute", "demo", "web"),
		Parents: []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "gw", SectionName: "http"}},
		// As the translation writes a rule: in the form Consul normalizes it to.
		Rules: []consulapi.HTTPRouteRule{{
			Matches:  []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/"}}},
			Services: []consulapi.HTTPService{{Name: backend, Weight: 1}},
		}}}
	if !narrowed {
		return []consulapi.ConfigEntry{gateway, route}
	}
	shared := narrowedOwnership.Meta(translate.Owner{Kind: "SharedConsulService", Name: "echo"})
	return []consulapi.ConfigEntry{gateway, route,
		&consulapi.ServiceResolverConfigEntry{Kind: consulapi.ServiceResolver, Name: narrowedName, Meta: meta("Service", "demo", "echo"),
			Redirect: &consulapi.ServiceResolverRedirect{Service: "echo", ServiceSubset: "demo"}},
		&consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: narrowedName, Protocol: "http", Meta: meta("Service", "demo", "echo")},
		&consulapi.ServiceResolverConfigEntry{Kind: consulapi.ServiceResolver, Name: "echo", Meta: shared,
			Subsets: map[string]consulapi.ServiceResolverSubset{
				"demo":  {Filter: demoFilter},
				"other": {Filter: `Service.Meta["k8s-namespace"] == "other"`},
			}},
	}
}

// handTranslator gives the syncer hand-written entries in place of a translation: each
// Update hands over what changed since the last one.
type handTranslator struct {
	mu      gosync.Mutex
	entries map[translate.EntryKey]consulapi.ConfigEntry
	given   map[translate.EntryKey]consulapi.ConfigEntry
}

func (h *handTranslator) set(entries []consulapi.ConfigEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entries = map[translate.EntryKey]consulapi.ConfigEntry{}
	for _, e := range entries {
		h.entries[translate.KeyOf(e)] = e
	}
}

func (h *handTranslator) Update(translate.Changes) translate.Delta {
	h.mu.Lock()
	defer h.mu.Unlock()
	delta := translate.Delta{Entries: map[translate.EntryKey]consulapi.ConfigEntry{}}
	for k, e := range h.entries {
		if h.given[k] != e {
			delta.Entries[k] = e
		}
	}
	for k := range h.given {
		if _, ok := h.entries[k]; !ok {
			delta.Entries[k] = nil
		}
	}
	h.given = maps.Clone(h.entries)
	return delta
}

func (h *handTranslator) Translated() int { return 0 }

// narrowedSyncer is the real Syncer against agent, fed hand-written entries.
type narrowedSyncer struct {
	*consul.Syncer
	hand   *handTranslator
	writes *requestCounter
	gate   *deleteGate
}

// startNarrowedSyncer runs a Syncer against agent that desires entries.
func startNarrowedSyncer(t *testing.T, agent *testenv.ConsulAgent, entries []consulapi.ConfigEntry) narrowedSyncer {
	t.Helper()
	s := narrowedSyncer{hand: &handTranslator{}, writes: &requestCounter{}, gate: &deleteGate{next: cleanhttp.DefaultTransport(), open: make(chan struct{})}}
	s.hand.set(entries)
	cfg := consulapi.DefaultNonPooledConfig()
	cfg.Address, cfg.Token, cfg.TokenFile, cfg.TLSConfig = agent.HTTPAddr(), "", "", consulapi.TLSConfig{}
	cfg.HttpClient = &http.Client{Transport: &consulWriteCounter{next: s.gate, writes: s.writes}}
	client, err := consulapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Syncer = consul.NewSyncer(consul.Config{
		Client:     client,
		Ownership:  narrowedOwnership,
		Translator: s.hand,
		Secrets:    corelisters.NewSecretLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		Services:   corelisters.NewServiceLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		Workers:    2,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	all := make(chan struct{})
	close(all)
	go func() {
		defer close(done)
		_ = s.Run(ctx, all)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

// desire replaces what the syncer desires; the confirmation only wakes its translation.
func (s narrowedSyncer) desire(t *testing.T, entries []consulapi.ConfigEntry) {
	s.hand.set(entries)
	s.Publish(t.Context(), contract.Confirmation{Kind: gatewayapi.GatewayKind, Key: cache.ObjectName{Namespace: "demo", Name: "gw"}})
}

// deleteGate, once armed, holds the syncer's delete of the narrowed resolver back
// until the syncer has decided about echo's resolver, which the redirect needs: it read
// echo's resolver twice (the second read is a retry, so the first decision was taken
// and it was not a delete), or it deleted echo's resolver first, which then reaches
// Consul while the redirect still exists. Without the gate the deletes race, and the
// wrong order is met only now and then.
type deleteGate struct {
	next      http.RoundTripper
	mu        gosync.Mutex
	armed     bool
	echoReads int
	open      chan struct{}
	once      gosync.Once
}

func (g *deleteGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
}

func (g *deleteGate) RoundTrip(req *http.Request) (*http.Response, error) {
	const resolvers = "/v1/config/" + consulapi.ServiceResolver + "/"
	g.mu.Lock()
	armed := g.armed
	if armed && req.Method == http.MethodGet && req.URL.Path == resolvers+"echo" {
		if g.echoReads++; g.echoReads >= 2 {
			g.once.Do(func() { close(g.open) })
		}
	}
	g.mu.Unlock()
	switch {
	case armed && req.Method == http.MethodDelete && req.URL.Path == resolvers+"echo":
		resp, err := g.next.RoundTrip(req)
		g.once.Do(func() { close(g.open) })
		return resp, err
	case armed && req.Method == http.MethodDelete && req.URL.Path == resolvers+narrowedName:
		select {
		case <-g.open:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return g.next.RoundTrip(req)
}

// refused is how many config entry writes Consul answered with anything but 200.
func (r *requestCounter) refused() int { return r.total() - r.count(200) }

// startNarrowedConsul starts a Consul of the test's own holding what a user and
// consul-k8s put there: echo's protocol (http, the user's service-defaults), and an
// instance of echo with its sidecar in namespaces demo and evil.
func startNarrowedConsul(t *testing.T) (*testenv.ConsulAgent, *consulapi.Client) {
	t.Helper()
	agent, client := testenv.StartConsulFor(t, env.LogDir(), testenv.ConsulOptions{})
	testenv.Eventually(t, 30*time.Second, "Consul's leader", func(context.Context) error {
		_, err := client.Status().Leader()
		return err
	})
	writeForeign(t, client, &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "echo", Protocol: "http"})
	for ns, addr := range map[string]string{"demo": "127.0.0.2", "evil": "127.0.0.3"} {
		meta := map[string]string{"k8s-namespace": ns}
		node := "k8s-" + ns
		for _, svc := range []*consulapi.AgentService{
			{ID: "echo-" + ns, Service: "echo", Address: addr, Port: 8081, Meta: meta},
			{Kind: consulapi.ServiceKindConnectProxy, ID: "echo-" + ns + "-sidecar-proxy", Service: "echo-sidecar-proxy", Address: addr, Port: 20000, Meta: meta,
				Proxy: &consulapi.AgentServiceConnectProxyConfig{DestinationServiceName: "echo", DestinationServiceID: "echo-" + ns, LocalServicePort: 8081}},
		} {
			if _, err := client.Catalog().Register(&consulapi.CatalogRegistration{Node: node, Address: addr, Service: svc}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	return agent, client
}

func writeForeign(t *testing.T, client *consulapi.Client, entry consulapi.ConfigEntry) {
	t.Helper()
	if _, _, err := client.ConfigEntries().Set(consul.Compact(entry), nil); err != nil {
		t.Fatalf("write %s %s: %v", entry.GetKind(), entry.GetName(), err)
	}
}

// ownedEntries lists every entry of ours of the kinds the syncer writes, as "kind name".
func ownedEntries(client *consulapi.Client) ([]string, error) {
	var out []string
	for _, kind := range []string{consulapi.APIGateway, consulapi.HTTPRoute, consulapi.ServiceDefaults, consulapi.ServiceResolver} {
		entries, _, err := client.ConfigEntries().List(kind, nil)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if narrowedOwnership.Owns(e.GetMeta()) {
				out = append(out, kind+" "+e.GetName())
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// awaitOwned waits until the entries of ours Consul holds are exactly want, and every
// entry of want in Consul says what desired says of its backend.
func awaitOwned(t *testing.T, client *consulapi.Client, what string, want []string, check func() error) {
	t.Helper()
	slices.Sort(want)
	testenv.Eventually(t, 60*time.Second, what, func(context.Context) error {
		got, err := ownedEntries(client)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("entries of ours: %v", got)
		}
		return check()
	})
}

// routeBackends are the services the http-route web.demo names in Consul.
func routeBackends(client *consulapi.Client) ([]string, error) {
	e, _, err := client.ConfigEntries().Get(consulapi.HTTPRoute, "web.demo", nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rule := range e.(*consulapi.HTTPRouteConfigEntry).Rules {
		for _, svc := range rule.Services {
			out = append(out, svc.Name)
		}
	}
	return out, nil
}

func routeNames(backend string, client *consulapi.Client) func() error {
	return func() error {
		got, err := routeBackends(client)
		if err != nil {
			return err
		}
		if !slices.Equal(got, []string{backend}) {
			return fmt.Errorf("the route names %v, want %s", got, backend)
		}
		return nil
	}
}

// TestNarrowedBackendsReachOneNamespace runs the real Syncer against Consul 1.15 with
// the entries of a backend narrowed to namespace demo: they are written in an order
// Consul accepts (no write refused), the route's discovery chain has demo's subset of
// echo as its only target, whose filter selects demo's instance and not evil's, and
// withdrawing the narrowing deletes every entry of it, again without a refusal, which
// Consul answers to a delete in the wrong order (dependencies.go).
func TestNarrowedBackendsReachOneNamespace(t *testing.T) {
	agent, client := startNarrowedConsul(t)
	s := startNarrowedSyncer(t, agent, narrowedEntries(true))
	all := []string{
		"api-gateway gw", "http-route web.demo",
		"service-defaults " + narrowedName, "service-resolver " + narrowedName, "service-resolver echo",
	}
	awaitOwned(t, client, "every narrowed entry written", all, routeNames(narrowedName, client))
	if n := s.writes.refused(); n != 0 {
		t.Errorf("Consul refused %d of %d writes; want every write in an order it accepts", n, s.writes.total())
	}

	answer, _, err := client.DiscoveryChain().Get(narrowedName, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	var filter string
	for _, target := range answer.Chain.Targets {
		targets = append(targets, target.Service+"/"+target.ServiceSubset)
		filter = target.Subset.Filter
	}
	if !slices.Equal(targets, []string{"echo/demo"}) || filter != demoFilter {
		t.Fatalf("the chain of %s targets %v with filter %q; want only echo/demo with %q", narrowedName, targets, filter, demoFilter)
	}
	instances, _, err := client.Health().Service("echo", "", false, &consulapi.QueryOptions{Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	var namespaces []string
	for _, i := range instances {
		namespaces = append(namespaces, i.Service.Meta["k8s-namespace"])
	}
	if !slices.Equal(namespaces, []string{"demo"}) {
		t.Errorf("the subset's instances are of namespaces %v; want demo's alone", namespaces)
	}

	written, refused := s.writes.total(), s.writes.refused()
	s.gate.arm()
	s.desire(t, narrowedEntries(false))
	awaitOwned(t, client, "the narrowing withdrawn", []string{"api-gateway gw", "http-route web.demo"}, routeNames("echo", client))
	if n := s.writes.refused() - refused; n != 0 {
		t.Errorf("Consul refused %d of the %d writes and deletes of the withdrawal; want them in an order it accepts", n, s.writes.total()-written)
	}
	if v := s.Verdict("HTTPRoute", cacheName("demo", "web")); v.Reason == consul.ReasonWriteFailed {
		t.Errorf("after the withdrawal the route's verdict is %+v", v)
	}
}

// TestNarrowedBackendsBehindAForeignResolver starts the Syncer where a user's own
// service-resolver of echo, without the subset demo, is already in Consul: it is never
// changed, the redirect Consul refuses holds the route back, and the route's verdict
// says what stands in the way and what to change. Withdrawing the narrowing then
// leaves nothing of ours but the gateway and the route, and the user's entry as it
// was.
func TestNarrowedBackendsBehindAForeignResolver(t *testing.T) {
	agent, client := startNarrowedConsul(t)
	writeForeign(t, client, &consulapi.ServiceResolverConfigEntry{Kind: consulapi.ServiceResolver, Name: "echo",
		Subsets: map[string]consulapi.ServiceResolverSubset{"v1": {Filter: "Service.Meta.version == v1"}}})
	foreign, _, err := client.ConfigEntries().Get(consulapi.ServiceResolver, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := startNarrowedSyncer(t, agent, narrowedEntries(true))

	route := cacheName("demo", "web")
	wants := []string{
		"http-route web.demo waits for service-resolver " + narrowedName + `, which Consul refused: service "echo" does not have a subset named "demo"`,
		`Consul's service-resolver of echo is not this controller's: add the subset demo with filter ` + demoFilter + ` to it, or remove it`,
	}
	testenv.Eventually(t, 60*time.Second, "the route's verdict names what stands in its way", func(context.Context) error {
		v := s.Verdict("HTTPRoute", route)
		if v.Programmed || v.Reason != consul.ReasonWriteFailed {
			return fmt.Errorf("verdict %+v", v)
		}
		for _, want := range wants {
			if !strings.Contains(v.Message, want) {
				return fmt.Errorf("verdict %q lacks %q", v.Message, want)
			}
		}
		return nil
	})
	if _, _, err := client.ConfigEntries().Get(consulapi.HTTPRoute, "web.demo", nil); !isNotFound(err) {
		t.Errorf("the route's entry was written while its backend's redirect was refused (read: %v)", err)
	}

	s.desire(t, narrowedEntries(false))
	awaitOwned(t, client, "the narrowing withdrawn", []string{"api-gateway gw", "http-route web.demo"}, routeNames("echo", client))
	testenv.Eventually(t, 30*time.Second, "the route's verdict cleared", func(context.Context) error {
		if v := s.Verdict("HTTPRoute", route); v.Reason == consul.ReasonWriteFailed {
			return fmt.Errorf("verdict %+v", v)
		}
		return nil
	})
	after, _, err := client.ConfigEntries().Get(consulapi.ServiceResolver, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if after.GetModifyIndex() != foreign.GetModifyIndex() || narrowedOwnership.Owns(after.GetMeta()) {
		t.Errorf("the user's resolver of echo changed: ModifyIndex %d, was %d", after.GetModifyIndex(), foreign.GetModifyIndex())
	}
}

func isNotFound(err error) bool {
	var status consulapi.StatusError
	return errors.As(err, &status) && status.Code == 404
}
