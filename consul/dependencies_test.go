package consul

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

func TestDependencies(t *testing.T) {
	defaults := func(name string) translate.EntryKey {
		return translate.EntryKey{Kind: consulapi.ServiceDefaults, Name: name}
	}
	resolver := func(name string) translate.EntryKey {
		return translate.EntryKey{Kind: consulapi.ServiceResolver, Name: name}
	}
	tests := []struct {
		name  string
		entry consulapi.ConfigEntry
		want  []translate.EntryKey
	}{
		{
			name: "an http-route waits for its backends' service-defaults and service-resolvers",
			entry: &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "web.apps", Rules: []consulapi.HTTPRouteRule{
				{Services: []consulapi.HTTPService{{Name: "echo"}, {Name: "api", Namespace: "ns", Partition: "p"}}},
			}},
			want: []translate.EntryKey{
				defaults("echo"), resolver("echo"),
				{Kind: consulapi.ServiceDefaults, Name: "api", Namespace: "ns", Partition: "p"},
				{Kind: consulapi.ServiceResolver, Name: "api", Namespace: "ns", Partition: "p"},
			},
		},
		{
			name:  "a tcp-route waits for its backends' service-defaults and service-resolvers",
			entry: &consulapi.TCPRouteConfigEntry{Kind: consulapi.TCPRoute, Name: "db.apps", Services: []consulapi.TCPService{{Name: "db"}}},
			want:  []translate.EntryKey{defaults("db"), resolver("db")},
		},
		{
			name: "an api-gateway waits for its inline-certificates",
			entry: &consulapi.APIGatewayConfigEntry{Kind: consulapi.APIGateway, Name: "edge.apps", Listeners: []consulapi.APIGatewayListener{
				{Name: "http", Protocol: "http"},
				{Name: "https", Protocol: "http", TLS: consulapi.APIGatewayTLSConfiguration{Certificates: []consulapi.ResourceReference{
					{Kind: consulapi.InlineCertificate, Name: "tls.apps"},
					{Kind: "file-system-certificate", Name: "elsewhere"},
				}}},
			}},
			want: []translate.EntryKey{{Kind: consulapi.InlineCertificate, Name: "tls.apps"}},
		},
		{
			// Its own service-defaults come first: written after it, the chain's
			// protocols disagree (tcp by default against the target's http) and Consul
			// refuses the resolver.
			name:  "a redirecting service-resolver waits for its own service-defaults and the target's entries",
			entry: narrowedResolver(),
			want:  []translate.EntryKey{defaults(narrowedName), defaults("echo"), resolver("echo")},
		},
		{
			name: "a redirect to another namespace and partition names the target's entries there",
			entry: &consulapi.ServiceResolverConfigEntry{Kind: consulapi.ServiceResolver, Name: "ours", Namespace: "a",
				Redirect: &consulapi.ServiceResolverRedirect{Service: "echo", Namespace: "b", Partition: "p"}},
			want: []translate.EntryKey{
				{Kind: consulapi.ServiceDefaults, Name: "ours", Namespace: "a"},
				{Kind: consulapi.ServiceDefaults, Name: "echo", Namespace: "b", Partition: "p"},
				{Kind: consulapi.ServiceResolver, Name: "echo", Namespace: "b", Partition: "p"},
			},
		},
		{
			name:  "a service-resolver that only defines subsets waits for nothing",
			entry: sharedResolver(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, dependencies(tt.entry)); diff != "" {
				t.Errorf("dependencies (-want +got):\n%s", diff)
			}
		})
	}
}

// The entries of a backend narrowed to namespace demo, as the translation writes them.
const narrowedName = "consul_gateway_controller_demo_echo"

var demoFilter = `Service.Meta["k8s-namespace"] == "demo"`

