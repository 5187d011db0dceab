package sync

import (
	"context"
	"errors"
	gosync "sync"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	configfake "github.com/consul-gateway-controller/consul-gateway-controller/api/client/fake"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// recordingPublisher keeps every confirmation.
type recordingPublisher struct {
	mu   gosync.Mutex
	seen []contract.Confirmation
}

func (p *recordingPublisher) Publish(_ context.Context, c contract.Confirmation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, c)
}

// newTestController returns a controller on fake clientsets whose caches hold objs;
// the API server (the fake's tracker) holds them too.
func newTestController(t *testing.T, objs ...runtime.Object) (*Controller, *gatewayfake.Clientset, *recordingPublisher) {
	t.Helper()
	// Objects go into the tracker under an explicit v1 resource: the scheme also knows
	// the v1beta1 aliases of these types, and the tracker would guess another version.
	gwClient := gatewayfake.NewSimpleClientset()
	inf := informers.New(kubefake.NewClientset(), gwClient, configfake.NewClientset(), 0)
	pub := &recordingPublisher{}
	c, err := NewController(t.Context(), Config{
		ControllerName: testController,
		Capabilities:   consullimits.Consul115,
		Informers:      InformersOf(inf),
		GatewayClient:  gwClient,
		Publisher:      pub,
		BundleVersion:  func() string { return "v1.6.3" },
		Clock:          clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		var store cache.Store
		var resource string
		switch obj.(type) {
		case *gatewayv1.GatewayClass:
			store, resource = inf.GatewayClasses.Informer().GetStore(), "gatewayclasses"
		case *gatewayv1.Gateway:
			store, resource = inf.Gateways.Informer().GetStore(), "gateways"
		case *gatewayv1.ListenerSet:
			store, resource = inf.ListenerSets.Informer().GetStore(), "listenersets"
		case *gatewayv1.HTTPRoute:
			store, resource = inf.Routes["HTTPRoute"].GetStore(), "httproutes"
		default:
			t.Fatalf("no store for %T", obj)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
		ns := obj.(metav1.Object).GetNamespace()
		if err := gwClient.Tracker().Create(schema.GroupVersionResource{Group: gatewayv1.GroupName, Version: "v1", Resource: resource}, obj, ns); err != nil {
			t.Fatal(err)
		}
	}
	gwClient.ClearActions()
	return c, gwClient, pub
}

func TestSyncGatewayConflictRequeuesWithoutGetOrPublish(t *testing.T) {
	gw := gateway("infra", "gw", httpListener("http", 80, ""))
	gw.ResourceVersion = "7"
	c, client, pub := newTestController(t, ourClass(), gw)
	var sentVersion string
	client.PrependReactor("update", "gateways", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		sentVersion = action.(k8stesting.UpdateAction).GetObject().(*gatewayv1.Gateway).ResourceVersion
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: gatewayv1.GroupName, Resource: "gateways"}, gw.Name, nil)
	})

	err := c.syncGateway(t.Context(), cache.MetaObjectToName(gw))
	if !apierrors.IsConflict(err) {
		t.Fatalf("syncGateway returned %v, want a Conflict the worker requeues", err)
	}
	if sentVersion != gw.ResourceVersion {
		t.Errorf("UpdateStatus carried resourceVersion %q, want the lister's %q", sentVersion, gw.ResourceVersion)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "update" {
			t.Errorf("unexpected %s %s: a conflict is answered by the informer, not a fresh read", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if len(pub.seen) != 0 {
		t.Errorf("published %d confirmations after a conflict, want none", len(pub.seen))
	}
}

// A certificate Secret whose watch has not listed yet is not judged missing: the sync
// fails, to be retried, and writes and publishes nothing, so no listener flaps to
// InvalidCertificateRef and none leaves Consul for a moment.
func TestSyncGatewayWaitsForItsSecretsWatch(t *testing.T) {
	gw := gateway("infra", "gw", httpsListener("https", 443, "", "cert"))
	// The Gateway is in the caches, but the Secret cache never started: it watches
	// nothing yet.
	c, client, pub := newTestController(t, ourClass(), gw)

	err := c.syncGateway(t.Context(), cache.MetaObjectToName(gw))
	if !errors.Is(err, informers.ErrSecretNotSynced) {
		t.Fatalf("syncGateway returned %v, want informers.ErrSecretNotSynced, to be retried", err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("%d API calls, want none: %v", n, client.Actions())
	}
	if len(pub.seen) != 0 {
		t.Errorf("published %+v, want nothing", pub.seen)
	}
}

func TestSyncGatewayWritesOnceThenConfirmsWithoutWriting(t *testing.T) {
	gw := gateway("infra", "gw", httpListener("http", 80, ""))
	c, client, pub := newTestController(t, ourClass(), gw)
	key := cache.MetaObjectToName(gw)

	if err := c.syncGateway(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if n := countVerb(client.Actions(), "update"); n != 1 {
		t.Fatalf("first sync made %d status writes, want 1", n)
	}
	if len(pub.seen) != 1 || pub.seen[0].Object == nil {
		t.Fatalf("first sync published %+v, want the written Gateway", pub.seen)
	}
	written := pub.seen[0].Object.(*gatewayv1.Gateway)
	if len(written.Status.Conditions) == 0 {
		t.Fatal("the published Gateway carries no status")
	}

	// The informer delivers the written object; a second sync must not write again.
	if err := c.informers.Gateways.Informer().GetStore().Update(written); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	if err := c.syncGateway(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if n := countVerb(client.Actions(), "update"); n != 0 {
		t.Errorf("second sync of an unchanged system made %d writes, want 0", n)
	}
	if len(pub.seen) != 2 || pub.seen[1].Object != runtime.Object(written) {
		t.Errorf("second sync should publish the cached object as confirmed; got %+v", pub.seen)
	}
}

// TestSyncWaitsForTheCacheToSeeItsOwnWrite: a key synced again before the informer
// delivered our status write (a Consul verdict, a route event) would judge the old
// status and write with the replaced resourceVersion, a certain 409. It waits for the
// write's own event instead; any other version is judged as usual.
func TestSyncWaitsForTheCacheToSeeItsOwnWrite(t *testing.T) {
	gw := gateway("infra", "gw", httpListener("http", 80, ""))
	gw.ResourceVersion = "7"
	verdict := &switchableVerdicts{}
	c, client, pub := newTestController(t, ourClass(), gw)
	c.verdicts = verdict
	key := cache.MetaObjectToName(gw)

	if err := c.syncGateway(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if n := countVerb(client.Actions(), "update"); n != 1 {
		t.Fatalf("first sync made %d status writes, want 1", n)
	}
	// Consul's verdict arrives before the informer delivered the write.
	verdict.v = contract.Verdict{Known: true, Programmed: true, Reason: "Accepted"}
	client.ClearActions()
	if err := c.syncGateway(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("a sync from the cache our write replaced made %d API calls, want 0", n)
	}
	if len(pub.seen) != 1 {
		t.Errorf("published %d confirmations, want only the write's", len(pub.seen))
	}

	// The informer delivers the written object: now the verdict is written.
	written := pub.seen[0].Object.(*gatewayv1.Gateway).DeepCopy()
	written.ResourceVersion = "8"
	if err := c.informers.Gateways.Informer().GetStore().Update(written); err != nil {
		t.Fatal(err)
	}
	if err := c.syncGateway(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if n := countVerb(client.Actions(), "update"); n != 1 {
		t.Fatalf("sync of the delivered write made %d status writes, want 1 (the verdict)", n)
	}
	sent := client.Actions()[0].(k8stesting.UpdateAction).GetObject().(*gatewayv1.Gateway)
	if sent.ResourceVersion != "8" {
		t.Errorf("the verdict was written with resourceVersion %q, want the delivered %q", sent.ResourceVersion, "8")
	}
}

// switchableVerdicts answers whatever verdict a test sets.
type switchableVerdicts struct{ v contract.Verdict }

func (s *switchableVerdicts) Verdict(gatewayv1.Kind, cache.ObjectName) contract.Verdict { return s.v }
func (s *switchableVerdicts) Binding(gatewayv1.Kind, cache.ObjectName, cache.ObjectName, gatewayv1.SectionName, gatewayv1.SectionName) contract.Binding {
	return contract.Binding{}
}
func (s *switchableVerdicts) HasSynced() bool { return true }

func TestSyncDeletedAndForeignObjects(t *testing.T) {
	foreign := gateway("infra", "foreign", httpListener("http", 80, ""))
	foreign.Spec.GatewayClassName = "other"
	c, client, pub := newTestController(t, ourClass(), otherClass(), foreign)

	if err := c.syncGateway(t.Context(), cache.ObjectName{Namespace: "infra", Name: "deleted"}); err != nil {
		t.Fatalf("a deleted Gateway is not an error: %v", err)
	}
	if err := c.syncGateway(t.Context(), cache.MetaObjectToName(foreign)); err != nil {
		t.Fatal(err)
	}
	if err := c.syncGatewayClass(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("made %d API calls for deleted and foreign objects, want 0", n)
	}
	want := []cache.ObjectName{{Namespace: "infra", Name: "deleted"}, {Namespace: "infra", Name: "foreign"}}
	if len(pub.seen) != len(want) {
		t.Fatalf("published %+v, want removals of %v", pub.seen, want)
	}
	for i, c := range pub.seen {
		if c.Key != want[i] || c.Object != nil {
			t.Errorf("confirmation %d = %+v, want a removal of %v", i, c, want[i])
		}
	}
}

func TestSyncHTTPRouteKeepsOtherControllersEntries(t *testing.T) {
	route := httpRoute("infra", "r", nil, parentRef("", "gw", ""), parentRef("", "foreign", ""))
	theirs := gatewayv1.RouteParentStatus{
		ParentRef:      parentRef("", "foreign", ""),
		ControllerName: "other.example.com/controller",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "Whatever",
			Message: "theirs", LastTransitionTime: metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))}},
	}
	route.Status.Parents = []gatewayv1.RouteParentStatus{theirs}
	c, client, _ := newTestController(t, ourClass(), gateway("infra", "gw", httpListener("http", 80, "")), route)

	if err := c.syncRoute(t.Context(), httpRouteKind(t), cache.MetaObjectToName(route)); err != nil {
		t.Fatal(err)
	}
	var written *gatewayv1.HTTPRoute
	for _, a := range client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			written = u.GetObject().(*gatewayv1.HTTPRoute)
		}
	}
	if written == nil {
		t.Fatal("no status write")
	}
	if len(written.Status.Parents) != 2 {
		t.Fatalf("parents = %+v, want theirs and ours", written.Status.Parents)
	}
	if !apiequalSemantic(written.Status.Parents[0], theirs) {
		t.Errorf("another controller's entry changed: %+v", written.Status.Parents[0])
	}
}

func countVerb(actions []k8stesting.Action, verb string) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

func apiequalSemantic(a, b any) bool { return apiequality.Semantic.DeepEqual(a, b) }

func httpRouteKind(t *testing.T) gatewayapi.RouteKind {
	t.Helper()
	kind, ok := gatewayapi.Route("HTTPRoute")
	if !ok {
		t.Fatal("HTTPRoute is not a route kind")
	}
	return kind
}

// A status write answered NotFound means the object was deleted during the sync: the
// informer's delete event settles it, so it is neither an error (no requeue, no error
// log) nor a confirmation.
func TestStatusWriteNotFoundIsNotAnError(t *testing.T) {
	gw := gateway("infra", "gw", httpListener("http", 80, ""))
	route := httpRoute("infra", "r", nil, parentRef("", "gw", ""))
	// The class has the finalizer its Gateway calls for: its sync goes on to status.
	class := ourClass()
	class.Finalizers = []string{gatewayv1.GatewayClassFinalizerGatewaysExist}
	c, client, pub := newTestController(t, class, gw, route)
	for _, resource := range []string{"gatewayclasses", "gateways", "httproutes"} {
		client.PrependReactor("update", resource, func(action k8stesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() != "status" {
				return false, nil, nil
			}
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: gatewayv1.GroupName, Resource: resource}, "gone")
		})
	}
	syncs := map[string]func() error{
		"GatewayClass": func() error { return c.syncGatewayClass(t.Context(), "ours") },
		"Gateway":      func() error { return c.syncGateway(t.Context(), cache.MetaObjectToName(gw)) },
		"HTTPRoute": func() error {
			return c.syncRoute(t.Context(), httpRouteKind(t), cache.MetaObjectToName(route))
		},
	}
	for kind, sync := range syncs {
		if err := sync(); err != nil {
			t.Errorf("%s: sync returned %v, want nil: a deleted object is not an error", kind, err)
		}
	}
	if n := countVerb(client.Actions(), "update"); n != len(syncs) {
		t.Errorf("%d status writes, want %d", n, len(syncs))
	}
	if len(pub.seen) != 0 {
		t.Errorf("published %v for objects whose write found them deleted, want nothing", pub.seen)
	}
}
