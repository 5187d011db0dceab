package translate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/directive"
)

// With a responder, the status pipeline accepts RequestRedirect (the controller turns
// the capability on with --responder-service), and the translation sends the rule to
// the responder with the redirect as its directive: the capability example is
// served, and the directive the responder reads back is the filter's.
func TestResponderExpressesRequestRedirect(t *testing.T) {
	caps := consullimits.Consul115
	caps.RequestRedirect = true
	example := decided(capabilityExamples()["RequestRedirect"].with, caps)
	if dropped := droppedRules(example); len(dropped) > 0 {
		t.Fatalf("consullimits refuses the example with a responder: rules %v", dropped)
	}
	opts := Options{Responder: Responder{Name: "responder"}}
	got := Translate(snapshotOf(
		confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, ""))), example,
	), Naming{}, testOwnership, opts)
	if len(got.Problems) > 0 {
		t.Fatalf("problems: %v", got.Problems)
	}
	route := httpRouteEntry(t, got)
	if len(route.Rules) != 1 || len(route.Rules[0].Services) != 1 {
		t.Fatalf("rules %+v, want one rule to the responder", route.Rules)
	}
	svc := route.Rules[0].Services[0]
	if svc.Name != "responder" {
		t.Fatalf("the rule goes to %s, want the responder", svc.Name)
	}
	want := directive.Directive{Redirect: &directive.Redirect{Hostname: "b.example.com"}}
	if diff := cmp.Diff(want, readDirective(t, svc)); diff != "" {
		t.Errorf("directive (-want +got):\n%s", diff)
	}
	// The responder is declared http, as the blackhole is.
	defaults, ok := got.Entries[EntryKey{Kind: consulapi.ServiceDefaults, Name: "responder"}].(*consulapi.ServiceConfigEntry)
	if !ok || defaults.Protocol != "http" {
		t.Errorf("service-defaults of the responder: %+v, want protocol http", got.Entries[EntryKey{Kind: consulapi.ServiceDefaults, Name: "responder"}])
	}
}

// Without a responder nothing changes: a rule without a backend goes to the
// blackhole, with no directive.
func TestNoResponderKeepsTheBlackhole(t *testing.T) {
	example := decided(capabilityExamples()["RequestRedirect"].with, consullimits.Consul115)
	got := Translate(snapshotOf(
		confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, ""))), example,
	), Naming{}, testOwnership, Options{})
	route := httpRouteEntry(t, got)
	svc := route.Rules[0].Services[0]
	if svc.Name != (Naming{}).BlackholeService() || len(svc.Filters.Headers) > 0 {
		t.Errorf("refused rule goes to %+v, want the blackhole without a directive", svc)
	}
}

func httpRouteEntry(t *testing.T, d Desired) *consulapi.HTTPRouteConfigEntry {
	t.Helper()
	for _, e := range d.Entries {
		if r, ok := e.(*consulapi.HTTPRouteConfigEntry); ok {
			return r
		}
	}
	t.Fatal("no http-route entry")
	return nil
}

// readDirective reads the directive a service carries as the responder reads it,
// once Envoy has unescaped it ("%%" is "%").
func readDirective(t *testing.T, svc consulapi.HTTPService) directive.Directive {
	t.Helper()
	if len(svc.Filters.Headers) != 1 {
		t.Fatalf("service %s has header filters %+v, want one", svc.Name, svc.Filters.Headers)
	}
	value, ok := svc.Filters.Headers[0].Set[directive.Header]
	if !ok {
		t.Fatalf("service %s does not set %s", svc.Name, directive.Header)
	}
	d, err := directive.Decode(strings.ReplaceAll(value, "%%", "%"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
