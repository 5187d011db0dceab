package sync

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// allowListeners returns gw allowing ListenerSets from from (with selector labels for
// Selector).
func allowListeners(gw *gatewayv1.Gateway, from gatewayv1.FromNamespaces, labels map[string]string) *gatewayv1.Gateway {
	gw.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: ptrTo(from)}}
	if labels != nil {
		gw.Spec.AllowedListeners.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: labels}
	}
	return gw
}

// listenerSet is a ListenerSet naming infra/gw, created at minute created.
func listenerSet(namespace, name string, created int, listeners ...gatewayv1.Listener) *gatewayv1.ListenerSet {
	set := &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 4,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, created, 0, 0, time.UTC))},
		Spec: gatewayv1.ListenerSetSpec{ParentRef: gatewayv1.ParentGatewayReference{Namespace: ptrTo(gatewayv1.Namespace("infra")), Name: "gw"}},
	}
	for _, l := range listeners {
		set.Spec.Listeners = append(set.Spec.Listeners, gatewayv1.ListenerEntry(l))
	}
	return set
}

func listenerSetRef(namespace, name, section string) gatewayv1.ParentReference {
	ref := parentRef(namespace, name, section)
	ref.Group, ref.Kind = ptrTo(gatewayv1.Group(gatewayv1.GroupName)), ptrTo(gatewayv1.Kind("ListenerSet"))
	return ref
}

// listenerSetSummary is what a test pins down of a ListenerSet's status.
type listenerSetSummary struct {
	Conditions []summary
	Listeners  map[gatewayv1.SectionName][]summary
	Attached   map[gatewayv1.SectionName]int32
}

func summarizeListenerSet(status gatewayv1.ListenerSetStatus) listenerSetSummary {
	out := listenerSetSummary{Conditions: summarize(status.Conditions)}
	for _, l := range status.Listeners {
		if out.Listeners == nil {
			out.Listeners, out.Attached = map[gatewayv1.SectionName][]summary{}, map[gatewayv1.SectionName]int32{}
		}
		out.Listeners[l.Name] = summarize(l.Conditions)
		out.Attached[l.Name] = l.AttachedRoutes
	}
	return out
}

func listenerSetStatusOf(t *testing.T, d *decider, set *gatewayv1.ListenerSet) gatewayv1.ListenerSetStatus {
	t.Helper()
	gw, class, ok, err := d.parentGatewayOf(set)
	if err != nil || !ok {
		t.Fatalf("parent of ListenerSet %s/%s: ours %v, %v", set.Namespace, set.Name, ok, err)
	}
	status, err := d.listenerSetStatus(set, gw, class, metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	return status
}

var (
	validEntry = []summary{
		{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Pending"},
		{"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "False", "NoConflicts"},
	}
	acceptedSet = []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Pending"}}
)

func conflictedEntry(reason string) []summary {
	return []summary{
		{"Accepted", "False", reason}, {"Programmed", "False", reason},
		{"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "True", reason},
	}
}

func notAcceptedSet(reason string) []summary {
	return []summary{{"Accepted", "False", reason}, {"Programmed", "False", reason}}
}

// A Gateway admits ListenerSets per spec.allowedListeners.namespaces.from.
func TestListenerSetAllowed(t *testing.T) {
	set := func(namespace string) *gatewayv1.ListenerSet {
		return listenerSet(namespace, "extra", 1, httpListener("web", 8080, ""))
	}
	accepted := listenerSetSummary{Conditions: acceptedSet, Listeners: map[gatewayv1.SectionName][]summary{"web": validEntry}, Attached: map[gatewayv1.SectionName]int32{"web": 0}}
	notAllowed := listenerSetSummary{Conditions: notAcceptedSet("NotAllowed")}
	tests := []struct {
		name string
		gw   *gatewayv1.Gateway
		set  *gatewayv1.ListenerSet
		want listenerSetSummary
	}{
		{"no allowedListeners: None", gateway("infra", "gw", httpListener("http", 80, "")), set("infra"), notAllowed},
		{"None", allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromNone, nil), set("infra"), notAllowed},
		{"Same, same namespace", allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromSame, nil), set("infra"), accepted},
		{"Same, other namespace", allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromSame, nil), set("apps"), notAllowed},
		{"All", allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromAll, nil), set("apps"), accepted},
		{"Selector matches", allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromSelector, map[string]string{"env": "prod"}), set("apps"), accepted},
		{"Selector does not match", allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromSelector, map[string]string{"env": "dev"}), set("apps"), notAllowed},
		{"Selector missing", allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromSelector, nil), set("apps"), notAllowed},
		{"Gateway not accepted for a reason of its own", func() *gatewayv1.Gateway {
			gw := allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromAll, nil)
			gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Value: "a"}, {Value: "b"}}
			return gw
		}(), set("apps"), listenerSetSummary{Conditions: notAcceptedSet("ParentNotAccepted"), Listeners: map[gatewayv1.SectionName][]summary{"web": {
			{"Accepted", "True", "Accepted"}, {"Programmed", "False", "ParentNotAccepted"}, // programmed as its ListenerSet is
			{"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "False", "NoConflicts"},
		}}, Attached: map[gatewayv1.SectionName]int32{"web": 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestDecider(t, ourClass(), tt.gw, tt.set, namespace("infra", nil), namespace("apps", map[string]string{"env": "prod"}))
			got := summarizeListenerSet(listenerSetStatusOf(t, d, tt.set))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ListenerSet status (-want +got):\n%s", diff)
			}
			gwStatus, err := d.gatewayStatus(tt.gw, ourClass(), metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			wantAttached := int32(0)
			if tt.want.Conditions[0].Status == "True" {
				wantAttached = 1
			}
			if gwStatus.AttachedListenerSets == nil || *gwStatus.AttachedListenerSets != wantAttached {
				t.Errorf("Gateway attachedListenerSets = %v, want %d", gwStatus.AttachedListenerSets, wantAttached)
			}
		})
	}
}

