package dataplane

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

func listenerSet(name, parent string, accepted bool, listeners map[gatewayv1.SectionName]gatewayv1.PortNumber, acceptedListeners ...gatewayv1.SectionName) *gatewayv1.ListenerSet {
	set := &gatewayv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Generation: 2}}
	set.Spec.ParentRef = gatewayv1.ParentGatewayReference{Name: gatewayv1.ObjectName(parent)}
	status := metav1.ConditionFalse
	if accepted {
		status = metav1.ConditionTrue
	}
	set.Status.Conditions = []metav1.Condition{{Type: "Accepted", Status: status, ObservedGeneration: 2}}
	for name, port := range listeners {
		set.Spec.Listeners = append(set.Spec.Listeners, gatewayv1.ListenerEntry{Name: name, Port: port})
		cond := metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse}
		if slices.Contains(acceptedListeners, name) {
			cond.Status = metav1.ConditionTrue
		}
		set.Status.Listeners = append(set.Status.Listeners, gatewayv1.ListenerEntryStatus{Name: name, Conditions: []metav1.Condition{cond}})
	}
	return set
}

// The pods and Service of a Gateway declare the ports of the accepted listeners of its
// accepted ListenerSets; a ListenerSet's confirmation re-applies its parent.
func TestListenerSetPorts(t *testing.T) {
	c := &Controller{queue: workqueue.New[cache.ObjectName]("test"), listenerSets: map[cache.ObjectName]*gatewayv1.ListenerSet{}}
	publish := func(set *gatewayv1.ListenerSet) {
		c.Publish(t.Context(), contract.Confirmation{Kind: "ListenerSet", Key: cache.MetaObjectToName(set), Object: set})
	}
	publish(listenerSet("extra", "edge", true, map[gatewayv1.SectionName]gatewayv1.PortNumber{"alt": 8443, "taken": 9000}, "alt"))
	publish(listenerSet("refused", "edge", false, map[gatewayv1.SectionName]gatewayv1.PortNumber{"x": 7000}, "x"))
	publish(listenerSet("other", "elsewhere", true, map[gatewayv1.SectionName]gatewayv1.PortNumber{"y": 6000}, "y"))
	edge := cache.ObjectName{Namespace: "apps", Name: "edge"}
	if got := c.listenerSetPorts(edge); !slices.Equal(got, []gatewayv1.PortNumber{8443}) {
		t.Errorf("ports of edge's ListenerSets %v, want [8443]: only accepted listeners of accepted ListenerSets", got)
	}
	if c.queue.Len() != 2 {
		t.Errorf("%d Gateways queued, want edge and elsewhere", c.queue.Len())
	}
	// The ListenerSet deleted: its ports go, and its Gateway is applied again.
	for c.queue.Len() > 0 {
		key, _ := c.queue.Get()
		c.queue.Done(key)
		c.queue.Forget(key)
	}
	c.Publish(t.Context(), contract.Confirmation{Kind: "ListenerSet", Key: cache.ObjectName{Namespace: "apps", Name: "extra"}})
	if got := c.listenerSetPorts(edge); len(got) != 0 {
		t.Errorf("ports after the delete %v, want none", got)
	}
	if key, _ := c.queue.Get(); key != edge {
		t.Errorf("queued %v after the delete, want %v", key, edge)
	}
}
