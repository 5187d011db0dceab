package consul

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	kworkqueue "k8s.io/client-go/util/workqueue"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// checkingQueue runs check on every key as it is queued.
type checkingQueue struct {
	kworkqueue.TypedRateLimitingInterface[translate.EntryKey]
	check func(translate.EntryKey)
}

func (q checkingQueue) Add(key translate.EntryKey) {
	q.check(key)
	q.TypedRateLimitingInterface.Add(key)
}

// A worker may take a key the moment it is queued, so the desired state it reads then
// must already be the new one; otherwise it finds nothing to do and the change waits.
func TestTranslateQueuesKeysOnlyOnceTheirDesiredStateIsInPlace(t *testing.T) {
	s := NewSyncer(Config{
		Ownership: translate.Ownership{Controller: "example.com/c", ClusterID: "test"},
		Secrets:   corelisters.NewSecretLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	})
	gw := acceptedGateway("infra", "gw")
	queued := 0
	s.queue = checkingQueue{TypedRateLimitingInterface: s.queue, check: func(key translate.EntryKey) {
		queued++
		if _, ok := s.desiredEntry(key); !ok {
			t.Errorf("%v queued before its desired entry was in place", key)
		}
	}}
	s.snapshot.Gateways[cache.MetaObjectToName(gw)] = gw
	s.pending[ownerKey{"Gateway", cache.MetaObjectToName(gw)}] = true
	s.translate(t.Context())
	if queued == 0 {
		t.Fatal("translating a new Gateway queued nothing")
	}
}

var testOwnership = translate.Ownership{Controller: "example.com/gateway-controller", ClusterID: "test-cluster"}

// acceptedGateway is a confirmed Gateway with one valid http listener on port 80.
func acceptedGateway(namespace, name string) *gatewayv1.Gateway {
	accepted := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: "uid-gw", Generation: 1},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "consul", Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
		}},
		Status: gatewayv1.GatewayStatus{
			Conditions: []metav1.Condition{accepted},
			Listeners: []gatewayv1.ListenerStatus{{Name: "http", Conditions: []metav1.Condition{
				accepted,
				{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs", ObservedGeneration: 1},
				{Type: "Conflicted", Status: metav1.ConditionFalse, Reason: "NoConflicts", ObservedGeneration: 1},
			}}},
		},
	}
}

// webRouteEntry is the http-route entry of ours for HTTPRoute apps/web, unjudged.
func webRouteEntry() *consulapi.HTTPRouteConfigEntry {
	return &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "web.apps",
		Meta: testOwnership.Meta(translate.Owner{Kind: "HTTPRoute", Namespace: "apps", Name: "web", UID: "uid"})}
}

// syncerReading is a syncer that desires entry, against a Consul that answers every
// read with answer and where any write is a test failure: the entry needs none.
func syncerReading(t *testing.T, entry consulapi.ConfigEntry, answer func(http.ResponseWriter)) (*Syncer, translate.EntryKey) {
	t.Helper()
	return syncerAgainst(t, entry, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			t.Errorf("unexpected %s %s: the entry is already as desired", r.Method, r.URL.Path)
		}
		answer(w)
	})
}