func narrowedResolver() *consulapi.ServiceResolverConfigEntry {
	return &consulapi.ServiceResolverConfigEntry{Kind: consulapi.ServiceResolver, Name: narrowedName,
		Redirect: &consulapi.ServiceResolverRedirect{Service: "echo", ServiceSubset: "demo"},
		Meta:     testOwnership.Meta(translate.Owner{Kind: "Service", Namespace: "demo", Name: "echo", UID: "uid-echo"})}
}

func sharedResolver() *consulapi.ServiceResolverConfigEntry {
	return &consulapi.ServiceResolverConfigEntry{Kind: consulapi.ServiceResolver, Name: "echo",
		Subsets: map[string]consulapi.ServiceResolverSubset{"demo": {Filter: demoFilter}},
		Meta:    testOwnership.Meta(translate.Owner{Kind: "SharedConsulService", Name: "echo"})}
}

func narrowedRoute() *consulapi.HTTPRouteConfigEntry {
	r := webRouteEntry()
	r.Meta = testOwnership.Meta(translate.Owner{Kind: "HTTPRoute", Namespace: "demo", Name: "web", UID: "uid"})
	r.Name = "web.demo"
	r.Rules = []consulapi.HTTPRouteRule{{Services: []consulapi.HTTPService{{Name: narrowedName}}}}
	return r
}

// consulAnswering answers config entry reads from entries (404 for the others), and writes
// with write; any other request fails the test.
func consulAnswering(t *testing.T, entries map[string]consulapi.ConfigEntry, write func(w http.ResponseWriter, r *http.Request)) *consulapi.Client {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, "/v1/config/")
		switch {
		case r.Method == http.MethodGet && entries[path] != nil:
			_ = json.NewEncoder(w).Encode(entries[path])
		case r.Method == http.MethodGet:
			http.Error(w, "Config entry not found", http.StatusNotFound)
		default:
			write(w, r)
		}
	}))
	t.Cleanup(server.Close)
	client, err := consulapi.NewClient(&consulapi.Config{Address: server.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// A route whose narrowed backend Consul refused says why on the route, in words its
// owner can act on: what Consul answered, and whose resolver stands in the way with
// what it lacks. The route's entry is not written meanwhile, and the user's resolver
// is never written.
func TestRouteSaysWhyItsResolverWasRefused(t *testing.T) {
	foreign := sharedResolver()
	foreign.Meta = nil
	foreign.Subsets = map[string]consulapi.ServiceResolverSubset{"v1": {Filter: "Service.Meta.version == v1"}}
	client := consulAnswering(t, map[string]consulapi.ConfigEntry{"service-resolver/echo": foreign}, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/v1/config" {
			var e struct{ Kind, Name string }
			_ = json.NewDecoder(r.Body).Decode(&e)
			if e.Kind == consulapi.ServiceResolver && e.Name == narrowedName {
				http.Error(w, `service "echo" does not have a subset named "demo"`, http.StatusInternalServerError)
				return
			}
			t.Errorf("wrote %s %s", e.Kind, e.Name)
		}
		t.Errorf("unexpected %s %s", r.Method, r.URL)
	})
	s := NewSyncer(Config{Client: client, Ownership: testOwnership})
	route, narrowed, shared := narrowedRoute(), narrowedResolver(), sharedResolver()
	for _, e := range []consulapi.ConfigEntry{route, narrowed, shared} {
		s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{translate.KeyOf(e): e})
	}

	for _, e := range []consulapi.ConfigEntry{shared, narrowed} {
		_ = s.syncEntry(t.Context(), translate.KeyOf(e))
	}
	err := s.syncEntry(t.Context(), translate.KeyOf(route))
	if err == nil || !strings.Contains(err.Error(), "waits for") {
		t.Fatalf("the route's sync returned %v; want it held back", err)
	}
	v := s.Verdict("HTTPRoute", cache.ObjectName{Namespace: "demo", Name: "web"})
	want := `http-route web.demo waits for service-resolver consul_gateway_controller_demo_echo, which Consul refused: ` +
		`service "echo" does not have a subset named "demo"; ` +
		`Consul's service-resolver of echo is not this controller's: add the subset demo with filter Service.Meta["k8s-namespace"] == "demo" to it, or remove it`
	if v.Reason != ReasonWriteFailed || v.Programmed {
		t.Errorf("verdict %+v; want %s", v, ReasonWriteFailed)
	}
	if diff := cmp.Diff(want, v.Message); diff != "" {
		t.Errorf("the route's message (-want +got):\n%s", diff)
	}
}

