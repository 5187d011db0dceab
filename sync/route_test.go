package sync

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

type parentSummary struct {
	Gateway    string
	Section    string
	Controller string
	Conditions []summary
}

func summarizeParents(ps []gatewayv1.RouteParentStatus) []parentSummary {
	out := make([]parentSummary, len(ps))
	for i, p := range ps {
		section := ""
		if p.ParentRef.SectionName != nil {
			section = string(*p.ParentRef.SectionName)
		}
		out[i] = parentSummary{string(p.ParentRef.Name), section, string(p.ControllerName), summarize(p.Conditions)}
	}
	return out
}

// consulPending is the condition of an accepted parent before Consul answered.
var consulPending = summary{ConsulAcceptedCondition, "False", "Pending"}

// routedTrue is the condition of a parent where Consul routes as the spec says.
var routedTrue = summary{RoutedAsSpecifiedCondition, "True", ReasonRoutedAsSpecified}

// accepted are the conditions of an HTTPRoute or TCPRoute parent that accepts and
// serves it, before Consul answered.
func accepted(reason string, resolved ...string) []summary {
	s := []summary{{"Accepted", "True", reason}}
	if len(resolved) == 0 {
		return append(s, summary{"ResolvedRefs", "True", "ResolvedRefs"}, consulPending, routedTrue)
	}
	return append(s, summary{"ResolvedRefs", "False", resolved[0]}, consulPending, routedTrue)
}

func rejected(reason string) []summary {
	return []summary{{"Accepted", "False", reason}, {"ResolvedRefs", "True", "ResolvedRefs"}}
}

