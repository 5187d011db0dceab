package consul

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// judgedRoute is an http-route entry of ours for apps/web with the conditions Consul
// 1.15 put on it, shaped as its HTTP API returns them: the Accepted condition's
// Resource is an empty reference, each Bound condition's the parent as written.
func judgedRoute(conditions ...consulapi.Condition) *consulapi.HTTPRouteConfigEntry {
	own := translate.Ownership{Controller: "example.com/c", ClusterID: "test"}
	return &consulapi.HTTPRouteConfigEntry{
		Kind: consulapi.HTTPRoute, Name: "web.apps",
		Meta:   own.Meta(translate.Owner{Kind: "HTTPRoute", Namespace: "apps", Name: "web", UID: "uid"}),
		Status: consulapi.ConfigEntryStatus{Conditions: conditions},
	}
}

func routeAccepted() consulapi.Condition {
	return consulapi.Condition{Type: "Accepted", Status: consulapi.ConditionStatusTrue, Reason: "Accepted", Message: "route is valid", Resource: &consulapi.ResourceReference{}}
}

func bound(gatewayEntry, section string, status consulapi.ConditionStatus, reason, message string) consulapi.Condition {
	return consulapi.Condition{Type: "Bound", Status: status, Reason: reason, Message: message,
		Resource: &consulapi.ResourceReference{Kind: consulapi.APIGateway, Name: gatewayEntry, SectionName: section}}
}