// A route that merely waits for its resolver to be written (nothing refused it) is
// not reported: that settles by itself.
func TestRouteWaitingForItsResolverIsNotReported(t *testing.T) {
	client := consulAnswering(t, nil, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected %s %s: the route waits", r.Method, r.URL)
	})
	s := NewSyncer(Config{Client: client, Ownership: testOwnership})
	route, narrowed := narrowedRoute(), narrowedResolver()
	for _, e := range []consulapi.ConfigEntry{route, narrowed} {
		s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{translate.KeyOf(e): e})
	}
	if err := s.syncEntry(t.Context(), translate.KeyOf(route)); err == nil {
		t.Fatal("the route was written before its resolver")
	}
	if v := s.Verdict("HTTPRoute", cache.ObjectName{Namespace: "demo", Name: "web"}); v.Known {
		t.Errorf("verdict %+v; want none while the resolver is only not written yet", v)
	}
}

// A route's service-resolver under a name of ours that someone else wrote could send
// the route's traffic anywhere: the route waits and says so, and the entry is left
// alone.
func TestRouteWaitsForAResolverThatIsNotOurs(t *testing.T) {
	foreign := narrowedResolver()
	foreign.Meta = nil
	client := consulAnswering(t, map[string]consulapi.ConfigEntry{"service-resolver/" + narrowedName: foreign}, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected %s %s", r.Method, r.URL)
	})
	s := NewSyncer(Config{Client: client, Ownership: testOwnership})
	route, narrowed := narrowedRoute(), narrowedResolver()
	for _, e := range []consulapi.ConfigEntry{route, narrowed} {
		s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{translate.KeyOf(e): e})
	}
	if err := s.syncEntry(t.Context(), translate.KeyOf(route)); err == nil {
		t.Fatal("the route was written to a resolver that is not ours")
	}
	v := s.Verdict("HTTPRoute", cache.ObjectName{Namespace: "demo", Name: "web"})
	if !strings.Contains(v.Message, "service-resolver "+narrowedName+", which exists in Consul and is not this controller's") {
		t.Errorf("verdict %+v; want it to name the resolver that is not ours", v)
	}
}

// Consul refuses to delete a resolver (or a service-defaults) a redirect of ours still
// needs: the delete waits, without asking Consul, until the redirect is gone, and the
// redirect's delete queues it again.
func TestDeleteWaitsForTheRedirectThatNeedsIt(t *testing.T) {
	deletes := 0
	shared := sharedResolver()
	client := consulAnswering(t, map[string]consulapi.ConfigEntry{"service-resolver/echo": shared}, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
		deletes++
		_, _ = w.Write([]byte("true"))
	})
	s := NewSyncer(Config{Client: client, Ownership: testOwnership})
	key, narrowedKey := translate.KeyOf(shared), translate.KeyOf(narrowedResolver())
	recordWritten(s.ledger, narrowedResolver())

	err := s.syncEntry(t.Context(), key)
	if err == nil || deletes != 0 {
		t.Fatalf("with the redirect in place: %d deletes, error %v; want none, held back", deletes, err)
	}
	if !strings.Contains(err.Error(), "service-resolver "+narrowedName+" still does") {
		t.Errorf("error %q does not name the redirect", err)
	}
	if released := recordDeleted(s.ledger, narrowedKey); !slices.Contains(released, key) {
		t.Fatalf("the redirect's delete released %v; want %v among them", released, key)
	}
	if err := s.syncEntry(t.Context(), key); err != nil || deletes != 1 {
		t.Errorf("once the redirect went: %d deletes, error %v; want one", deletes, err)
	}
}

