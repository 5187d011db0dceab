package consul

import (
	"slices"
	"testing"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

func TestChainRefresherRefreshesOnlyABackendBoundAgain(t *testing.T) {
	gw := func(name string) consulapi.ResourceReference {
		return consulapi.ResourceReference{Kind: consulapi.APIGateway, Name: name}
	}
	defaults := func(name string) translate.EntryKey {
		return translate.EntryKey{Kind: consulapi.ServiceDefaults, Name: name}
	}
	pair := func(g, svc string) boundBackend { return boundBackend{gateway: gw(g), defaults: defaults(svc)} }
	set := func(pairs ...boundBackend) map[boundBackend]bool {
		m := map[boundBackend]bool{}
		for _, p := range pairs {
			m[p] = true
		}
		return m
	}
	steps := []struct {
		name  string
		kind  string
		bound map[boundBackend]bool
		fresh bool
		want  []string
	}{
		{"a start only records", consulapi.HTTPRoute, set(pair("a", "web")), true, nil},
		{"a backend bound for the first time", consulapi.HTTPRoute, set(pair("a", "web"), pair("a", "api")), false, nil},
		{"web leaves gateway a", consulapi.HTTPRoute, set(pair("a", "api")), false, nil},
		{"web bound to another gateway", consulapi.HTTPRoute, set(pair("a", "api"), pair("b", "web")), false, nil},
		{"tcp-routes are their own answers", consulapi.TCPRoute, set(pair("a", "db")), false, nil},
		{"web back on gateway a", consulapi.HTTPRoute, set(pair("a", "api"), pair("a", "web"), pair("b", "web")), false, []string{"web"}},
		{"still bound: nothing more", consulapi.HTTPRoute, set(pair("a", "api"), pair("a", "web"), pair("b", "web")), false, nil},
		{"api leaves", consulapi.HTTPRoute, set(pair("a", "web"), pair("b", "web")), false, nil},
		{"a reconnect forgets nothing it must refresh later", consulapi.HTTPRoute, set(pair("a", "web")), true, nil},
		{"api back after the reconnect", consulapi.HTTPRoute, set(pair("a", "web"), pair("a", "api")), false, []string{"api"}},
	}
	r := newChainRefresher()
	for _, step := range steps {
		var got []string
		for _, key := range r.observe(step.kind, step.bound, step.fresh) {
			got = append(got, key.Name)
			if !r.take(key) {
				t.Errorf("%s: %s returned but not pending", step.name, key.Name)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: refreshed %v, want %v", step.name, got, step.want)
		}
	}
}
