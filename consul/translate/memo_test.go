package translate

import (
	"fmt"
	"math/rand/v2"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestTranslatorEqualsTranslateThroughChanges drives one Translator through a seeded
// stream of changes to every golden case's objects (removals, returns, new versions
// with other content, new versions with the same content) and requires, at every
// step, exactly what a fresh Translate gives.
func TestTranslatorEqualsTranslateThroughChanges(t *testing.T) {
	for _, tc := range translationCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			tr := NewTranslator(tc.naming, testOwnership, tc.opts)
			held := Desired{Entries: map[EntryKey]consulapi.ConfigEntry{}}
			current := map[int]any{}
			for i, obj := range tc.objects {
				current[i] = obj
			}
			for step := range 200 {
				i := rng.IntN(len(tc.objects))
				switch rng.IntN(4) {
				case 0:
					delete(current, i)
				case 1:
					current[i] = tc.objects[i]
				case 2:
					current[i] = changed(tc.objects[i])
				case 3:
					current[i] = copied(tc.objects[i])
				}
				var objs []any
				for j := range tc.objects {
					if obj, ok := current[j]; ok {
						objs = append(objs, obj)
					}
				}
				want := Translate(snapshotOf(objs...), tc.naming, testOwnership, tc.opts)
				delta := tr.Update(tr.changesTo(snapshotOf(objs...)))
				if diff := gocmp.Diff(want, tr.Desired()); diff != "" {
					t.Fatalf("step %d: Translator differs from Translate (-want +got):\n%s", step, diff)
				}
				// What the syncer holds: the desired state kept by deltas alone.
				for key, e := range delta.Entries {
					if e == nil {
						delete(held.Entries, key)
						continue
					}
					held.Entries[key] = e
				}
				if delta.ProblemsChanged {
					held.Problems = delta.Problems
				}
				if diff := gocmp.Diff(want, held); diff != "" {
					t.Fatalf("step %d: the desired state kept by deltas differs from Translate (-want +got):\n%s", step, diff)
				}
			}
		})
	}
}

// changedListenerPort is a new version of gw whose first listener has another port.
func changedListenerPort(gw *gatewayv1.Gateway) *gatewayv1.Gateway {
	c := gw.DeepCopy()
	c.Spec.Listeners[0].Port++
	return c
}

// copied is a new version of obj with the same content.
func copied(obj any) any {
	switch o := obj.(type) {
	case *gatewayv1.Gateway:
		return o.DeepCopy()
	case *corev1.Secret:
		return o.DeepCopy()
	case confirmedHTTPRoute:
		return confirmedHTTPRoute{Route: o.Route.DeepCopy(), Decision: o.Decision}
	case confirmedTCPRoute:
		return confirmedTCPRoute{Route: o.Route.DeepCopy(), Decision: o.Decision}
	}
	panic(fmt.Sprintf("unexpected fixture %T", obj))
}

// changed is a new version of obj whose translation differs: a Gateway no longer
// accepted, a Secret without its key, a route that no longer attaches anywhere.
func changed(obj any) any {
	switch o := obj.(type) {
	case *gatewayv1.Gateway:
		c := o.DeepCopy()
		c.Status.Conditions = []metav1.Condition{cond("Accepted", false, "Invalid")}
		return c
	case *corev1.Secret:
		c := o.DeepCopy()
		delete(c.Data, corev1.TLSPrivateKeyKey)
		return c
	case confirmedHTTPRoute:
		return confirmedHTTPRoute{Route: o.Route.DeepCopy(), Decision: attachedTo()}
	case confirmedTCPRoute:
		return confirmedTCPRoute{Route: o.Route.DeepCopy(), Decision: attachedTo()}
	}
	panic(fmt.Sprintf("unexpected fixture %T", obj))
}

// TestTranslatorTranslatesOnlyWhatChanged: with 100 routes translated, the same
// snapshot again translates nothing, one new route version translates one object, and
// a Gateway's new version translates it and the routes that read it.
func TestTranslatorTranslatesOnlyWhatChanged(t *testing.T) {
	objs := []any{
		confirmedGateway("apps", "a", true, validListener(httpListener("http", 80, ""))),
		confirmedGateway("apps", "b", true, validListener(httpListener("http", 80, ""))),
	}
	for i := range 100 {
		gw := "a"
		if i%2 == 1 {
			gw = "b"
		}
		objs = append(objs, webRoute(fmt.Sprintf("r%d", i), nil, attachment("apps", gw, "http")))
	}
	tr := NewTranslator(Naming{}, testOwnership, Options{ManageServiceDefaults: true})
	tr.Translate(snapshotOf(objs...))
	if tr.translated != 102 {
		t.Fatalf("first translation: %d objects translated, want 102", tr.translated)
	}
	tr.Translate(snapshotOf(objs...))
	if tr.translated != 0 {
		t.Errorf("same snapshot: %d objects translated, want 0", tr.translated)
	}
	objs[10] = copied(objs[10])
	tr.Translate(snapshotOf(objs...))
	if tr.translated != 1 {
		t.Errorf("one new route version: %d objects translated, want 1", tr.translated)
	}
	objs[0] = copied(objs[0]) // Gateway a: its listeners as routes see them are the same
	tr.Translate(snapshotOf(objs...))
	if tr.translated != 1 {
		t.Errorf("one new Gateway version with the same listeners: %d objects translated, want 1", tr.translated)
	}
	objs[0] = changedListenerPort(objs[0].(*gatewayv1.Gateway)) // Gateway a and its 50 routes
	tr.Translate(snapshotOf(objs...))
	if tr.translated != 51 {
		t.Errorf("one Gateway whose listener moved: %d objects translated, want 51", tr.translated)
	}

	// The same stored version in another allocation (a status write's answer, then
	// the cache's copy) keeps its translation, and the translator lets go of the first.
	stored := copied(objs[11]).(confirmedHTTPRoute)
	stored.Route.UID, stored.Route.ResourceVersion = "uid-11", "7"
	objs[11] = stored
	tr.Translate(snapshotOf(objs...))
	again := copied(stored).(confirmedHTTPRoute)
	objs[11] = again
	tr.Translate(snapshotOf(objs...))
	if tr.translated != 0 {
		t.Errorf("same version in a new allocation: %d objects translated, want 0", tr.translated)
	}
	if held := tr.memo[unit{kind: unitHTTPRoute, key: cache.MetaObjectToName(again.Route)}]; held == nil || held.source != any(again.Route) {
		t.Error("the translator still holds the first allocation of the version")
	}
	newer := copied(again).(confirmedHTTPRoute)
	newer.Route.ResourceVersion = "8"
	objs[11] = newer
	tr.Translate(snapshotOf(objs...))
	if tr.translated != 1 {
		t.Errorf("a new version: %d objects translated, want 1", tr.translated)
	}
}