func TestConsulReferences(t *testing.T) {
	s := NewSyncer(Config{Ownership: testOwnership})
	route, narrowed := narrowedRoute(), narrowedResolver()
	routeKey, narrowedKey := translate.KeyOf(route), translate.KeyOf(narrowed)
	echoResolver := translate.EntryKey{Kind: consulapi.ServiceResolver, Name: "echo"}
	ownDefaults := translate.EntryKey{Kind: consulapi.ServiceDefaults, Name: narrowedName}
	s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{narrowedKey: narrowed})

	s.ledger.list(consulapi.HTTPRoute, 0, []translate.EntryKey{routeKey}, s.orderingReferences(consulapi.HTTPRoute, []consulapi.ConfigEntry{route}))
	recordWritten(s.ledger, narrowed)
	for key, want := range map[translate.EntryKey][]translate.EntryKey{
		narrowedKey:  {routeKey},
		echoResolver: {narrowedKey},
		// The route's own service-defaults are not held back by it
		// (ServiceDefaultsGrace keeps them), only by the redirect.
		ownDefaults: {narrowedKey},
	} {
		if diff := cmp.Diff(want, s.ledger.referrers(key)); diff != "" {
			t.Errorf("referrers of %v (-want +got):\n%s", key, diff)
		}
	}
	// The route kind listed again without the route: its resolver is released.
	if diff := cmp.Diff([]translate.EntryKey{narrowedKey}, s.ledger.list(consulapi.HTTPRoute, 0, nil, nil)); diff != "" {
		t.Errorf("released by the route's going (-want +got):\n%s", diff)
	}
	released := recordDeleted(s.ledger, narrowedKey)
	slices.SortFunc(released, compareKeys)
	want := []translate.EntryKey{ownDefaults, {Kind: consulapi.ServiceDefaults, Name: "echo"}, echoResolver}
	if diff := cmp.Diff(want, released); diff != "" {
		t.Errorf("released by the redirect's delete (-want +got):\n%s", diff)
	}
}

// A route keeps a reference to a service's resolver only where one is desired or
// exists: at thousands of routes to services without one, nothing is kept.
func TestRouteReferencesOnlyResolversThatExist(t *testing.T) {
	s := NewSyncer(Config{Ownership: testOwnership})
	route := narrowedRoute()
	route.Rules = append(route.Rules, consulapi.HTTPRouteRule{Services: []consulapi.HTTPService{{Name: "plain"}, {Name: "theirs"}}})
	s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{translate.KeyOf(narrowedResolver()): narrowedResolver()})
	s.ledger.list(consulapi.ServiceResolver, 0, []translate.EntryKey{{Kind: consulapi.ServiceResolver, Name: "theirs"}}, nil)
	want := []translate.EntryKey{
		{Kind: consulapi.ServiceResolver, Name: narrowedName},
		{Kind: consulapi.ServiceResolver, Name: "theirs"},
	}
	if diff := cmp.Diff(want, s.ledger.referencesOf(route)); diff != "" {
		t.Errorf("the route's ordered references (-want +got):\n%s", diff)
	}
}

