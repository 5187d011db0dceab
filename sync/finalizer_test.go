package sync

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayconfig"
)

// The class sync keeps the gateway-exists finalizer on a class of ours exactly while
// a Gateway names it, with a patch conditioned on the cached resourceVersion, and
// adds none to a class being deleted.
func TestGatewayClassFinalizer(t *testing.T) {
	const finalizer = gatewayv1.GatewayClassFinalizerGatewaysExist
	deleting := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	for _, tt := range []struct {
		name       string
		finalizers []string
		deleting   bool
		gateway    bool
		want       string // the patch, "" for none
	}{
		{"a Gateway names the class", nil, false, true,
			`{"metadata":{"finalizers":["gateway-exists-finalizer.gateway.networking.k8s.io"],"resourceVersion":"7"}}`},
		{"another's finalizer stays", []string{"example.com/keep"}, false, true,
			`{"metadata":{"finalizers":["example.com/keep","gateway-exists-finalizer.gateway.networking.k8s.io"],"resourceVersion":"7"}}`},
		{"already there", []string{finalizer}, false, true, ""},
		{"no Gateway names the class", []string{"example.com/keep", finalizer}, false, false,
			`{"metadata":{"finalizers":["example.com/keep"],"resourceVersion":"7"}}`},
		{"the last Gateway went while the class is being deleted", []string{finalizer}, true, false,
			`{"metadata":{"finalizers":[],"resourceVersion":"7"}}`},
		{"none may be added to a class being deleted", []string{"example.com/keep"}, true, true, ""},
		{"none to remove", nil, false, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			class := ourClass()
			class.ResourceVersion, class.Finalizers = "7", tt.finalizers
			if tt.deleting {
				class.DeletionTimestamp = &deleting
			}
			objects := []runtime.Object{class}
			if tt.gateway {
				objects = append(objects, gateway("infra", "gw", httpListener("http", 80, "")))
			}
			c, client, _ := newTestController(t, objects...)
			if err := c.syncGatewayClass(t.Context(), class.Name); err != nil {
				t.Fatal(err)
			}
			var got string
			for _, a := range client.Actions() {
				if patch, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "gatewayclasses" {
					got = string(patch.GetPatch())
				}
			}
			if got != tt.want {
				t.Errorf("patch %s, want %s", got, tt.want)
			}
		})
	}
}

// A class being deleted holds its Gateways and their routes: nothing is written or
// published for them, whatever the class's parameters now say.
func TestClassBeingDeletedHoldsItsGateways(t *testing.T) {
	class := ourClass()
	class.Finalizers = []string{gatewayv1.GatewayClassFinalizerGatewaysExist}
	class.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	gw := gateway("infra", "gw", httpListener("http", 80, ""))
	route := httpRoute("infra", "r", nil, parentRef("", "gw", ""))
	c, client, pub := newTestController(t, class, gw, route)
	if err := c.syncGateway(t.Context(), cache.MetaObjectToName(gw)); err != nil {
		t.Fatal(err)
	}
	if err := c.syncRoute(t.Context(), httpRouteKind(t), cache.MetaObjectToName(route)); err != nil {
		t.Fatal(err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("%d requests (%v), want none", n, client.Actions())
	}
	if len(pub.seen) != 0 {
		t.Errorf("published %v, want nothing", pub.seen)
	}
	status := gatewayClassStatus(class, gatewayconfig.Resolved{}, "v1.6.3", consullimits.Consul115, metav1.Now())
	if msg := conditionMessage(status.Conditions, "Accepted"); !strings.Contains(msg, "being deleted") {
		t.Errorf("Accepted %q does not say the class is being deleted", msg)
	}
}

func conditionMessage(conds []metav1.Condition, condType string) string {
	for _, c := range conds {
		if c.Type == condType {
			return c.Message
		}
	}
	return ""
}
