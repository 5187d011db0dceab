package contract

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestAcceptedGateways(t *testing.T) {
	key := cache.ObjectName{Namespace: "team", Name: "edge"}
	gateway := func(accepted metav1.ConditionStatus, observed int64) *gatewayv1.Gateway {
		return &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: 2},
			Status:     gatewayv1.GatewayStatus{Conditions: []metav1.Condition{{Type: "Accepted", Status: accepted, ObservedGeneration: observed}}},
		}
	}
	g := NewAcceptedGateways()
	if _, ok := g.Record(Confirmation{Kind: "HTTPRoute", Key: key}); ok {
		t.Error("a route's confirmation was recorded")
	}
	if _, known := g.Get(key); known {
		t.Error("known before any Gateway confirmation")
	}
	for _, tc := range []struct {
		name         string
		object       *gatewayv1.Gateway
		wantAccepted bool
	}{
		{"accepted at its generation", gateway(metav1.ConditionTrue, 2), true},
		{"accepted at an older generation", gateway(metav1.ConditionTrue, 1), false},
		{"not accepted", gateway(metav1.ConditionFalse, 2), false},
		{"deleted", nil, false},
	} {
		c := Confirmation{Kind: "Gateway", Key: key}
		if tc.object != nil {
			c.Object = tc.object
		}
		if got, ok := g.Record(c); !ok || got != key {
			t.Fatalf("%s: Record = %v, %v", tc.name, got, ok)
		}
		gw, known := g.Get(key)
		if !known || (gw != nil) != tc.wantAccepted {
			t.Errorf("%s: Get = %v, known %v; want accepted %v", tc.name, gw != nil, known, tc.wantAccepted)
		}
	}
	g.ForgetIfGone(key)
	if _, known := g.Get(key); known {
		t.Error("a Gateway that is not accepted is still known after ForgetIfGone")
	}
	g.Record(Confirmation{Kind: "Gateway", Key: key, Object: gateway(metav1.ConditionTrue, 2)})
	g.ForgetIfGone(key)
	if gw, _ := g.Get(key); gw == nil {
		t.Error("ForgetIfGone dropped an accepted Gateway")
	}
	other := cache.ObjectName{Namespace: "team", Name: "old"}
	g.Know(other)
	if got := g.Known(); len(got) != 2 {
		t.Errorf("Known = %v, want edge and old", got)
	}
}
