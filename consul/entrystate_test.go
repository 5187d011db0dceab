package consul

import (
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// The service-defaults of a Service that exists outlive their last route by the grace;
// those of a Service that is gone (or was re-created) go at once, and an entry desired
// again starts a new grace the next time.
func TestServiceDefaultsGrace(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(now)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web"}}
	if err := indexer.Add(web); err != nil {
		t.Fatal(err)
	}
	own := translate.Ownership{Controller: "c", ClusterID: "k"}
	s := NewSyncer(Config{Ownership: own, Clock: clock, Services: corelisters.NewServiceLister(indexer), ServiceDefaultsGrace: 30 * time.Second})
	key := translate.EntryKey{Kind: consulapi.ServiceDefaults, Name: "web"}
	meta := func(ns, name, uid string) map[string]string {
		return own.Meta(translate.Owner{Kind: "Service", Namespace: ns, Name: name, UID: uid})
	}

	if got := s.serviceDefaultsGrace(key, meta("shop", "web", "uid-web")); got != 30*time.Second {
		t.Fatalf("first found undesired: keep %s, want 30s", got)
	}
	clock.SetTime(now.Add(20 * time.Second))
	if got := s.serviceDefaultsGrace(key, meta("shop", "web", "uid-web")); got != 10*time.Second {
		t.Fatalf("20s later: keep %s, want 10s", got)
	}
	clock.SetTime(now.Add(31 * time.Second))
	if got := s.serviceDefaultsGrace(key, meta("shop", "web", "uid-web")); got != 0 {
		t.Fatalf("after the grace: keep %s, want 0", got)
	}
	s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{key: &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "web"}})
	s.ledger.stateOf(key) // desired again
	if got := s.serviceDefaultsGrace(key, meta("shop", "web", "uid-web")); got != 30*time.Second {
		t.Fatalf("desired again, then undesired: keep %s, want a new 30s", got)
	}
	for name, m := range map[string]map[string]string{
		"Service gone":        meta("shop", "api", "uid-api"),
		"Service re-created":  meta("shop", "web", "uid-old"),
		"not a Service owner": own.Meta(translate.Owner{Kind: "HTTPRoute", Namespace: "shop", Name: "web", UID: "uid-web"}),
	} {
		if got := s.serviceDefaultsGrace(key, m); got != 0 {
			t.Errorf("%s: keep %s, want 0", name, got)
		}
	}
	if got := s.serviceDefaultsGrace(translate.EntryKey{Kind: consulapi.HTTPRoute, Name: "web"}, meta("shop", "web", "uid-web")); got != 0 {
		t.Errorf("http-route: keep %s, want 0", got)
	}
}
