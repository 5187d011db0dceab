package translate

import (
	"bytes"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// ---- determinism ----

// TestTranslateDeterministic translates every golden case's objects again, filed in
// other orders. In shared_entries objects share entries: the first in sorted order owns
// a shared entry, whatever the order.
func TestTranslateDeterministic(t *testing.T) {
	shared := false
	for _, tc := range translationCases(t) {
		first := Translate(snapshotOf(tc.objects...), tc.naming, testOwnership, tc.opts)
		want := goldenForm(t, first)
		for i := range 30 {
			// A fresh snapshot each time: fresh maps, filled in another order.
			objs := slices.Clone(tc.objects)
			if i%2 == 1 {
				slices.Reverse(objs)
			}
			d := Translate(snapshotOf(objs...), tc.naming, testOwnership, tc.opts)
			if got := goldenForm(t, d); !bytes.Equal(got, want) {
				t.Fatalf("%s: run %d differs:\n%s", tc.name, i, gocmp.Diff(string(want), string(got)))
			}
			if diff := gocmp.Diff(first, d); diff != "" {
				t.Fatalf("%s: run %d differs (-first +run):\n%s", tc.name, i, diff)
			}
		}
		if tc.name == "shared_entries" {
			shared = true
			sd := first.Entries[EntryKey{Kind: consulapi.ServiceDefaults, Name: "web", Namespace: "k8s"}]
			if sd == nil || sd.GetMeta()[metaNamespace] != "apps" {
				t.Errorf("shared service-defaults: %+v", sd)
			}
			// 2 api-gateways, 1 certificate, 2 http-routes, 1 service-defaults.
			if n := len(first.Entries); n != 6 {
				t.Errorf("shared entries: %d entries, want 6", n)
			}
		}
	}
	if !shared {
		t.Error("no case shared_entries in testdata")
	}
}

// TestTranslateDoesNotModifySnapshot: the snapshot is shared with the syncer.
func TestTranslateDoesNotModifySnapshot(t *testing.T) {
	for _, tc := range translationCases(t) {
		s := snapshotOf(tc.objects...)
		before := snapshotOf(tc.objects...)
		for k, gw := range before.Gateways {
			before.Gateways[k] = gw.DeepCopy()
		}
		for _, routes := range before.Routes {
			for k, r := range routes {
				routes[k] = ConfirmedRoute{Route: r.Route.DeepCopyObject().(gatewayapi.Object), Decision: r.Decision}
			}
		}
		Translate(s, tc.naming, testOwnership, tc.opts)
		if diff := gocmp.Diff(before.Gateways, s.Gateways); diff != "" {
			t.Errorf("%s: Gateways modified:\n%s", tc.name, diff)
		}
		if diff := gocmp.Diff(before.Routes, s.Routes); diff != "" {
			t.Errorf("%s: routes modified:\n%s", tc.name, diff)
		}
	}
}

func TestTranslateEmpty(t *testing.T) {
	d := Translate(Snapshot{}, Naming{}, testOwnership, Options{ManageServiceDefaults: true})
	if len(d.Entries) != 0 || len(d.Problems) != 0 || d.Entries == nil {
		t.Errorf("empty snapshot: %+v", d)
	}
}

// ---- helpers ----

func TestSortProblems(t *testing.T) {
	a := cache.ObjectName{Namespace: "a", Name: "x"}
	b := cache.ObjectName{Namespace: "b", Name: "x"}
	p := func(kind string, object cache.ObjectName, msg string) Problem {
		return Problem{Kind: kind, Object: object, Message: msg}
	}
	// A problem of one parent sorts after the object's own, by parent.
	onParent := func(listener string, msg string) Problem {
		return Problem{Kind: "HTTPRoute", Object: a, Parent: ProblemParent{b, gatewayv1.SectionName(listener)}, Message: msg}
	}
	got := sortProblems([]Problem{
		p("TCPRoute", a, "m"), p("Gateway", b, "m"), p("Gateway", a, "z"), p("Gateway", a, "m"), p("Gateway", a, "m"),
		onParent("y", "a"), onParent("x", "b"), p("HTTPRoute", a, "z"), onParent("x", "b"),
	})
	want := []Problem{
		p("Gateway", a, "m"), p("Gateway", a, "z"), p("Gateway", b, "m"),
		p("HTTPRoute", a, "z"), onParent("x", "b"), onParent("y", "a"),
		p("TCPRoute", a, "m"),
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}
