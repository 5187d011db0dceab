package intentions

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

var (
	marker = Marker(translate.Ownership{Controller: "example.com/gateway", ClusterID: "c1"})
	edge   = NewService("demo-edge", "", "")
	other  = NewService("demo-other", "", "")
	echo   = NewService("echo", "", "")
)

func TestRouteOf(t *testing.T) {
	route := &consulapi.HTTPRouteConfigEntry{
		Kind: consulapi.HTTPRoute, Name: "demo-web",
		Parents: []consulapi.ResourceReference{
			{Kind: consulapi.APIGateway, Name: "demo-edge", SectionName: "http"},
			{Kind: consulapi.APIGateway, Name: "demo-edge", SectionName: "https"},
			{Kind: consulapi.APIGateway, Name: "demo-other", Namespace: "default"},
		},
		Rules: []consulapi.HTTPRouteRule{
			{Services: []consulapi.HTTPService{{Name: "echo"}, {Name: "consul_gateway_controller_blackhole"}}},
			{Services: []consulapi.HTTPService{{Name: "echo", Partition: "default"}}},
		},
	}
	got, ok := RouteOf(route)
	want := Route{
		Gateways: []Service{edge, other},
		Services: []Service{NewService("consul_gateway_controller_blackhole", "", ""), echo},
	}
	if !ok {
		t.Fatal("an http-route was not read")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RouteOf (-want +got):\n%s", diff)
	}
	tcp, ok := RouteOf(&consulapi.TCPRouteConfigEntry{
		Kind: consulapi.TCPRoute, Parents: []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "demo-edge"}},
		Services: []consulapi.TCPService{{Name: "db"}},
	})
	if !ok || !cmp.Equal(tcp, Route{Gateways: []Service{edge}, Services: []Service{NewService("db", "", "")}}) {
		t.Errorf("RouteOf(tcp-route) = %+v, %v", tcp, ok)
	}
	if _, ok := RouteOf(&consulapi.APIGatewayConfigEntry{Kind: consulapi.APIGateway}); ok {
		t.Error("an api-gateway was read as a route")
	}
}

