package translate

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestIntersectHostnames(t *testing.T) {
	tests := []struct {
		listener string
		route    []gatewayv1.Hostname
		want     []string
	}{
		{"", []gatewayv1.Hostname{"a.example.com", "*.example.com"}, []string{"a.example.com", "*.example.com"}},
		{"a.example.com", []gatewayv1.Hostname{"a.example.com", "b.example.com"}, []string{"a.example.com"}},
		{"*.example.com", []gatewayv1.Hostname{"a.example.com", "a.b.example.com", "example.com", "badexample.com"}, []string{"a.example.com", "a.b.example.com"}},
		{"*.example.com", []gatewayv1.Hostname{"*.example.com", "*.b.example.com", "*.com"}, []string{"*.example.com", "*.b.example.com"}},
		{"a.example.com", []gatewayv1.Hostname{"*.example.com", "*.com"}, []string{"a.example.com"}},
		{"example.com", []gatewayv1.Hostname{"*.example.com"}, nil},
	}
	for _, tt := range tests {
		if diff := gocmp.Diff(tt.want, intersectHostnames(tt.listener, tt.route)); diff != "" {
			t.Errorf("intersectHostnames(%q, %v) (-want +got):\n%s", tt.listener, tt.route, diff)
		}
	}
}

// TestConsulServedHostnames pins the copy of Consul 1.15's FilteredHostnames, including
// the looseness of its suffix filter that routeHostnames guards against.
func TestMinimalHostnames(t *testing.T) {
	got := minimalHostnames([]string{"a.example.com", "*.example.com", "example.com", "*.b.example.com", "x.b.example.com", "other.com"})
	want := []string{"*.example.com", "example.com", "other.com"}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

func TestConsulServedHostnames(t *testing.T) {
	tests := []struct {
		entry    []string
		listener string
		want     []string
	}{
		{nil, "", []string{"*"}},
		{nil, "*.example.com", []string{"*.example.com"}},
		{nil, "a.example.com", []string{"a.example.com"}},
		{[]string{"a.example.com", "b.other.com"}, "", []string{"a.example.com", "b.other.com"}},
		{[]string{"a.example.com", "example.com", "badexample.com", "b.other.com"}, "*.example.com", []string{"a.example.com", "example.com", "badexample.com"}},
		{[]string{"a.example.com", "b.example.com"}, "a.example.com", []string{"a.example.com"}},
		{[]string{"b.example.com"}, "a.example.com", nil},
	}
	for _, tt := range tests {
		if diff := gocmp.Diff(tt.want, consulServedHostnames(tt.entry, tt.listener)); diff != "" {
			t.Errorf("consulServedHostnames(%v, %q) (-want +got):\n%s", tt.entry, tt.listener, diff)
		}
	}
}

func TestRouteHostnames(t *testing.T) {
	parent := func(listener, hostname string) parentListener {
		return parentListener{
			gateway:  cache.ObjectName{Namespace: "infra", Name: "gw"},
			ref:      consulapi.ResourceReference{Kind: consulapi.APIGateway, Name: "gw.infra", SectionName: listener},
			hostname: hostname,
			members:  []memberListener{{name: gatewayv1.SectionName(listener), hostname: hostname}},
		}
	}
	wild, foo, anyHost, shop, bad := parent("wild", "*.example.com"), parent("foo", "foo.example.com"), parent("any", ""), parent("shop", "shop.other.com"), parent("bad", "x.badexample.com")
	tests := []struct {
		name      string
		route     []gatewayv1.Hostname
		parents   []parentListener
		wantHosts []string
		wantKept  []string
	}{
		{"no route hostnames", nil, []parentListener{wild, anyHost}, nil, []string{"wild", "any"}},
		{"concrete pass through", []gatewayv1.Hostname{"a.example.com", "b.example.com"}, []parentListener{wild}, []string{"a.example.com", "b.example.com"}, []string{"wild"}},
		{"concrete on any", []gatewayv1.Hostname{"a.example.com"}, []parentListener{anyHost, wild}, []string{"a.example.com"}, []string{"any", "wild"}},
		{"non-intersecting left out", []gatewayv1.Hostname{"example.com", "a.example.com"}, []parentListener{wild}, []string{"a.example.com"}, []string{"wild"}},
		{"wildcard equals listener", []gatewayv1.Hostname{"*.example.com"}, []parentListener{wild}, nil, []string{"wild"}},
		{"wildcard narrowed by listener", []gatewayv1.Hostname{"*.example.com"}, []parentListener{foo}, []string{"foo.example.com"}, []string{"foo"}},
		{"wildcard on two listeners", []gatewayv1.Hostname{"*.example.com"}, []parentListener{wild, foo}, nil, []string{"wild", "foo"}},
		// Served in the catch-all virtual host, narrowed by a header match.
		{"wildcard on any", []gatewayv1.Hostname{"*.example.com"}, []parentListener{anyHost}, nil, []string{"any"}},
		{"wildcard and concrete", []gatewayv1.Hostname{"*.example.com", "shop.other.com"}, []parentListener{wild, shop}, nil, []string{"wild", "shop"}},
		{"wildcard covers concrete", []gatewayv1.Hostname{"*.example.com", "a.example.com"}, []parentListener{wild}, nil, []string{"wild"}},
		{"wildcard covers concrete, on any", []gatewayv1.Hostname{"*.example.com", "a.example.com"}, []parentListener{anyHost}, nil, []string{"any"}},
		{"listener plan cannot serve a concrete listener", []gatewayv1.Hostname{"*.example.com", "a.other.com"}, []parentListener{wild, foo, anyHost}, nil, []string{"wild", "foo"}},
		{"narrower wildcard", []gatewayv1.Hostname{"*.b.example.com"}, []parentListener{wild}, nil, nil},
		// Consul's suffix filter would serve x.badexample.com on *.example.com too:
		// one of the two listeners has to go, the first one found.
		{"suffix overlap", []gatewayv1.Hostname{"a.example.com", "x.badexample.com"}, []parentListener{wild, bad}, []string{"x.badexample.com"}, []string{"bad"}},
		{"listener matches nothing", []gatewayv1.Hostname{"a.other.com"}, []parentListener{wild, anyHost}, []string{"a.other.com"}, []string{"any"}},
	}
	for _, tt := range tests {
		hosts, authority, kept, dropped := routeHostnames(tt.route, tt.parents)
		var keptNames []string
		for _, p := range kept {
			keptNames = append(keptNames, p.ref.SectionName)
		}
		if diff := gocmp.Diff(tt.wantHosts, hosts); diff != "" {
			t.Errorf("%s: hostnames (-want +got):\n%s", tt.name, diff)
		}
		if diff := gocmp.Diff(tt.wantKept, keptNames); diff != "" {
			t.Errorf("%s: parents (-want +got):\n%s", tt.name, diff)
		}
		if len(dropped) != len(tt.parents)-len(kept) {
			t.Errorf("%s: %d parents dropped, %d problems: %v", tt.name, len(tt.parents)-len(kept), len(dropped), dropped)
		}
		// Whatever is kept, Consul serves exactly what Gateway API does.
		for _, p := range kept {
			got := consulServedHostnames(hosts, p.hostname)
			if authority != nil {
				got = authority
			}
			if want := minimalHostnames(intersectHostnames(p.hostname, tt.route)); len(tt.route) > 0 && !sameSet(want, got) {
				t.Errorf("%s: listener %s: Consul serves %v, Gateway API %v", tt.name, p.ref.SectionName, got, want)
			}
		}
	}
}

// TestRouteHostnamesMerged: Gateway listeners sharing a port are one Consul listener,
// and each one's hostname reaches Consul through the routes attached to it.
func TestRouteHostnamesMerged(t *testing.T) {
	// port is a Consul listener with hostname serving the listeners of hosts, of
	// which the route attaches to members.
	port := func(hostname string, hosts []string, members ...memberListener) parentListener {
		for i := range members {
			members[i].portHosts = hosts
		}
		return parentListener{
			gateway:  cache.ObjectName{Namespace: "infra", Name: "gw"},
			ref:      consulapi.ResourceReference{Kind: consulapi.APIGateway, Name: "gw.infra", SectionName: string(members[0].name)},
			hostname: hostname,
			members:  members,
		}
	}
	wildPort := []string{"bar.com", "foo.bar.com", "*.bar.com"}
	concretePort := []string{"bar.com", "other.com"}
	bar, foo, wild := memberListener{name: "bar", hostname: "bar.com"}, memberListener{name: "foo", hostname: "foo.bar.com"}, memberListener{name: "wild", hostname: "*.bar.com"}
	other := memberListener{name: "other", hostname: "other.com"}
	tests := []struct {
		name        string
		route       []gatewayv1.Hostname
		parents     []parentListener
		wantHosts   []string
		wantKept    []string // Gateway listeners
		wantDropped []string
	}{
		{"listener hostname pushed into the route", nil, []parentListener{port("*.bar.com", wildPort, bar)}, []string{"bar.com"}, []string{"bar"}, nil},
		{"two concrete listeners of one port", nil, []parentListener{port("", concretePort, bar, other)}, []string{"bar.com", "other.com"}, []string{"bar", "other"}, nil},
		{"the wildcard listener is the Consul listener's hostname", nil, []parentListener{port("*.bar.com", wildPort, wild)}, nil, []string{"wild"}, nil},
		{"route hostnames narrowed per listener", []gatewayv1.Hostname{"x.bar.com", "*.bar.com", "bar.com"}, []parentListener{port("*.bar.com", wildPort, foo, bar)}, []string{"foo.bar.com", "bar.com"}, []string{"foo", "bar"}, nil},
		// foo.bar.com's requests go to the listener of that hostname: the route of
		// the wildcard listener must not join its virtual host.
		{"a hostname of a more specific listener", []gatewayv1.Hostname{"foo.bar.com", "x.bar.com"}, []parentListener{port("*.bar.com", wildPort, wild)}, []string{"x.bar.com"}, []string{"wild"}, nil},
		// One entry has one list of hostnames: the wildcard needs none, the concrete
		// listener needs its own.
		{"a wildcard and a concrete listener of one port", nil, []parentListener{port("*.bar.com", wildPort, bar, wild)}, []string{"bar.com"}, []string{"bar"}, []string{"wild"}},
		{"no intersection on one listener", []gatewayv1.Hostname{"other.com"}, []parentListener{port("", concretePort, bar, other)}, []string{"other.com"}, []string{"other"}, []string{"bar"}},
	}
	for _, tt := range tests {
		hosts, _, kept, dropped := routeHostnames(tt.route, tt.parents)
		var keptNames, droppedNames []string
		for _, p := range kept {
			for _, m := range p.members {
				keptNames = append(keptNames, string(m.name))
			}
		}
		for _, d := range dropped {
			droppedNames = append(droppedNames, string(d.parent.Listener))
		}
		if diff := gocmp.Diff(tt.wantHosts, hosts); diff != "" {
			t.Errorf("%s: hostnames (-want +got):\n%s", tt.name, diff)
		}
		if diff := gocmp.Diff(tt.wantKept, keptNames); diff != "" {
			t.Errorf("%s: kept listeners (-want +got):\n%s", tt.name, diff)
		}
		if diff := gocmp.Diff(tt.wantDropped, droppedNames); diff != "" {
			t.Errorf("%s: dropped listeners (-want +got):\n%s", tt.name, diff)
		}
	}
}
