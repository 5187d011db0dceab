package dataplane

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// publishListenerSet records a confirmed ListenerSet and re-applies its parent
// Gateway, the one before and the one now when the ListenerSet moved.
func (c *Controller) publishListenerSet(conf contract.Confirmation) {
	set, ok := conf.Object.(*gatewayv1.ListenerSet)
	c.mu.Lock()
	var parents []cache.ObjectName
	if old := c.listenerSets[conf.Key]; old != nil {
		if parent, ok := gatewayapi.ListenerSetParent(old); ok {
			parents = append(parents, parent)
		}
	}
	if ok && contract.ListenerSetAcceptedAtGeneration(set) {
		c.listenerSets[conf.Key] = set
		if parent, ok := gatewayapi.ListenerSetParent(set); ok {
			parents = append(parents, parent)
		}
	} else {
		delete(c.listenerSets, conf.Key)
	}
	c.mu.Unlock()
	for _, p := range parents {
		c.queue.Add(p)
	}
}

// listenerSetPorts are the ports of the accepted listeners of the ListenerSets whose
// parent is the Gateway gw.
func (c *Controller) listenerSetPorts(gw cache.ObjectName) []gatewayv1.PortNumber {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ports []gatewayv1.PortNumber
	for _, set := range c.listenerSets {
		if parent, ok := gatewayapi.ListenerSetParent(set); !ok || parent != gw {
			continue
		}
		for _, l := range set.Spec.Listeners {
			if listenerEntryAccepted(set.Status.Listeners, l.Name) {
				ports = append(ports, l.Port)
			}
		}
	}
	return ports
}

func listenerEntryAccepted(statuses []gatewayv1.ListenerEntryStatus, name gatewayv1.SectionName) bool {
	for _, s := range statuses {
		if s.Name == name {
			return meta.IsStatusConditionTrue(s.Conditions, string(gatewayv1.ListenerConditionAccepted))
		}
	}
	return false
}