func TestBindingsFromConsulsBoundConditions(t *testing.T) {
	t.Parallel()
	web := cache.ObjectName{Namespace: "apps", Name: "web"}
	// Messages as Consul 1.15.4 wrote them (seen on a real server).
	tests := []struct {
		name       string
		naming     translate.Naming
		conditions []consulapi.Condition
		// want is the binding per "gateway namespace/name/listener" asked for.
		want map[string]contract.Binding
	}{
		{
			name:   "bound on one Gateway, refused on the other",
			naming: translate.Naming{},
			conditions: []consulapi.Condition{routeAccepted(),
				bound("edge.infra", "http", consulapi.ConditionStatusTrue, "Bound", "successfully bound route"),
				bound("other.infra", "http", consulapi.ConditionStatusFalse, "FailedToBind", "failed to bind route web.apps to gateway other.infra: listener http is not a http listener"),
			},
			want: map[string]contract.Binding{
				"infra/edge/http":  {State: contract.BindingBound, Reason: "Bound", Message: "Consul http-route web.apps: successfully bound route"},
				"infra/other/http": {State: contract.BindingRefused, Reason: "FailedToBind", Message: "Consul http-route web.apps: failed to bind route web.apps to gateway other.infra: listener http is not a http listener"},
				"infra/edge/https": {}, // a listener Consul said nothing about
				"infra/third/http": {}, // a Gateway Consul said nothing about
			},
		},
		{
			name:   "refusals that come before Consul could judge are pending",
			naming: translate.Naming{},
			conditions: []consulapi.Condition{routeAccepted(),
				bound("edge.infra", "http", consulapi.ConditionStatusFalse, "FailedToBind", "failed to bind route to gateway edge.infra: route has not been accepted"),
				bound("new.infra", "http", consulapi.ConditionStatusFalse, "GatewayNotFound", "gateway was not found"),
				bound("young.infra", "http", consulapi.ConditionStatusFalse, "FailedToBind", "failed to bind route to gateway young.infra: gateway has not been accepted"),
			},
			want: map[string]contract.Binding{
				"infra/edge/http":  {State: contract.BindingPending, Reason: "FailedToBind", Message: "Consul http-route web.apps: failed to bind route to gateway edge.infra: route has not been accepted"},
				"infra/new/http":   {State: contract.BindingPending, Reason: "GatewayNotFound", Message: "Consul http-route web.apps: gateway was not found"},
				"infra/young/http": {State: contract.BindingPending, Reason: "FailedToBind", Message: "Consul http-route web.apps: failed to bind route to gateway young.infra: gateway has not been accepted"},
			},
		},
		{
			name:   "a condition without a listener holds for every listener of its Gateway",
			naming: translate.Naming{Prefix: "k8s-"},
			conditions: []consulapi.Condition{routeAccepted(),
				bound("k8s-edge.infra", "", consulapi.ConditionStatusFalse, "FailedToBind", "route cannot bind because gateway has no listeners"),
				bound("k8s-edge.infra", "https", consulapi.ConditionStatusTrue, "Bound", "successfully bound route"),
				// Not a name this controller writes with its prefix: left out.
				bound("edge.infra", "http", consulapi.ConditionStatusTrue, "Bound", "successfully bound route"),
			},
			want: map[string]contract.Binding{
				"infra/edge/http":  {State: contract.BindingRefused, Reason: "FailedToBind", Message: "Consul http-route web.apps: route cannot bind because gateway has no listeners"},
				"infra/edge/https": {State: contract.BindingBound, Reason: "Bound", Message: "Consul http-route web.apps: successfully bound route"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVerdicts(tt.naming)
			entry := judgedRoute(tt.conditions...)
			v.observe(translate.KeyOf(entry), entry, true, nil)
			if got := v.get("HTTPRoute", web); !got.Known || !got.Programmed {
				t.Errorf("route verdict = %+v, want Consul's Accepted", got)
			}
			got := map[string]contract.Binding{}
			for k := range tt.want {
				ns, rest, _ := strings.Cut(k, "/")
				name, listener, _ := strings.Cut(rest, "/")
				got[k] = v.binding("HTTPRoute", web, cache.ObjectName{Namespace: ns, Name: name}, gatewayv1.SectionName(listener), gatewayv1.SectionName(listener))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("bindings (-want +got):\n%s", diff)
			}
		})
	}
}

// A change of a Bound condition alone asks for the route's status again; the same
// status listed in another order does not.
func TestBindingChangesAreReported(t *testing.T) {
	t.Parallel()
	v := newVerdicts(translate.Naming{})
	var changed []cache.ObjectName
	record := func(kind gatewayv1.Kind, key cache.ObjectName) { changed = append(changed, key) }
	edgeBound := bound("edge.infra", "http", consulapi.ConditionStatusTrue, "Bound", "successfully bound route")
	otherBound := bound("other.infra", "http", consulapi.ConditionStatusTrue, "Bound", "successfully bound route")
	otherRefused := bound("other.infra", "http", consulapi.ConditionStatusFalse, "FailedToBind", "failed to bind route web.apps to gateway other.infra: listener http is not a http listener")

	steps := []struct {
		name       string
		conditions []consulapi.Condition
		reported   bool
	}{
		{"first verdict", []consulapi.Condition{routeAccepted(), edgeBound, otherBound}, true},
		{"same status, other order", []consulapi.Condition{otherBound, routeAccepted(), edgeBound}, false},
		{"one parent refused", []consulapi.Condition{routeAccepted(), edgeBound, otherRefused}, true},
	}
	for _, step := range steps {
		changed = nil
		entry := judgedRoute(step.conditions...)
		v.observe(translate.KeyOf(entry), entry, true, record)
		if got := len(changed) > 0; got != step.reported {
			t.Errorf("%s: reported %v, want %v", step.name, changed, step.reported)
		}
	}
}

// A Gateway owns several entries. A failure is over when its own entry settles: the
// api-gateway entry settling leaves the inline-certificate's failure standing, and a
// failed entry nothing desires any more (its owner's spec dropped it) ends it too.
func TestWriteFailuresSettlePerEntry(t *testing.T) {
	t.Parallel()
	own := translate.Ownership{Controller: "example.com/c", ClusterID: "test"}
	meta := own.Meta(translate.Owner{Kind: "Gateway", Namespace: "infra", Name: "edge", UID: "uid"})
	gw := cache.ObjectName{Namespace: "infra", Name: "edge"}
	gatewayEntry := translate.EntryKey{Kind: consulapi.APIGateway, Name: "edge.infra"}
	cert := translate.EntryKey{Kind: consulapi.InlineCertificate, Name: "secret.tls.infra"}
	v := newVerdicts(translate.Naming{})
	var changed int
	record := func(gatewayv1.Kind, cache.ObjectName) { changed++ }

	v.writeFailed(cert, meta, errors.New("500 (No cluster leader)"), record)
	v.writeFailed(gatewayEntry, meta, errors.New("500 (No cluster leader)"), record)
	v.settled(gatewayEntry, record)
	got := v.get("Gateway", gw)
	if got.Reason != ReasonWriteFailed || !strings.Contains(got.Message, cert.Name) || strings.Contains(got.Message, gatewayEntry.Name) {
		t.Errorf("with the certificate still failing the verdict is %+v; want %s naming only %s", got, ReasonWriteFailed, cert.Name)
	}
	changed = 0
	v.settled(cert, record)
	if got := v.get("Gateway", gw); got.Known {
		t.Errorf("once every entry settled the verdict is %+v; want Consul's (none yet)", got)
	}
	if changed != 1 {
		t.Errorf("settling the last failure reported %d changes, want 1", changed)
	}
	changed = 0
	v.settled(cert, record)
	if changed != 0 {
		t.Errorf("settling an entry with no failure reported %d changes", changed)
	}
}

// A translation problem of one parent listener refuses that parent only: the route's
// own verdict stays Consul's, and its other parents keep their bindings. A problem of
// the whole route refuses it everywhere.
func TestParentProblemsRefuseOneParent(t *testing.T) {
	t.Parallel()
	v := newVerdicts(translate.Naming{})
	web := cache.ObjectName{Namespace: "apps", Name: "web"}
	edge := cache.ObjectName{Namespace: "infra", Name: "edge"}
	other := cache.ObjectName{Namespace: "infra", Name: "other"}
	var changed []cache.ObjectName
	record := func(kind gatewayv1.Kind, key cache.ObjectName) { changed = append(changed, key) }
	entry := judgedRoute(routeAccepted(), bound("edge.infra", "http", consulapi.ConditionStatusTrue, "Bound", "successfully bound route"))
	v.observe(translate.KeyOf(entry), entry, true, nil)

	const why = "listener infra/other/http: its hostname \"a.other.com\" matches none of the route's hostnames; the route is left out of it"
	v.setProblems([]translate.Problem{{Kind: "HTTPRoute", Object: web, Parent: translate.ProblemParent{Gateway: other, Listener: "http"}, Message: why}}, record)
	if len(changed) != 1 || changed[0] != web {
		t.Errorf("changes reported %v, want %v", changed, web)
	}
	if got := v.get("HTTPRoute", web); !got.Programmed {
		t.Errorf("route verdict %+v, want Consul's (programmed)", got)
	}
	if got := v.binding("HTTPRoute", web, edge, "http", "http"); got.State != contract.BindingBound {
		t.Errorf("served parent: %+v, want bound", got)
	}
	want := contract.Binding{State: contract.BindingRefused, Reason: ReasonTranslation, Message: why}
	if diff := cmp.Diff(want, v.binding("HTTPRoute", web, other, "http", "http")); diff != "" {
		t.Errorf("parent with the problem (-want +got):\n%s", diff)
	}
	if got := v.binding("HTTPRoute", web, other, "https", "https"); got.State != contract.BindingUnreported {
		t.Errorf("another listener of that Gateway: %+v, want unreported", got)
	}

	changed = nil
	v.setProblems([]translate.Problem{{Kind: "HTTPRoute", Object: web, Message: "rule 0: something"}}, record)
	if len(changed) != 1 {
		t.Errorf("changes reported %v, want %v", changed, web)
	}
	if got := v.get("HTTPRoute", web); got.Programmed || got.Reason != ReasonTranslation {
		t.Errorf("route verdict %+v, want %s", got, ReasonTranslation)
	}
	if got := v.binding("HTTPRoute", web, other, "http", "http"); got.State == contract.BindingRefused {
		t.Errorf("the parent problem is over, binding still %+v", got)
	}
}