func TestNeedsOf(t *testing.T) {
	routes := []Route{
		{Gateways: []Service{edge}, Services: []Service{echo}},
		{Gateways: []Service{other}, Services: []Service{NewService("split", "", "")}},
	}
	targets := map[Service][]Service{NewService("split", "", ""): {NewService("v1", "", ""), NewService("v2", "", "")}}
	got := NeedsOf(routes, targets)
	want := Needs{
		echo:                     {edge: true},
		NewService("v1", "", ""): {other: true},
		NewService("v2", "", ""): {other: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NeedsOf (-want +got):\n%s", diff)
	}
	changed := changedDestinations(got, NeedsOf(routes[:1], nil))
	if diff := cmp.Diff([]Service{NewService("v1", "", ""), NewService("v2", "", "")}, changed); diff != "" {
		t.Errorf("Changed after the split's route went (-want +got):\n%s", diff)
	}
}

func TestMarkerFitsConsul(t *testing.T) {
	long := Marker(translate.Ownership{Controller: strings.Repeat("c", 512), ClusterID: strings.Repeat("k", 512)})
	if len(long) > descriptionMaxLength {
		t.Errorf("a marker of %d characters exceeds Consul's %d", len(long), descriptionMaxLength)
	}
	if long == Marker(translate.Ownership{Controller: strings.Repeat("c", 511), ClusterID: strings.Repeat("k", 512)}) {
		t.Error("two long ownerships share a marker")
	}
}

func allow(name, description string) *consulapi.SourceIntention {
	return &consulapi.SourceIntention{Name: name, Action: consulapi.IntentionActionAllow, Type: consulapi.IntentionSourceConsul, Description: description}
}

func entry(sources ...*consulapi.SourceIntention) *consulapi.ServiceIntentionsConfigEntry {
	return &consulapi.ServiceIntentionsConfigEntry{
		Kind: consulapi.ServiceIntentions, Name: "echo", Sources: sources,
		Meta: map[string]string{"owner": "theirs"}, ModifyIndex: 7,
	}
}

func TestPlanEntry(t *testing.T) {
	meta := map[string]string{"gateway-controller": "example.com/gateway"}
	foreign := &consulapi.SourceIntention{Name: "web", Action: consulapi.IntentionActionDeny, Type: consulapi.IntentionSourceConsul, Description: "team web"}
	l7 := &consulapi.SourceIntention{Name: "api", Type: consulapi.IntentionSourceConsul, Permissions: []*consulapi.IntentionPermission{{
		Action: consulapi.IntentionActionAllow, HTTP: &consulapi.IntentionHTTPPermission{PathPrefix: "/v1"},
	}}}
	denied := allow("demo-edge", marker)
	denied.Action = consulapi.IntentionActionDeny
	tests := []struct {
		name    string
		current *consulapi.ServiceIntentionsConfigEntry
		want    map[Service]bool
		plan    Plan
	}{{
		name: "no entry: one is created with our meta",
		want: map[Service]bool{edge: true},
		plan: Plan{Entry: &consulapi.ServiceIntentionsConfigEntry{
			Kind: consulapi.ServiceIntentions, Name: "echo", Sources: []*consulapi.SourceIntention{allow("demo-edge", marker)}, Meta: meta,
		}},
	}, {
		name: "no entry and nothing wanted: nothing",
	}, {
		name:    "others' sources keep their place and content, ours is appended; the entry's meta stays",
		current: entry(foreign, l7),
		want:    map[Service]bool{edge: true},
		plan: Plan{Entry: &consulapi.ServiceIntentionsConfigEntry{
			Kind: consulapi.ServiceIntentions, Name: "echo", Meta: map[string]string{"owner": "theirs"},
			Sources: []*consulapi.SourceIntention{foreign, l7, allow("demo-edge", marker)},
		}},
	}, {
		name:    "held as wanted: nothing",
		current: entry(foreign, allow("demo-edge", marker)),
		want:    map[Service]bool{edge: true},
	}, {
		name:    "ours turned to deny by hand: put back in place",
		current: entry(denied, foreign),
		want:    map[Service]bool{edge: true},
		plan: Plan{Entry: &consulapi.ServiceIntentionsConfigEntry{
			Kind: consulapi.ServiceIntentions, Name: "echo", Meta: map[string]string{"owner": "theirs"},
			Sources: []*consulapi.SourceIntention{allow("demo-edge", marker), foreign},
		}},
	}, {
		name:    "ours no longer wanted, others remain: removed",
		current: entry(allow("demo-edge", marker), foreign),
		plan: Plan{Entry: &consulapi.ServiceIntentionsConfigEntry{
			Kind: consulapi.ServiceIntentions, Name: "echo", Meta: map[string]string{"owner": "theirs"},
			Sources: []*consulapi.SourceIntention{foreign},
		}},
	}, {
		name:    "ours no longer wanted, none remain: the entry is deleted",
		current: entry(allow("demo-edge", marker), allow("demo-other", marker)),
		plan:    Plan{Delete: true},
	}, {
		name:    "a source of another writer names the gateway: left as it is, nothing added",
		current: entry(&consulapi.SourceIntention{Name: "demo-edge", Action: consulapi.IntentionActionDeny, Description: "blocked by security"}),
		want:    map[Service]bool{edge: true},
		plan:    Plan{Foreign: []Service{edge}},
	}, {
		name:    "another cluster's source for a gateway of the same name is not ours",
		current: entry(allow("demo-edge", Marker(translate.Ownership{Controller: "example.com/gateway", ClusterID: "c2"}))),
		plan:    Plan{},
	}, {
		name:    "a peer's source of the gateway's name is not the gateway",
		current: entry(&consulapi.SourceIntention{Name: "demo-edge", Peer: "east", Action: consulapi.IntentionActionDeny}),
		want:    map[Service]bool{edge: true},
		plan: Plan{Entry: &consulapi.ServiceIntentionsConfigEntry{
			Kind: consulapi.ServiceIntentions, Name: "echo", Meta: map[string]string{"owner": "theirs"},
			Sources: []*consulapi.SourceIntention{{Name: "demo-edge", Peer: "east", Action: consulapi.IntentionActionDeny}, allow("demo-edge", marker)},
		}},
	}, {
		name: "an entry consul-k8s's ServiceIntentions manage is left to them",
		current: &consulapi.ServiceIntentionsConfigEntry{Kind: consulapi.ServiceIntentions, Name: "echo",
			Meta: map[string]string{"external-source": "kubernetes"}, Sources: []*consulapi.SourceIntention{foreign}},
		want: map[Service]bool{edge: true},
		plan: Plan{ManagedElsewhere: true},
	}, {
		name:    "gateways are added in order",
		current: entry(foreign),
		want:    map[Service]bool{other: true, edge: true},
		plan: Plan{Entry: &consulapi.ServiceIntentionsConfigEntry{
			Kind: consulapi.ServiceIntentions, Name: "echo", Meta: map[string]string{"owner": "theirs"},
			Sources: []*consulapi.SourceIntention{foreign, allow("demo-edge", marker), allow("demo-other", marker)},
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanEntry(tt.current, echo, tt.want, marker, meta)
			if diff := cmp.Diff(tt.plan, got); diff != "" {
				t.Errorf("PlanEntry (-want +got):\n%s", diff)
			}
		})
	}
}
