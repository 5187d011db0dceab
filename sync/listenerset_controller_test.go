package sync

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A ListenerSet's status is written once per sync with UpdateStatus carrying the
// lister's resourceVersion; a Conflict is returned for the worker to requeue, with no
// read and no confirmation; a cached status equal to the decision is confirmed
// without a write.
func TestSyncListenerSetWritesWithListerVersion(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromSame, nil)
	set := listenerSet("infra", "extra", 1, httpListener("web", 8080, ""))
	set.ResourceVersion = "7"
	c, client, pub := newTestController(t, ourClass(), gw, set)
	key := cache.MetaObjectToName(set)
	var sent []string
	conflict := true
	client.PrependReactor("update", "listenersets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		sent = append(sent, action.(k8stesting.UpdateAction).GetObject().(*gatewayv1.ListenerSet).ResourceVersion)
		if conflict {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: gatewayv1.GroupName, Resource: "listenersets"}, set.Name, nil)
		}
		return false, nil, nil
	})

	if err := c.syncListenerSet(t.Context(), key); !apierrors.IsConflict(err) {
		t.Fatalf("syncListenerSet returned %v, want a Conflict the worker requeues", err)
	}
	if len(pub.seen) != 0 || countVerb(client.Actions(), "get") != 0 {
		t.Errorf("after a conflict: %d confirmations, %d reads; want none", len(pub.seen), countVerb(client.Actions(), "get"))
	}
	conflict = false
	if err := c.syncListenerSet(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || sent[0] != "7" || sent[1] != "7" {
		t.Errorf("UpdateStatus carried resourceVersions %v, want the lister's 7 each time", sent)
	}
	if len(pub.seen) != 1 || pub.seen[0].Kind != "ListenerSet" || pub.seen[0].Object == nil {
		t.Fatalf("confirmations %+v, want the written ListenerSet", pub.seen)
	}
	written := pub.seen[0].Object.(*gatewayv1.ListenerSet)
	if got := testenv.ConditionReason(written.Status.Conditions, "Accepted"); got != "True/Accepted" {
		t.Errorf("written Accepted %s, want True/Accepted", got)
	}

	// The cache now holds what was written: confirmed, not written again.
	cached := written.DeepCopy()
	cached.ResourceVersion = "8"
	if err := c.informers.ListenerSets.Informer().GetStore().Update(cached); err != nil {
		t.Fatal(err)
	}
	if err := c.syncListenerSet(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || len(pub.seen) != 2 || pub.seen[1].Object != cached {
		t.Errorf("status writes %v, confirmations %d; want no new write and the cached object confirmed", sent, len(pub.seen))
	}
}

// A ListenerSet whose parent is another controller's Gateway is never written.
func TestSyncListenerSetOfForeignGateway(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", httpListener("http", 80, "")), gatewayv1.NamespacesFromSame, nil)
	gw.Spec.GatewayClassName = "other"
	set := listenerSet("infra", "extra", 1, httpListener("web", 8080, ""))
	c, client, pub := newTestController(t, otherClass(), gw, set)

	if err := c.syncListenerSet(t.Context(), cache.MetaObjectToName(set)); err != nil {
		t.Fatal(err)
	}
	if n := countVerb(client.Actions(), "update"); n != 0 {
		t.Errorf("%d status writes on another controller's ListenerSet", n)
	}
	if len(pub.seen) != 1 || pub.seen[0].Object != nil {
		t.Errorf("confirmations %+v, want one removal", pub.seen)
	}
}