func TestHTTPRouteParents(t *testing.T) {
	t.Parallel()
	otherGateway := gateway("infra", "foreign", httpListener("http", 80, ""))
	otherGateway.Spec.GatewayClassName = "other"
	base := []runtime.Object{
		ourClass(), otherClass(), otherGateway,
		namespace("apps", map[string]string{"team": "a"}), namespace("infra", nil),
		service("apps", "echo", 8080), service("infra", "echo", 8080),
		gateway("infra", "gw",
			httpListener("same", 80, ""),
			allowAll(httpListener("all", 81, "*.example.com")),
			allowSelector(httpListener("team-a", 82, ""), map[string]string{"team": "a"}),
			allowSelector(httpListener("team-b", 83, ""), map[string]string{"team": "b"}),
			allowAll(tcpListener("tcp", 84)),
			allowAll(gatewayv1.Listener{Name: "udp", Port: 85, Protocol: gatewayv1.UDPProtocolType}),
		),
	}
	withRedirect := httpRoute("apps", "r", nil, parentRef("infra", "gw", "all"))
	withRedirect.Spec.Rules = append(withRedirect.Spec.Rules, gatewayv1.HTTPRouteRule{
		Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{}}},
	})
	onlyRedirect := httpRoute("apps", "r", nil, parentRef("infra", "gw", "all"))
	onlyRedirect.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{}}}
	missingBackend := httpRoute("apps", "r", nil, parentRef("infra", "gw", "all"))
	missingBackend.Spec.Rules[0].BackendRefs[0].Name = "nope"
	crossBackend := httpRoute("apps", "r", nil, parentRef("infra", "gw", "all"))
	crossBackend.Spec.Rules[0].BackendRefs[0].Namespace = ptrTo(gatewayv1.Namespace("infra"))
	portRef := parentRef("infra", "gw", "")
	portRef.Port = ptrTo(gatewayv1.PortNumber(9999))

	theirs := gatewayv1.RouteParentStatus{
		ParentRef:      parentRef("infra", "foreign", ""),
		ControllerName: "other.example.com/controller",
		Conditions:     []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}},
	}
	staleOurs := gatewayv1.RouteParentStatus{
		ParentRef:      parentRef("infra", "gone", ""),
		ControllerName: testController,
		Conditions:     []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}},
	}

	tests := []struct {
		name     string
		route    *gatewayv1.HTTPRoute
		existing []gatewayv1.RouteParentStatus
		want     []parentSummary
	}{
		{"same namespace listener refuses another namespace", httpRoute("apps", "r", nil, parentRef("infra", "gw", "same")),
			nil, []parentSummary{{"gw", "same", string(testController), rejected("NotAllowedByListeners")}}},
		{"From All with intersecting hostname", httpRoute("apps", "r", []string{"a.example.com"}, parentRef("infra", "gw", "all")),
			nil, []parentSummary{{"gw", "all", string(testController), accepted("Accepted")}}},
		{"no intersecting hostname", httpRoute("apps", "r", []string{"a.example.org"}, parentRef("infra", "gw", "all")),
			nil, []parentSummary{{"gw", "all", string(testController), rejected("NoMatchingListenerHostname")}}},
		{"selector matches the namespace's labels", httpRoute("apps", "r", nil, parentRef("infra", "gw", "team-a")),
			nil, []parentSummary{{"gw", "team-a", string(testController), accepted("Accepted")}}},
		{"selector does not match", httpRoute("apps", "r", nil, parentRef("infra", "gw", "team-b")),
			nil, []parentSummary{{"gw", "team-b", string(testController), rejected("NotAllowedByListeners")}}},
		{"TCP listener does not serve HTTPRoutes", httpRoute("apps", "r", nil, parentRef("infra", "gw", "tcp")),
			nil, []parentSummary{{"gw", "tcp", string(testController), rejected("NotAllowedByListeners")}}},
		{"unknown sectionName", httpRoute("apps", "r", nil, parentRef("infra", "gw", "nope")),
			nil, []parentSummary{{"gw", "nope", string(testController), rejected("NoMatchingParent")}}},
		{"unknown port", httpRoute("apps", "r", nil, portRef),
			nil, []parentSummary{{"gw", "", string(testController), rejected("NoMatchingParent")}}},
		{"whole gateway attaches where allowed", httpRoute("apps", "r", []string{"a.example.com"}, parentRef("infra", "gw", "")),
			nil, []parentSummary{{"gw", "", string(testController), accepted("Accepted")}}},
		{"one unsupported rule among valid ones", withRedirect,
			nil, []parentSummary{{"gw", "all", string(testController), []summary{{"Accepted", "True", "Accepted"}, {"PartiallyInvalid", "True", "UnsupportedValue"}, {"ResolvedRefs", "True", "ResolvedRefs"}, consulPending, routedTrue}}}},
		{"only unsupported rules", onlyRedirect,
			nil, []parentSummary{{"gw", "all", string(testController), []summary{{"Accepted", "False", "UnsupportedValue"}, {"ResolvedRefs", "True", "ResolvedRefs"}}}}},
		{"an IP address as the hostname", httpRoute("apps", "r", []string{"10.1.2.3"}, parentRef("infra", "gw", "team-a")),
			nil, []parentSummary{{"gw", "team-a", string(testController), rejected("UnsupportedValue")}}},
		{"an IP address beside a hostname that intersects", httpRoute("apps", "r", []string{"a.example.com", "10.1.2.3"}, parentRef("infra", "gw", "all")),
			nil, []parentSummary{{"gw", "all", string(testController), rejected("UnsupportedValue")}}},
		{"missing backend", missingBackend,
			nil, []parentSummary{{"gw", "all", string(testController), accepted("Accepted", "BackendNotFound")}}},
		{"cross-namespace backend without grant", crossBackend,
			nil, []parentSummary{{"gw", "all", string(testController), accepted("Accepted", "RefNotPermitted")}}},
		{"other controllers' entries are kept and our stale entry dropped",
			httpRoute("apps", "r", nil, parentRef("infra", "foreign", ""), parentRef("infra", "gw", "all"), parentRef("infra", "missing", "")),
			[]gatewayv1.RouteParentStatus{staleOurs, theirs},
			[]parentSummary{
				{"foreign", "", "other.example.com/controller", []summary{{"Accepted", "True", "Accepted"}}},
				{"gw", "all", string(testController), accepted("Accepted")},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDecider(t, append(base, tt.route)...)
			view, rules, err := d.viewRoute(tt.route)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := d.routeParentStatuses(view, rules, tt.existing, tt.route.Generation, metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarizeParents(got)); diff != "" {
				t.Errorf("parents (-want +got):\n%s", diff)
			}
			for _, p := range got {
				if p.ControllerName == testController && p.Conditions[0].ObservedGeneration != tt.route.Generation {
					t.Errorf("observedGeneration = %d, want %d", p.Conditions[0].ObservedGeneration, tt.route.Generation)
				}
			}
			for _, p := range tt.existing {
				if p.ControllerName != testController && !cmp.Equal(p, got[0]) {
					t.Errorf("another controller's entry changed:\n%s", cmp.Diff(p, got[0]))
				}
			}
		})
	}
}