// A route desired to go on naming a service does not hold back the delete of that
// service's resolver of ours (the narrowing withdrawn: the route names echo itself
// again): it would hold it back for good, and Consul refuses nothing there.
func TestDeleteDoesNotWaitForARouteThatKeepsNamingTheService(t *testing.T) {
	deletes := 0
	shared := sharedResolver()
	client := consulAnswering(t, map[string]consulapi.ConfigEntry{"service-resolver/echo": shared}, func(w http.ResponseWriter, r *http.Request) {
		deletes++
		_, _ = w.Write([]byte("true"))
	})
	s := NewSyncer(Config{Client: client, Ownership: testOwnership})
	direct := narrowedRoute()
	direct.Rules = []consulapi.HTTPRouteRule{{Services: []consulapi.HTTPService{{Name: "echo"}}}}
	s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{translate.KeyOf(direct): direct})
	s.ledger.list(consulapi.ServiceResolver, 0, []translate.EntryKey{translate.KeyOf(shared)}, nil)
	recordWritten(s.ledger, direct)
	if refs := s.ledger.referrers(translate.KeyOf(shared)); len(refs) != 1 {
		t.Fatalf("the route refers to %v; want the resolver it names", refs)
	}

	if err := s.syncEntry(t.Context(), translate.KeyOf(shared)); err != nil || deletes != 1 {
		t.Errorf("%d deletes, error %v; want the resolver deleted", deletes, err)
	}
}

// A redirecting resolver is written only once its own name's service-defaults exist:
// before them its name is tcp, the target's http, and Consul refuses the redirect.
func TestRedirectWaitsForItsOwnServiceDefaults(t *testing.T) {
	client := consulAnswering(t, map[string]consulapi.ConfigEntry{"service-resolver/echo": sharedResolver()}, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected %s %s: the redirect waits for its service-defaults", r.Method, r.URL)
	})
	s := NewSyncer(Config{Client: client, Ownership: testOwnership})
	narrowed := narrowedResolver()
	defaults := &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: narrowedName, Protocol: "http", Meta: narrowed.Meta}
	for _, e := range []consulapi.ConfigEntry{narrowed, defaults, sharedResolver()} {
		s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{translate.KeyOf(e): e})
	}
	err := s.syncEntry(t.Context(), translate.KeyOf(narrowed))
	if err == nil || !strings.Contains(err.Error(), "waits for service-defaults "+narrowedName) {
		t.Errorf("the redirect's sync returned %v; want it to wait for its service-defaults", err)
	}
}

// A route whose redirect waits for a resolver Consul refused (here the token may not
// write echo's resolver) says so through the redirect: nothing refused the redirect
// itself, and without the chain the route would wait in silence.
func TestRouteSaysWhatItsRedirectWaitsFor(t *testing.T) {
	client := consulAnswering(t, nil, func(w http.ResponseWriter, r *http.Request) {
		var e struct{ Kind, Name string }
		_ = json.NewDecoder(r.Body).Decode(&e)
		if r.Method == http.MethodPut && e.Kind == consulapi.ServiceResolver && e.Name == "echo" {
			http.Error(w, `Permission denied: token lacks permission 'service:write' on "echo"`, http.StatusForbidden)
			return
		}
		t.Errorf("unexpected %s %s of %s %s", r.Method, r.URL, e.Kind, e.Name)
	})
	s := NewSyncer(Config{Client: client, Ownership: testOwnership})
	route, narrowed, shared := narrowedRoute(), narrowedResolver(), sharedResolver()
	for _, e := range []consulapi.ConfigEntry{route, narrowed, shared} {
		s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{translate.KeyOf(e): e})
	}
	for _, e := range []consulapi.ConfigEntry{shared, narrowed, route} {
		if err := s.syncEntry(t.Context(), translate.KeyOf(e)); err == nil {
			t.Fatalf("%s %s was written", e.GetKind(), e.GetName())
		}
	}
	want := `http-route web.demo waits for service-resolver consul_gateway_controller_demo_echo, which waits for ` +
		`service-resolver echo, which Consul refused: Permission denied: token lacks permission 'service:write' on "echo"`
	v := s.Verdict("HTTPRoute", cache.ObjectName{Namespace: "demo", Name: "web"})
	if diff := cmp.Diff(want, v.Message); diff != "" || v.Reason != ReasonWriteFailed {
		t.Errorf("verdict %s; message (-want +got):\n%s", v.Reason, diff)
	}
}