// Listeners are merged, the Gateway's first, then ListenerSets oldest first, then by
// namespace/name; of two listeners that conflict, the later loses.
func TestListenerSetPrecedenceAndConflicts(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", httpListener("http", 80, "a.example.com"), tcpListener("tcp", 9000)), gatewayv1.NamespacesFromAll, nil)
	// Created first, so its listeners come right after the Gateway's.
	first := listenerSet("infra", "z-first", 1,
		httpListener("same-host", 80, "a.example.com"), // the Gateway's listener wins
		httpListener("web", 8080, "w.example.com"),
		tcpListener("tcp-on-http-port", 80), // protocol of the Gateway's port 80 is HTTP
	)
	// Created together later: apps/b-tie comes before infra/a-tie by namespace/name.
	tieApps := listenerSet("apps", "b-tie", 2, httpListener("web", 8080, "w.example.com"))
	tieInfra := listenerSet("infra", "a-tie", 2, httpListener("other-host", 8080, "o.example.com"), httpListener("tcp-port", 9000, ""))
	d := newTestDecider(t, ourClass(), gw, first, tieApps, tieInfra, namespace("infra", nil), namespace("apps", nil))

	tests := []struct {
		set  *gatewayv1.ListenerSet
		want listenerSetSummary
	}{
		{first, listenerSetSummary{
			Conditions: acceptedSet,
			Listeners: map[gatewayv1.SectionName][]summary{
				"same-host":        conflictedEntry("HostnameConflict"),
				"web":              validEntry,
				"tcp-on-http-port": conflictedEntry("ProtocolConflict"),
			},
			Attached: map[gatewayv1.SectionName]int32{"same-host": 0, "web": 0, "tcp-on-http-port": 0},
		}},
		{tieApps, listenerSetSummary{
			Conditions: notAcceptedSet("ListenersNotValid"),
			Listeners:  map[gatewayv1.SectionName][]summary{"web": conflictedEntry("HostnameConflict")},
			Attached:   map[gatewayv1.SectionName]int32{"web": 0},
		}},
		{tieInfra, listenerSetSummary{
			Conditions: acceptedSet,
			Listeners: map[gatewayv1.SectionName][]summary{
				// Another hostname on w.example.com's port 8080: one Consul listener
				// serves both.
				"other-host": validEntry,
				"tcp-port":   conflictedEntry("ProtocolConflict"),
			},
			Attached: map[gatewayv1.SectionName]int32{"other-host": 0, "tcp-port": 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.set.Namespace+"/"+tt.set.Name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summarizeListenerSet(listenerSetStatusOf(t, d, tt.set))); diff != "" {
				t.Errorf("ListenerSet status (-want +got):\n%s", diff)
			}
		})
	}
	// The Gateway's own listeners never lose to a ListenerSet's.
	status, err := d.gatewayStatus(gw, ourClass(), metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range status.Listeners {
		if diff := cmp.Diff(validEntry, summarize(l.Conditions)); diff != "" {
			t.Errorf("Gateway listener %s (-want +got):\n%s", l.Name, diff)
		}
	}
	if got := status.AttachedListenerSets; got == nil || *got != 2 {
		t.Errorf("attachedListenerSets = %v, want 2 (infra/z-first and infra/a-tie are accepted)", got)
	}
}

// Listeners whose names in the api-gateway entry coincide ("apps.s.l0.x" three ways,
// on ports of their own) are not all programmed: the first in precedence order keeps
// the name, the later ones are conflicted (found by FuzzListeners).
func TestListenerSetEntryNameConflicts(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", httpListener("apps.s.l0.x", 80, "")), gatewayv1.NamespacesFromAll, nil)
	dotted := listenerSet("apps", "s", 1, httpListener("l0.x", 81, ""))
	shorter := listenerSet("apps", "s.l0", 2, httpListener("x", 82, ""), httpListener("y", 83, ""))
	d := newTestDecider(t, ourClass(), gw, dotted, shorter, namespace("infra", nil), namespace("apps", nil))
	nameConflict := conflictedEntry("ListenerConflict")
	for _, tt := range []struct {
		set  *gatewayv1.ListenerSet
		want map[gatewayv1.SectionName][]summary
	}{
		{dotted, map[gatewayv1.SectionName][]summary{"l0.x": nameConflict}},
		{shorter, map[gatewayv1.SectionName][]summary{"x": nameConflict, "y": validEntry}},
	} {
		if diff := cmp.Diff(tt.want, summarizeListenerSet(listenerSetStatusOf(t, d, tt.set)).Listeners); diff != "" {
			t.Errorf("%s listeners (-want +got):\n%s", tt.set.Name, diff)
		}
	}
	status, err := d.gatewayStatus(gw, ourClass(), metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(validEntry, summarize(status.Listeners[0].Conditions)); diff != "" {
		t.Errorf("Gateway listener (-want +got):\n%s", diff)
	}
}

// Routes attach to a ListenerSet through a parentRef of kind ListenerSet, by its
// listeners' allowedRoutes (Same is the ListenerSet's namespace), and are served on
// the Consul listener the ListenerSet's listener becomes.
func TestRouteAttachesToListenerSet(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromAll, nil)
	set := listenerSet("apps", "extra", 1, httpListener("web", 8080, ""), allowAll(httpListener("api", 8081, "api.example.com")))
	blocked := listenerSet("apps", "blocked", 1, httpListener("web", 8090, ""))
	blocked.Spec.ParentRef.Name = "closed"
	closed := gateway("infra", "closed", httpListener("http", 80, ""))
	key := cache.ObjectName{Namespace: "infra", Name: "gw"}
	tests := []struct {
		name            string
		route           *gatewayv1.HTTPRoute
		want            []parentSummary
		wantAttachments []decision.Attachment
	}{
		{"whole ListenerSet, same namespace", httpRoute("apps", "r", nil, listenerSetRef("", "extra", "")),
			[]parentSummary{{"extra", "", string(testController), accepted("Accepted")}},
			[]decision.Attachment{{Gateway: key, Listeners: []gatewayv1.SectionName{"apps.extra.web", "apps.extra.api"}}}},
		{"sectionName", httpRoute("apps", "r", nil, listenerSetRef("apps", "extra", "api")),
			[]parentSummary{{"extra", "api", string(testController), accepted("Accepted")}},
			[]decision.Attachment{{Gateway: key, Listeners: []gatewayv1.SectionName{"apps.extra.api"}}}},
		{"sectionName of no listener", httpRoute("apps", "r", nil, listenerSetRef("apps", "extra", "nope")),
			[]parentSummary{{"extra", "nope", string(testController), []summary{{"Accepted", "False", "NoMatchingParent"}, {"ResolvedRefs", "True", "ResolvedRefs"}}}}, nil},
		{"other namespace: only the listener allowing All", httpRoute("team", "r", nil, listenerSetRef("apps", "extra", "")),
			[]parentSummary{{"extra", "", string(testController), accepted("Accepted")}},
			[]decision.Attachment{{Gateway: key, Listeners: []gatewayv1.SectionName{"apps.extra.api"}}}},
		{"other namespace, listener allowing Same", httpRoute("team", "r", nil, listenerSetRef("apps", "extra", "web")),
			[]parentSummary{{"extra", "web", string(testController), []summary{{"Accepted", "False", "NotAllowedByListeners"}, {"ResolvedRefs", "True", "ResolvedRefs"}}}}, nil},
		{"ListenerSet its Gateway does not allow", httpRoute("apps", "r", nil, listenerSetRef("apps", "blocked", "")),
			[]parentSummary{{"blocked", "", string(testController), []summary{{"Accepted", "False", "NoMatchingParent"}, {"ResolvedRefs", "True", "ResolvedRefs"}}}}, nil},
		{"a Gateway parentRef does not reach the ListenerSet's listeners", httpRoute("infra", "r", nil, parentRef("", "gw", "web")),
			[]parentSummary{{"gw", "web", string(testController), []summary{{"Accepted", "False", "NoMatchingParent"}, {"ResolvedRefs", "True", "ResolvedRefs"}}}}, nil},
		{"missing ListenerSet: no entry", httpRoute("apps", "r", nil, listenerSetRef("apps", "missing", "")), []parentSummary{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{ourClass(), gw, closed, set, blocked, service("apps", "echo", 8080), service("team", "echo", 8080), service("infra", "echo", 8080), tt.route}
			d := newTestDecider(t, objs...)
			view, rules, err := d.viewRoute(tt.route)
			if err != nil {
				t.Fatal(err)
			}
			got, decision, err := d.routeParentStatuses(view, rules, nil, tt.route.Generation, metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarizeParents(got)); diff != "" {
				t.Errorf("parents (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAttachments, decision.Attachments); diff != "" {
				t.Errorf("attachments (-want +got):\n%s", diff)
			}
		})
	}
}

// attachedRoutes of a ListenerSet's listeners counts the routes accepted on each,
// through parentRefs to the ListenerSet only.
func TestListenerSetAttachedRoutes(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromAll, nil)
	set := listenerSet("apps", "extra", 1, httpListener("web", 8080, ""), allowAll(httpListener("api", 8081, "api.example.com")))
	d := newTestDecider(t, ourClass(), gw, set, service("apps", "echo", 8080), service("team", "echo", 8080),
		httpRoute("apps", "both", nil, listenerSetRef("", "extra", "")),
		httpRoute("apps", "web", nil, listenerSetRef("", "extra", "web")),
		httpRoute("team", "api", []string{"api.example.com"}, listenerSetRef("apps", "extra", "")),
		httpRoute("team", "refused", nil, listenerSetRef("apps", "extra", "web")),
		httpRoute("team", "other-host", []string{"x.example.com"}, listenerSetRef("apps", "extra", "api")),
		httpRoute("infra", "on-gateway", nil, parentRef("", "gw", "")),
	)
	got := summarizeListenerSet(listenerSetStatusOf(t, d, set)).Attached
	if diff := cmp.Diff(map[gatewayv1.SectionName]int32{"web": 2, "api": 2}, got); diff != "" {
		t.Errorf("attachedRoutes (-want +got):\n%s", diff)
	}
}

// A ListenerSet's certificateRef to another namespace needs a ReferenceGrant from
// kind ListenerSet: its Gateway's grants are not inherited.
func TestListenerSetReferenceGrant(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", httpsListener("https", 443, "certs", "tls")), gatewayv1.NamespacesFromAll, nil)
	fromListenerSets := grantSecretsTo("infra", "certs")
	fromListenerSets.Name = "from-listenersets"
	fromListenerSets.Spec.From[0].Kind = "ListenerSet"
	tests := []struct {
		name   string
		grants []runtime.Object
		want   string
	}{
		{"only the Gateway's grant", []runtime.Object{grantSecretsTo("infra", "certs")}, "RefNotPermitted"},
		{"a grant from ListenerSets", []runtime.Object{fromListenerSets}, "ResolvedRefs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := listenerSet("infra", "extra", 1, httpsListener("tls", 8443, "certs", "tls"))
			d := newTestDecider(t, append([]runtime.Object{ourClass(), gw, set, tlsSecret(t, "certs", "tls")}, tt.grants...)...)
			status := listenerSetStatusOf(t, d, set)
			refs := summarize(status.Listeners[0].Conditions)[2]
			if refs.Reason != tt.want {
				t.Errorf("ResolvedRefs reason %s, want %s", refs.Reason, tt.want)
			}
		})
	}
}