// syncerAgainst is a syncer that desires entry, against a Consul served by consul.
func syncerAgainst(t *testing.T, entry consulapi.ConfigEntry, consul http.HandlerFunc) (*Syncer, translate.EntryKey) {
	t.Helper()
	server := httptest.NewServer(consul)
	t.Cleanup(server.Close)
	client, err := consulapi.NewClient(&consulapi.Config{Address: server.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSyncer(Config{Client: client, Ownership: testOwnership})
	key := translate.KeyOf(entry)
	s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{key: entry})
	return s, key
}

// Consul's verdict comes from the watch alone. The writer's read may be older than the
// watch's last answer (here: no status yet, where the watch already saw Accepted), and
// must not put the older verdict back: that left routes at Pending for good.
func TestWriterReadDoesNotReplaceTheWatchsVerdict(t *testing.T) {
	entry := webRouteEntry()
	stale, err := json.Marshal(entry) // as Consul stored it before judging it
	if err != nil {
		t.Fatal(err)
	}
	s, key := syncerReading(t, entry, func(w http.ResponseWriter) { _, _ = w.Write(stale) })

	judged := *entry
	judged.Status = consulapi.ConfigEntryStatus{Conditions: []consulapi.Condition{{Type: "Accepted", Status: consulapi.ConditionStatusTrue, Reason: "Accepted"}}}
	s.verdicts.observe(key, &judged, true, nil) // what the watch saw
	if err := s.syncEntry(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if v := s.Verdict("HTTPRoute", cache.ObjectName{Namespace: "apps", Name: "web"}); !v.Known || !v.Programmed {
		t.Errorf("after the writer read the older entry, the verdict is %+v; want Consul's Accepted from the watch", v)
	}
}

// A failed read or write is reported until Consul holds the desired entry, however
// that comes about. Here the read fails while Consul is away, and the watch then finds
// the entry as desired (the write before the outage had landed): the retry has nothing
// to write, and ConsulWriteFailed must still give way to Consul's verdict.
func TestWriteFailureClearsOnceConsulHoldsTheEntry(t *testing.T) {
	entry := webRouteEntry()
	s, key := syncerReading(t, entry, func(w http.ResponseWriter) {
		http.Error(w, "No cluster leader", http.StatusInternalServerError)
	})
	route := cache.ObjectName{Namespace: "apps", Name: "web"}

	if err := s.syncEntry(t.Context(), key); err == nil {
		t.Fatal("the read of an unreachable Consul succeeded")
	}
	if v := s.Verdict("HTTPRoute", route); v.Reason != ReasonWriteFailed {
		t.Fatalf("after the failed read the verdict is %+v; want %s", v, ReasonWriteFailed)
	}

	judged := *entry
	judged.ModifyIndex = 7
	judged.Status = consulapi.ConfigEntryStatus{Conditions: []consulapi.Condition{{Type: "Accepted", Status: consulapi.ConditionStatusFalse, Reason: "InvalidDiscoveryChain"}}}
	s.compareKind(t.Context(), consulapi.HTTPRoute, []consulapi.ConfigEntry{&judged})
	if err := s.syncEntry(t.Context(), key); err != nil {
		t.Fatalf("the retry had nothing to do and failed: %v", err)
	}
	if v := s.Verdict("HTTPRoute", route); v.Reason != "InvalidDiscoveryChain" {
		t.Errorf("once Consul holds the entry the verdict is %+v; want Consul's InvalidDiscoveryChain", v)
	}
}

// Consul's verdict is on an entry as it exists. An entry created again (its route lost
// its backend and got it back, or Consul lost it) has not been judged yet: the verdict
// on the entry that was there before must not carry over to it. test/chaos caught a
// route reported Accepted 13 ms after its entry was created, then Pending, then
// Accepted again.
func TestCreatedEntryStartsWithoutAVerdict(t *testing.T) {
	entry := webRouteEntry()
	var puts int
	s, key := syncerAgainst(t, entry, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			http.Error(w, "Config entry not found", http.StatusNotFound)
		case http.MethodPut:
			puts++
			if r.URL.Query().Get("cas") != "0" {
				t.Errorf("create without cas=0: %s", r.URL)
			}
			_, _ = w.Write([]byte("true"))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		}
	})
	route := cache.ObjectName{Namespace: "apps", Name: "web"}

	judged := *entry
	judged.Status = consulapi.ConfigEntryStatus{Conditions: []consulapi.Condition{{Type: "Accepted", Status: consulapi.ConditionStatusTrue, Reason: "Accepted"}}}
	s.verdicts.observe(key, &judged, true, nil) // the entry before it went
	if v := s.Verdict("HTTPRoute", route); !v.Programmed {
		t.Fatalf("the watch's Accepted was not recorded: %+v", v)
	}
	if err := s.syncEntry(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if puts != 1 {
		t.Fatalf("the absent entry was written %d times; want one create", puts)
	}
	if v := s.Verdict("HTTPRoute", route); v.Known {
		t.Errorf("right after its entry was created the route's verdict is %+v; want none until Consul judges it", v)
	}
}

// webRouteConfirmation confirms HTTPRoute apps/<name>, accepted on gw's http listener
// and backed by Service apps/web.
func webRouteConfirmation(name string, gw cache.ObjectName) contract.Confirmation {
	port := gatewayv1.PortNumber(8080)
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name), Generation: 1, ResourceVersion: "1"},
		Spec: gatewayv1.HTTPRouteSpec{Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{
			BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: &port}},
		}}}}},
	}
	return contract.Confirmation{Kind: "HTTPRoute", Key: cache.MetaObjectToName(route), Object: route, Route: &gwdecision.Route{
		Attachments: []gwdecision.Attachment{{Gateway: gw, Listeners: []gatewayv1.SectionName{"http"}}},
		Backends: []gwdecision.Backend{{Resolved: true, Referent: cache.ObjectName{Namespace: "apps", Name: "web"},
			Consul: "web", Port: 8080, ServiceUID: "uid-svc"}},
	}}
}

