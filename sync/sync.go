package sync

import (
	"context"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayconfig"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// This file is the sync of each kind: read the object from the cache, decide its
// status, and confirm it (write.go).

func (c *Controller) now() metav1.Time {
	return metav1.NewTime(c.clock.Now().Truncate(time.Second))
}

func (c *Controller) syncGatewayClass(ctx context.Context, name string) error {
	key := cache.ObjectName{Name: name}
	class, err := c.classes.Get(name)
	if apierrors.IsNotFound(err) {
		c.gone(ctx, gatewayapi.GatewayClassKind, key)
		return nil
	}
	if err != nil {
		return err
	}
	if class.Spec.ControllerName != c.controllerName {
		return nil // another controller's class: never touched, never published
	}
	if wrote, err := c.syncFinalizer(ctx, class); wrote || err != nil {
		return err
	}
	params, err := gatewayconfig.OfClass(c.configs, class)
	if err != nil {
		return err
	}
	status := gatewayClassStatus(class, params, c.bundleVersion(), c.caps, c.now())
	return c.confirm(ctx, contract.Confirmation{Kind: gatewayapi.GatewayClassKind}, class, apiequality.Semantic.DeepEqual(status, class.Status), func() (runtime.Object, error) {
		update := class.DeepCopy()
		update.Status = status
		return c.client.GatewayV1().GatewayClasses().UpdateStatus(ctx, update, metav1.UpdateOptions{})
	})
}

func (c *Controller) syncGateway(ctx context.Context, key cache.ObjectName) error {
	gw, err := c.gateways.Gateways(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.gone(ctx, gatewayapi.GatewayKind, key)
		return nil
	}
	if err != nil {
		return err
	}
	class, ours, err := c.ourClass(string(gw.Spec.GatewayClassName))
	if err != nil {
		return err
	}
	if !ours {
		// Not ours (any more): what was derived from it must go, its status is not ours
		// to write.
		c.publisher.Publish(ctx, contract.Confirmation{Kind: gatewayapi.GatewayKind, Key: key})
		return nil
	}
	if heldClass(class) {
		klog.FromContext(ctx).V(4).Info("GatewayClass is being deleted; the Gateway is held as it is", "gateway", key, "class", class.Name)
		return nil
	}
	status, err := c.gatewayStatus(gw, class, c.now())
	if err != nil {
		return err
	}
	return c.confirm(ctx, contract.Confirmation{Kind: gatewayapi.GatewayKind}, gw, apiequality.Semantic.DeepEqual(status, gw.Status), func() (runtime.Object, error) {
		update := gw.DeepCopy()
		update.Status = status
		return c.client.GatewayV1().Gateways(gw.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
	})
}

// syncListenerSet judges one ListenerSet. Only a ListenerSet whose parent is a Gateway
// of ours is ours: another's is never touched, and one that stops being ours keeps the
// status it has, as a route does for a parent that is not ours.
func (c *Controller) syncListenerSet(ctx context.Context, key cache.ObjectName) error {
	obj, exists, err := c.listenerSets.GetByKey(key.String())
	if err != nil {
		return fmt.Errorf("get ListenerSet %s from cache: %w", key, err)
	}
	if !exists {
		c.gone(ctx, gatewayapi.ListenerSetKind, key)
		return nil
	}
	set, ok := obj.(*gatewayv1.ListenerSet)
	if !ok {
		return fmt.Errorf("ListenerSet cache holds %T", obj)
	}
	gw, class, ours, err := c.parentGatewayOf(set)
	if err != nil {
		return err
	}
	if !ours {
		c.publisher.Publish(ctx, contract.Confirmation{Kind: gatewayapi.ListenerSetKind, Key: key})
		return nil
	}
	if heldClass(class) {
		klog.FromContext(ctx).V(4).Info("GatewayClass is being deleted; the ListenerSet is held as it is", "listenerSet", key, "class", class.Name)
		return nil
	}
	status, err := c.listenerSetStatus(set, gw, class, c.now())
	if err != nil {
		return err
	}
	return c.confirm(ctx, contract.Confirmation{Kind: gatewayapi.ListenerSetKind}, set, apiequality.Semantic.DeepEqual(status, set.Status), func() (runtime.Object, error) {
		update := set.DeepCopy()
		update.Status = status
		return c.client.GatewayV1().ListenerSets(set.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
	})
}

// syncRoute judges one route of kind.
func (c *Controller) syncRoute(ctx context.Context, kind gatewayapi.RouteKind, key cache.ObjectName) error {
	obj, exists, err := c.routeIndexers[kind.Kind].GetByKey(key.String())
	if err != nil {
		return fmt.Errorf("get %s %s from cache: %w", kind.Kind, key, err)
	}
	if !exists {
		c.gone(ctx, kind.Kind, key)
		return nil
	}
	r, ok := obj.(gatewayapi.Object)
	if !ok {
		return fmt.Errorf("%s cache holds %T", kind.Kind, obj)
	}
	held, err := c.routeHeld(r)
	if err != nil || held {
		if held {
			klog.FromContext(ctx).V(4).Info("A parent's GatewayClass is being deleted; the route is held as it is", "kind", kind.Kind, "route", key)
		}
		return err
	}
	existing := kind.Parents(r)
	computed, decision, err := c.routeStatus(ctx, r, existing, r.GetGeneration())
	if err != nil {
		return err
	}
	return c.confirmRoute(ctx, contract.Confirmation{Kind: kind.Kind, Route: decision}, r, computed, existing, func() (runtime.Object, error) {
		return kind.UpdateParents(ctx, c.client, r, computed)
	})
}

// routeHeld reports whether a parent the route names is held (heldClass): the route
// is then held whole, its other parents' verdicts too.
func (c *Controller) routeHeld(route gatewayapi.Object) (bool, error) {
	kind, ok := gatewayapi.RouteOf(route)
	if !ok {
		return false, fmt.Errorf("unexpected route object %T", route)
	}
	spec, err := kind.Spec(route)
	if err != nil {
		return false, err
	}
	return c.heldParent(spec.ParentRefs, route.GetNamespace())
}

// routeStatus computes a route's status.parents and logs each parent that did not
// accept it.
func (c *Controller) routeStatus(ctx context.Context, obj metav1.Object, existing []gatewayv1.RouteParentStatus, generation int64) ([]gatewayv1.RouteParentStatus, *decision.Route, error) {
	view, rules, err := c.viewRoute(obj)
	if err != nil {
		return nil, nil, err
	}
	parents, decision, err := c.routeParentStatuses(view, rules, existing, generation, c.now())
	if err != nil {
		return nil, nil, err
	}
	logger := klog.FromContext(ctx)
	if logger.V(4).Enabled() {
		for _, p := range parents {
			accepted := findCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted))
			if p.ControllerName == c.controllerName && accepted != nil && accepted.Status != metav1.ConditionTrue {
				logger.V(4).Info("Route not accepted by parent", "kind", view.kind, "route", klog.KObj(obj),
					"parent", p.ParentRef.Name, "sectionName", p.ParentRef.SectionName, "reason", accepted.Reason, "message", accepted.Message)
			}
		}
	}
	return parents, &decision, nil
}