func TestRouteParentsOfEveryKind(t *testing.T) {
	t.Parallel()
	gw := gateway("infra", "gw", allowAll(tcpListener("tcp", 5432)), allowAll(httpListener("http", 80, "")))
	tcp := &gatewayv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", Generation: 1},
		Spec: gatewayv1.TCPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parentRef("infra", "gw", "")}},
			Rules: []gatewayv1.TCPRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: "db", Port: ptrTo(gatewayv1.PortNumber(5432)),
			}}}}},
		},
	}
	grpc := &gatewayv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "rpc", Generation: 1},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parentRef("infra", "gw", "")}},
		},
	}
	tls := &gatewayv1.TLSRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "passthrough", Generation: 1},
		Spec: gatewayv1.TLSRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parentRef("infra", "gw", "")}},
			Hostnames:       []gatewayv1.Hostname{"db.example.com"},
		},
	}
	udp := &gatewayv1.UDPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "dns", Generation: 1},
		Spec: gatewayv1.UDPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parentRef("infra", "gw", "")}},
		},
	}
	d := newTestDecider(t, ourClass(), gw, service("apps", "db", 5432), tcp, grpc, tls, udp)
	for _, tt := range []struct {
		route   metav1.Object
		want    []summary
		message string
	}{
		{tcp, accepted("Accepted"), ""},
		{grpc, rejected("NotAllowedByListeners"), "Consul's API gateway has no gRPC routes: GRPCRoute is not supported"},
		{tls, rejected("NotAllowedByListeners"), "Consul's API gateway has no TLS passthrough routes: TLSRoute is not supported"},
		{udp, rejected("NotAllowedByListeners"), "Consul's API gateway has no UDP routes: UDPRoute is not supported"},
	} {
		view, rules, err := d.viewRoute(tt.route)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := d.routeParentStatuses(view, rules, nil, 1, metav1.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d parents, want 1", view.kind, len(got))
		}
		if diff := cmp.Diff(tt.want, summarize(got[0].Conditions)); diff != "" {
			t.Errorf("%s conditions (-want +got):\n%s", view.kind, diff)
		}
		if tt.message != "" && got[0].Conditions[0].Message != tt.message {
			t.Errorf("%s: Accepted message %q, want %q", view.kind, got[0].Conditions[0].Message, tt.message)
		}
	}
	status, err := d.gatewayStatus(gw, ourClass(), metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	if status.Listeners[0].AttachedRoutes != 1 || status.Listeners[1].AttachedRoutes != 0 {
		t.Errorf("attachedRoutes tcp=%d http=%d, want 1 and 0 (GRPC, TLS and UDP routes never attach)", status.Listeners[0].AttachedRoutes, status.Listeners[1].AttachedRoutes)
	}
}