// A new leader confirms objects in no particular order. A route confirmed before the
// Gateway it is accepted on waits for it: translated alone, it would find none of its
// listeners written, lose its entry and be reported as not served (the chaos suite saw
// ConsulAccepted go False for 40 ms after a restart).
func TestRouteWaitsForItsGatewaysConfirmation(t *testing.T) {
	gw := acceptedGateway("infra", "gw")
	gwKey := cache.MetaObjectToName(gw)
	s := NewSyncer(Config{
		Ownership:   testOwnership,
		Secrets:     corelisters.NewSecretLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		OwnerExists: func(kind gatewayv1.Kind, key cache.ObjectName) bool { return kind == "Gateway" && key == gwKey },
	})
	route := webRouteConfirmation("web", gwKey)
	routeKey := route.Key
	entryKey := translate.EntryKey{Kind: consulapi.HTTPRoute, Name: "web.apps"}

	s.Publish(t.Context(), route)
	s.translate(t.Context())
	if _, ok := s.desiredEntry(entryKey); ok {
		t.Error("the route's entry is desired before its Gateway was confirmed")
	}
	if v := s.Verdict("HTTPRoute", routeKey); v.Known {
		t.Errorf("before its Gateway was confirmed the route has a verdict: %+v", v)
	}

	s.Publish(t.Context(), contract.Confirmation{Kind: "Gateway", Key: gwKey, Object: gw})
	s.translate(t.Context())
	if _, ok := s.desiredEntry(entryKey); !ok {
		t.Error("the route's entry is not desired once its Gateway was confirmed")
	}
	if v := s.Verdict("HTTPRoute", routeKey); v.Known && !v.Programmed {
		t.Errorf("once its Gateway was confirmed the route has a problem: %+v", v)
	}
}

// Consul judges a route against the gateway it names as it is when the route is
// written: the api-gateway entry of a translation is queued before its routes.
func TestTranslateQueuesGatewaysBeforeTheirRoutes(t *testing.T) {
	gw := acceptedGateway("infra", "gw")
	gwKey := cache.MetaObjectToName(gw)
	s := NewSyncer(Config{
		Ownership: testOwnership,
		Secrets:   corelisters.NewSecretLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	})
	var queued []string
	s.queue = checkingQueue{TypedRateLimitingInterface: s.queue, check: func(key translate.EntryKey) {
		queued = append(queued, key.Kind)
	}}
	s.Publish(t.Context(), contract.Confirmation{Kind: "Gateway", Key: gwKey, Object: gw})
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		s.Publish(t.Context(), webRouteConfirmation(name, gwKey))
	}
	s.translate(t.Context())
	want := []string{consulapi.APIGateway, consulapi.HTTPRoute, consulapi.HTTPRoute, consulapi.HTTPRoute, consulapi.HTTPRoute, consulapi.HTTPRoute, consulapi.HTTPRoute}
	if !slices.Equal(queued, want) {
		t.Errorf("queued kinds in the order %v, want %v", queued, want)
	}
}
