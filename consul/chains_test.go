package consul

import (
	"slices"
	"testing"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

func TestChainRefresherRefreshesOnlyABackendBoundAgain(t *testing.T) {
	// bind is route r (in incarnation n) binding service svc to gateway g.
	bind := func(g, r string, n uint64, svc string) routeBinding {
		return routeBinding{
			backend: boundBackend{
				gateway:  consulapi.ResourceReference{Kind: consulapi.APIGateway, Name: g},
				defaults: translate.EntryKey{Kind: consulapi.ServiceDefaults, Name: svc},
			},
			route:       translate.EntryKey{Kind: consulapi.HTTPRoute, Name: r},
			createIndex: n,
		}
	}
	set := func(bs ...routeBinding) map[routeBinding]bool {
		m := map[routeBinding]bool{}
		for _, b := range bs {
			m[b] = true
		}
		return m
	}
	steps := []struct {
		name  string
		kind  string
		bound map[routeBinding]bool
		fresh bool
		want  []string
	}{
		{"a start only records", consulapi.HTTPRoute, set(bind("a", "r1", 1, "web")), true, nil},
		{"a backend bound to a gateway for the first time", consulapi.HTTPRoute,
			set(bind("a", "r1", 1, "web"), bind("a", "r2", 2, "api")), false, nil},
		{"a second route to a backend that stays bound", consulapi.HTTPRoute,
			set(bind("a", "r1", 1, "web"), bind("a", "r2", 2, "api"), bind("a", "r3", 3, "web")), false, nil},
		{"one of two routes to web goes", consulapi.HTTPRoute,
			set(bind("a", "r1", 1, "web"), bind("a", "r2", 2, "api")), false, nil},
		{"web leaves gateway a", consulapi.HTTPRoute, set(bind("a", "r2", 2, "api")), false, nil},
		{"web bound to another gateway", consulapi.HTTPRoute,
			set(bind("a", "r2", 2, "api"), bind("b", "r4", 4, "web")), false, nil},
		{"tcp-routes are answers of their own", consulapi.TCPRoute, set(bind("a", "t1", 5, "db")), false, nil},
		{"web back on gateway a", consulapi.HTTPRoute,
			set(bind("a", "r2", 2, "api"), bind("a", "r1", 6, "web"), bind("b", "r4", 4, "web")), false, []string{"web"}},
		{"still bound: nothing more", consulapi.HTTPRoute,
			set(bind("a", "r2", 2, "api"), bind("a", "r1", 6, "web"), bind("b", "r4", 4, "web")), false, nil},
		{"api's route replaced by another between two answers", consulapi.HTTPRoute,
			set(bind("a", "r5", 7, "api"), bind("a", "r1", 6, "web"), bind("b", "r4", 4, "web")), false, []string{"api"}},
		{"api's route deleted and applied again between two answers", consulapi.HTTPRoute,
			set(bind("a", "r5", 8, "api"), bind("a", "r1", 6, "web"), bind("b", "r4", 4, "web")), false, []string{"api"}},
		{"api leaves", consulapi.HTTPRoute, set(bind("a", "r1", 6, "web"), bind("b", "r4", 4, "web")), false, nil},
		{"a reconnect only records", consulapi.HTTPRoute, set(bind("a", "r1", 6, "web")), true, nil},
		{"api back after the reconnect", consulapi.HTTPRoute,
			set(bind("a", "r1", 6, "web"), bind("a", "r5", 9, "api")), false, []string{"api"}},
	}
	r := newChainRefresher()
	for _, step := range steps {
		var got []string
		for _, key := range r.observe(step.kind, step.bound, step.fresh) {
			got = append(got, key.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: refreshed %v, want %v", step.name, got, step.want)
		}
	}
}
