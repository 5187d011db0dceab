package intentions

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
)

// A route that sends rules to the responder (with a directive header, as the
// translation writes it) makes the responder a destination its gateways must reach,
// like any backend: the keeper allows them on the responder's service-intentions
// entry, and nothing else is needed for gateways to reach it.
func TestResponderIsADestinationOfItsRoutesGateways(t *testing.T) {
	entry := &consulapi.HTTPRouteConfigEntry{
		Kind:    consulapi.HTTPRoute,
		Name:    "apps-redirects",
		Parents: []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "gw", SectionName: "http"}},
		Rules: []consulapi.HTTPRouteRule{
			{Services: []consulapi.HTTPService{{Name: "web", Weight: 3}, {
				Name: "responder", Weight: 1,
				Filters: consulapi.HTTPFilters{Headers: []consulapi.HTTPHeaderFilter{{Set: map[string]string{"X-Consul-Gateway-Controller-Directive": "{}"}}}},
			}}},
		},
	}
	route, ok := RouteOf(entry)
	if !ok {
		t.Fatal("RouteOf refused an http-route")
	}
	gw := NewService("gw", "", "")
	want := Needs{
		NewService("web", "", ""):       {gw: true},
		NewService("responder", "", ""): {gw: true},
	}
	if diff := cmp.Diff(want, NeedsOf([]Route{route}, nil)); diff != "" {
		t.Errorf("needs (-want +got):\n%s", diff)
	}
}
