package sync

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// conditionCount is one series of the objects gauge: a kind's objects (a route's
// parents of ours) with a condition of a type in a status, for a reason.
type conditionCount struct {
	Kind                 gatewayv1.Kind
	Type, Status, Reason string
}

// objectConditions counts the objects of our classes by condition, as the caches hold
// their status: what the API server confirmed, not what a sync is about to write. It
// runs at each scrape of /metrics (servedObjectConditions), a walk of the caches that
// costs the syncs nothing. Labels stay bounded: kinds and condition types are fixed,
// and every reason counted is one this controller wrote.
func (c *Controller) objectConditions() (map[conditionCount]int, error) {
	counts := map[conditionCount]int{}
	add := func(kind gatewayv1.Kind, conds []metav1.Condition) {
		for _, cond := range conds {
			counts[conditionCount{Kind: kind, Type: cond.Type, Status: string(cond.Status), Reason: cond.Reason}]++
		}
	}
	ours, err := c.countClasses(add)
	if err != nil {
		return nil, err
	}
	gateways, err := c.gateways.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, gw := range gateways {
		if ours[gw.Spec.GatewayClassName] {
			add(gatewayapi.GatewayKind, gw.Status.Conditions)
		}
	}
	for _, obj := range c.listenerSets.List() {
		set, ok := obj.(*gatewayv1.ListenerSet)
		if !ok {
			continue
		}
		if _, _, parentOurs, err := c.parentGatewayOf(set); err == nil && parentOurs {
			add(gatewayapi.ListenerSetKind, set.Status.Conditions)
		}
	}
	for _, kind := range gatewayapi.Routes {
		for _, obj := range c.routeIndexers[kind.Kind].List() {
			route, ok := obj.(runtime.Object)
			if !ok {
				continue
			}
			for _, p := range kind.Parents(route) {
				if p.ControllerName == c.controllerName {
					add(kind.Kind, p.Conditions)
				}
			}
		}
	}
	return counts, nil
}

// countClasses counts our GatewayClasses and returns their names.
func (c *Controller) countClasses(add func(gatewayv1.Kind, []metav1.Condition)) (map[gatewayv1.ObjectName]bool, error) {
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	ours := map[gatewayv1.ObjectName]bool{}
	for _, class := range classes {
		if class.Spec.ControllerName != c.controllerName {
			continue
		}
		ours[gatewayv1.ObjectName(class.Name)] = true
		add(gatewayapi.GatewayClassKind, class.Status.Conditions)
	}
	return ours, nil
}
