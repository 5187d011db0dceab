package translate

import (
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// confirmedListenerSet is a confirmed ListenerSet naming infra/gw, created at minute
// created, with status as the status pipeline writes it.
func confirmedListenerSet(ns, name string, created int, accepted bool, listeners ...judgedListener) *gatewayv1.ListenerSet {
	set := &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidOf("ListenerSet", ns, name), Generation: 1,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, created, 0, 0, time.UTC))},
		Spec: gatewayv1.ListenerSetSpec{ParentRef: gatewayv1.ParentGatewayReference{Namespace: new(gatewayv1.Namespace("infra")), Name: "gw"}},
	}
	reason := "Accepted"
	if !accepted {
		reason = "NotAllowed"
	}
	set.Status.Conditions = []metav1.Condition{cond("Accepted", accepted, reason), cond("Programmed", false, "Pending")}
	for _, tl := range listeners {
		set.Spec.Listeners = append(set.Spec.Listeners, gatewayv1.ListenerEntry(tl.l))
		conds := []metav1.Condition{cond("Accepted", tl.valid, "Accepted"), cond("ResolvedRefs", true, "ResolvedRefs"), cond("Conflicted", false, "NoConflicts")}
		set.Status.Listeners = append(set.Status.Listeners, gatewayv1.ListenerEntryStatus{Name: tl.l.Name, Conditions: conds})
	}
	return set
}

func snapshotWithListenerSets(sets []*gatewayv1.ListenerSet, objs ...any) Snapshot {
	s := snapshotOf(objs...)
	for _, set := range sets {
		s.ListenerSets[cache.MetaObjectToName(set)] = set
	}
	return s
}

// The accepted ListenerSets' programmable listeners join their Gateway's api-gateway
// entry after its own, oldest ListenerSet first, named uniquely; a route attached to a
// ListenerSet listener names that listener in its parents.
func TestTranslateListenerSets(t *testing.T) {
	gw := confirmedGateway("infra", "gw", true, validListener(httpListener("http", 80, "")))
	late := confirmedListenerSet("apps", "a-late", 2, true, validListener(httpListener("x", 9090, "")))
	extra := confirmedListenerSet("apps", "extra", 1, true,
		validListener(httpListener("web", 8080, "web.example.com")),
		invalidListener(tcpListener("bad", 9000)),
		validListener(httpsListener("tls", 8443, "", certRef("", "tls"))))
	refused := confirmedListenerSet("apps", "refused", 0, false, validListener(httpListener("r", 7070, "")))
	route := newConfirmedHTTPRoute("apps", "web", nil, attachedTo(attachment("infra", "gw", "apps.extra.web")),
		gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 80, nil)}})
	snap := snapshotWithListenerSets([]*gatewayv1.ListenerSet{late, extra, refused}, gw, route, tlsSecret("apps", "tls"))

	d := Translate(snap, Naming{}, testOwnership, Options{})

	checkConsul115Validation(t, d)
	if len(d.Problems) > 0 {
		t.Errorf("problems: %+v", d.Problems)
	}
	entry, ok := d.Entries[EntryKey{Kind: consulapi.APIGateway, Name: "gw.infra"}].(*consulapi.APIGatewayConfigEntry)
	if !ok {
		t.Fatalf("no api-gateway entry: %v", d.Entries)
	}
	var names []string
	for _, l := range entry.Listeners {
		names = append(names, l.Name)
	}
	if diff := gocmp.Diff([]string{"http", "apps.extra.web", "apps.extra.tls", "apps.a-late.x"}, names); diff != "" {
		t.Errorf("api-gateway listeners (-want +got):\n%s", diff)
	}
	web := entry.Listeners[slices.IndexFunc(entry.Listeners, func(l consulapi.APIGatewayListener) bool { return l.Name == "apps.extra.web" })]
	if web.Port != 8080 || web.Hostname != "web.example.com" || web.Protocol != "http" {
		t.Errorf("listener apps.extra.web: %+v", web)
	}
	// A ListenerSet's certificateRef without a namespace is in the ListenerSet's.
	if _, ok := d.Entries[EntryKey{Kind: consulapi.InlineCertificate, Name: "secret.tls.apps"}]; !ok {
		t.Errorf("no inline-certificate for Secret apps/tls: %v", d.Entries)
	}
	key := EntryKey{Kind: consulapi.HTTPRoute, Name: "web.apps"}
	httpRoute, ok := d.Entries[key].(*consulapi.HTTPRouteConfigEntry)
	if !ok {
		t.Fatalf("no http-route entry: %v", d.Entries)
	}
	checkParents(t, d, key, httpRoute.Parents, "http")
	if len(httpRoute.Parents) != 1 || httpRoute.Parents[0].SectionName != "apps.extra.web" {
		t.Errorf("http-route parents %+v, want the listener apps.extra.web", httpRoute.Parents)
	}
}

// A ListenerSet confirmed after its Gateway's translation was kept brings that
// translation back: the memo reads the Gateway's ListenerSets.
func TestTranslatorRetranslatesGatewayForListenerSets(t *testing.T) {
	gw := confirmedGateway("infra", "gw", true, validListener(httpListener("http", 80, "")))
	tr := NewTranslator(Naming{}, testOwnership, Options{})
	tr.Translate(snapshotWithListenerSets(nil, gw))
	set := confirmedListenerSet("apps", "extra", 1, true, validListener(httpListener("web", 8080, "")))

	d := tr.Translate(snapshotWithListenerSets([]*gatewayv1.ListenerSet{set}, gw))

	entry := d.Entries[EntryKey{Kind: consulapi.APIGateway, Name: "gw.infra"}].(*consulapi.APIGatewayConfigEntry)
	if len(entry.Listeners) != 2 || entry.Listeners[1].Name != "apps.extra.web" {
		t.Errorf("listeners %+v, want http and apps.extra.web", entry.Listeners)
	}
}
