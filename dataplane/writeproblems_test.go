package dataplane

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// acceptedGateway is a Gateway of class "ours" whose Accepted=True status the API
// server confirmed.
func acceptedGateway(name string) *gatewayv1.Gateway {
	gw := testGateway(name, listener("http", 80, gatewayv1.HTTPProtocolType))
	gw.Spec.GatewayClassName = "ours"
	gw.Generation = 3
	gw.Status.Conditions = []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, ObservedGeneration: 3}}
	return gw
}

// problemHarness is a Controller on a fake API server, with a Gateway confirmed to it
// and the Gateways whose problem it said changed.
type problemHarness struct {
	c       *Controller
	client  *fake.Clientset
	gw      *gatewayv1.Gateway
	changed []cache.ObjectName
}

func newProblemHarness(t *testing.T, gw *gatewayv1.Gateway) *problemHarness {
	t.Helper()
	ctx := t.Context()
	h := &problemHarness{client: fake.NewClientset(), gw: gw}
	owned := informers.NewOwned(h.client, ManagedSelector, 0)
	c, err := NewController(ctx, Config{
		Client: h.client, ControllerName: us, FieldManager: "test",
		Gateways: gatewayLister(gw), Classes: classLister(class("ours", us)),
		Owned: owned, Defaults: testDefaults,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.OnProblemChange(func(key cache.ObjectName) { h.changed = append(h.changed, key) })
	owned.StartWithContext(ctx)
	t.Cleanup(owned.Shutdown)
	if !cache.WaitForCacheSync(ctx.Done(), owned.HasSynced()...) {
		t.Fatal("owned caches did not sync")
	}
	c.Publish(ctx, contract.Confirmation{Kind: "Gateway", Key: cache.MetaObjectToName(gw), Object: gw})
	h.c = c
	return h
}

// sync runs one sync of the Gateway, which must not ask to be retried or looked at
// again.
func (h *problemHarness) sync(t *testing.T) {
	t.Helper()
	requeues, err := h.c.sync(t.Context(), cache.MetaObjectToName(h.gw))
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	if len(requeues) != 0 {
		t.Fatalf("sync asked for %v to be queued again", requeues)
	}
}

// writes are the apply patches the fake API server received, as "<resource> <name>".
func (h *problemHarness) writes() []string {
	var out []string
	for _, a := range h.client.Actions() {
		if p, ok := a.(k8stesting.PatchActionImpl); ok {
			out = append(out, p.Resource.Resource+" "+p.Name)
		}
	}
	return out
}

// A Gateway whose name its labels cannot hold is never written, and its state says
// why; no event is needed for that, State computes it.
func TestUnfitGatewayIsNotWritten(t *testing.T) {
	h := newProblemHarness(t, acceptedGateway(strings.Repeat("a", 100)))
	h.sync(t)
	if w := h.writes(); len(w) != 0 {
		t.Errorf("wrote %v for a Gateway that cannot be deployed", w)
	}
	state := h.c.State(h.gw)
	if !strings.Contains(state.Invalid, "label gateway.networking.k8s.io/gateway-name=") {
		t.Errorf("State.Invalid = %q, want the gateway-name label's problem", state.Invalid)
	}
}

// An object the API server refuses as invalid is not retried: the Gateway's state
// says what the server answered, the status pipeline is told once, and a write that
// succeeds later clears it and tells again.
func TestRefusedObjectBecomesTheGatewaysProblem(t *testing.T) {
	h := newProblemHarness(t, acceptedGateway("web"))
	name := Name(h.gw)
	refusing := true
	h.client.PrependReactor("patch", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !refusing {
			return false, nil, nil
		}
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, name,
			field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name, "a DNS-1035 label must start with a letter")})
	})
	key := cache.MetaObjectToName(h.gw)

	h.sync(t)
	state := h.c.State(h.gw)
	if want := `The API server refused a gateway object: apply Service apps/web-ours: Service "web-ours" is invalid: metadata.name: Invalid value: "web-ours": a DNS-1035 label must start with a letter`; state.Invalid != want {
		t.Errorf("State.Invalid = %q\nwant %q", state.Invalid, want)
	}
	if state.Problem != "" {
		t.Errorf("State.Problem = %q, want none", state.Problem)
	}
	h.sync(t)
	if len(h.changed) != 1 || h.changed[0] != key {
		t.Errorf("problem changes told %v, want %v once", h.changed, key)
	}

	refusing = false
	h.sync(t)
	if state := h.c.State(h.gw); state.Invalid != "" {
		t.Errorf("State.Invalid = %q after the Service was written, want none", state.Invalid)
	}
	if len(h.changed) != 2 {
		t.Errorf("problem changes told %v, want the clearing too", h.changed)
	}
}

// A Gateway whose Service name another object holds deploys nothing, and its sync asks
// for it to be looked at again: no cache of ours tells when the other object goes.
func TestTakenNameIsLookedAtAgain(t *testing.T) {
	h := newProblemHarness(t, acceptedGateway("web"))
	key := cache.MetaObjectToName(h.gw)
	taken := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: h.gw.Namespace, Name: Name(h.gw)}}
	if _, err := h.client.CoreV1().Services(h.gw.Namespace).Create(t.Context(), taken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	requeues, err := h.c.sync(t.Context(), key)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	if diff := cmp.Diff([]workqueue.Requeue[cache.ObjectName]{{Key: key, After: conflictRecheck}}, requeues); diff != "" {
		t.Errorf("queued again (-want +got):\n%s", diff)
	}
	if w := h.writes(); len(w) != 0 {
		t.Errorf("wrote %v while a name is taken", w)
	}
	if state := h.c.State(h.gw); !strings.Contains(state.Problem, "Service") {
		t.Errorf("State.Problem = %q, want the taken Service named", state.Problem)
	}
}