func TestRouteDecision(t *testing.T) {
	t.Parallel()
	gw := gateway("infra", "gw", allowAll(httpListener("a", 80, "")), allowAll(httpListener("b", 81, "")),
		allowAll(gatewayv1.Listener{Name: "udp", Port: 82, Protocol: gatewayv1.UDPProtocolType}))
	route := httpRoute("apps", "r", nil, parentRef("infra", "gw", ""), parentRef("infra", "gw", "nope"))
	backend := func(ns, name string) gatewayv1.HTTPBackendRef {
		ref := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Name: gatewayv1.ObjectName(name), Port: ptrTo(gatewayv1.PortNumber(8080)),
		}}}
		if ns != "" {
			ref.Namespace = ptrTo(gatewayv1.Namespace(ns))
		}
		return ref
	}
	route.Spec.Rules = append(route.Spec.Rules, gatewayv1.HTTPRouteRule{
		Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{}}},
	}, gatewayv1.HTTPRouteRule{
		// A missing Service, one in a namespace that grants the route access, one in a
		// namespace that does not: each is judged on its own.
		BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "missing"), backend("granted", "api"), backend("ungranted", "api"), backend("", "echo")},
	})
	grant := refGrant("granted", "routes", []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}},
		[]gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}})
	d := newTestDecider(t, ourClass(), gw, service("apps", "echo", 8080), service("granted", "api", 8080), service("ungranted", "api", 8080), grant, route)
	view, rules, err := d.viewRoute(route)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := d.routeParentStatuses(view, rules, nil, 1, metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := decision.Route{
		// The whole-gateway parentRef is served by a and b; the udp listener is not
		// valid and the second parentRef matches no listener.
		Attachments:  []decision.Attachment{{Gateway: cache.ObjectName{Namespace: "infra", Name: "gw"}, Listeners: []gatewayv1.SectionName{"a", "b"}}},
		DroppedRules: []int{1},
		Backends: []decision.Backend{
			{Ref: decision.BackendRefIndex{Rule: 0, Ref: 0}, Resolved: true, Referent: cache.ObjectName{Namespace: "apps", Name: "echo"}, Consul: "echo", Port: 8080, ServiceUID: "uid-apps-echo"},
			{Ref: decision.BackendRefIndex{Rule: 2, Ref: 0}, Referent: cache.ObjectName{Namespace: "apps", Name: "missing"}},
			{Ref: decision.BackendRefIndex{Rule: 2, Ref: 1}, Resolved: true, Referent: cache.ObjectName{Namespace: "granted", Name: "api"}, Consul: "api", Port: 8080, ServiceUID: "uid-granted-api"},
			{Ref: decision.BackendRefIndex{Rule: 2, Ref: 2}, Referent: cache.ObjectName{Namespace: "ungranted", Name: "api"}},
			{Ref: decision.BackendRefIndex{Rule: 2, Ref: 3}, Resolved: true, Referent: cache.ObjectName{Namespace: "apps", Name: "echo"}, Consul: "echo", Port: 8080, ServiceUID: "uid-apps-echo"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
}

// A TCP listener serves its oldest TCPRoute (then the first by namespace/name), as the
// spec says: every TCPRoute on it is Accepted and counted, only the oldest is served
// (attached for the Consul translation), and the others say which route the listener
// serves. Consul 1.15 serves no listener at all with two tcp-routes bound to it.
func TestTCPListenerServesItsOldestRoute(t *testing.T) {
	t.Parallel()
	gw := gateway("infra", "gw", allowAll(tcpListener("tcp", 5432)))
	tcpRoute := func(ns, name string, created time.Time) *gatewayv1.TCPRoute {
		return &gatewayv1.TCPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(created)},
			Spec: gatewayv1.TCPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parentRef("infra", "gw", "tcp")}},
				Rules: []gatewayv1.TCPRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{
					Name: "db", Port: ptrTo(gatewayv1.PortNumber(5432)),
				}}}}},
			},
		}
	}
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	older, newer := tcpRoute("apps", "older", day), tcpRoute("apps", "newer", day.Add(time.Hour))
	// Same age as older: the first by namespace/name ("apps" < "other") is served.
	sameAge := tcpRoute("other", "db", day)
	d := newTestDecider(t, ourClass(), gw, service("apps", "db", 5432), service("other", "db", 5432), older, newer, sameAge)
	notServed := []summary{{"Accepted", "True", "Accepted"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {ConsulAcceptedCondition, "False", ReasonOlderRouteServed}}
	gwKey := cache.ObjectName{Namespace: "infra", Name: "gw"}
	for _, tt := range []struct {
		route       *gatewayv1.TCPRoute
		want        []summary
		attachments []decision.Attachment
		message     string
	}{
		{older, accepted("Accepted"), []decision.Attachment{{Gateway: gwKey, Listeners: []gatewayv1.SectionName{"tcp"}}}, ""},
		{newer, notServed, nil, "not served: listener tcp serves TCPRoute apps/older. "},
		{sameAge, notServed, nil, "not served: listener tcp serves another namespace's TCPRoute. "},
	} {
		view, rules, err := d.viewRoute(tt.route)
		if err != nil {
			t.Fatal(err)
		}
		got, dec, err := d.routeParentStatuses(view, rules, nil, 1, metav1.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d parents, want 1", tt.route.Name, len(got))
		}
		if diff := cmp.Diff(tt.want, summarize(got[0].Conditions)); diff != "" {
			t.Errorf("%s conditions (-want +got):\n%s", tt.route.Name, diff)
		}
		if diff := cmp.Diff(tt.attachments, dec.Attachments); diff != "" {
			t.Errorf("%s attachments (-want +got):\n%s", tt.route.Name, diff)
		}
		if c := meta.FindStatusCondition(got[0].Conditions, ConsulAcceptedCondition); tt.message != "" && (c == nil || !strings.HasPrefix(c.Message, tt.message)) {
			t.Errorf("%s: ConsulAccepted %+v, want a message starting %q", tt.route.Name, c, tt.message)
		}
	}
	status, err := d.gatewayStatus(gw, ourClass(), metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n := status.Listeners[0].AttachedRoutes; n != 3 {
		t.Errorf("attachedRoutes %d, want 3: every accepted route counts, served or not", n)
	}
}

// The spec: "IPs are not allowed" as route hostnames. Such a route is refused on every
// parent, as one whose every rule is invalid: nothing of it is served, so it has no
// attachment for the Consul translation and no listener counts it.
func TestRouteWithIPHostnameIsNotServed(t *testing.T) {
	t.Parallel()
	gw := gateway("infra", "gw", allowAll(httpListener("a", 80, "")), allowAll(httpListener("b", 81, "*.example.com")))
	route := httpRoute("apps", "r", []string{"a.example.com", "10.1.2.3", "10.1.2.4"}, parentRef("infra", "gw", ""), parentRef("infra", "gw", "b"))
	d := newTestDecider(t, ourClass(), gw, service("apps", "echo", 8080), route)
	view, rules, err := d.viewRoute(route)
	if err != nil {
		t.Fatal(err)
	}
	parents, decision, err := d.routeParentStatuses(view, rules, nil, route.Generation, metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(parents) != 2 {
		t.Fatalf("%d parents, want 2", len(parents))
	}
	const message = `spec.hostnames "10.1.2.3", "10.1.2.4" are IP addresses; Gateway API allows only DNS names as route hostnames, so nothing of the route is served`
	for _, p := range parents {
		if diff := cmp.Diff(rejected("UnsupportedValue"), summarize(p.Conditions)); diff != "" {
			t.Errorf("parent %s conditions (-want +got):\n%s", p.ParentRef.Name, diff)
		}
		if got := p.Conditions[0].Message; got != message {
			t.Errorf("Accepted message %q, want %q", got, message)
		}
	}
	if len(decision.Attachments) != 0 {
		t.Errorf("attachments %v, want none: the route is not served", decision.Attachments)
	}
	status, err := d.gatewayStatus(gw, ourClass(), metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range status.Listeners {
		if l.AttachedRoutes != 0 {
			t.Errorf("listener %s attachedRoutes = %d, want 0", l.Name, l.AttachedRoutes)
		}
	}
}
