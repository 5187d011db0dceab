package sync

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// This file writes a decided status and publishes what the API server confirmed.

// confirmRoute writes a route's parents when they changed. A route none of whose
// parents is ours, before and after, is not ours: nothing is written or published.
func (c *Controller) confirmRoute(ctx context.Context, conf contract.Confirmation, route runtime.Object, parents, existing []gatewayv1.RouteParentStatus, update func() (runtime.Object, error)) error {
	if !c.hasOurParent(parents) && !c.hasOurParent(existing) {
		c.publisher.Publish(ctx, contract.Confirmation{Kind: conf.Kind, Key: objectName(route)})
		return nil
	}
	return c.confirm(ctx, conf, route, apiequality.Semantic.DeepEqual(parents, existing), update)
}

func (c *Controller) hasOurParent(parents []gatewayv1.RouteParentStatus) bool {
	for _, p := range parents {
		if p.ControllerName == c.controllerName {
			return true
		}
	}
	return false
}

// gone publishes the removal of an object that is no longer in the cache.
func (c *Controller) gone(ctx context.Context, kind gatewayv1.Kind, key cache.ObjectName) {
	c.own.forget(objectKey{kind, key})
	c.publisher.Publish(ctx, contract.Confirmation{Kind: kind, Key: key})
}

// confirm publishes current when its stored status is already the computed one, and
// otherwise writes the status and publishes what the server returned. The write
// carries the lister's resourceVersion; a Conflict is returned as is, so the worker
// requeues the key and the informer's newer object is judged next time. No GET, no
// retry here. A NotFound means the object was deleted meanwhile: not an error.
//
// A cache that has not yet seen our last write of the object is not judged at all:
// the write's own event brings the key back (see ownWrites).
func (c *Controller) confirm(ctx context.Context, conf contract.Confirmation, current runtime.Object, unchanged bool, update func() (runtime.Object, error)) error {
	conf.Key = objectName(current)
	key := objectKey{conf.Kind, conf.Key}
	cachedVersion := resourceVersion(current)
	if c.own.cacheBehind(key, cachedVersion) {
		klog.FromContext(ctx).V(4).Info("Cache has not seen our last status write yet; waiting for its event", "kind", conf.Kind, "object", conf.Key)
		return nil
	}
	if unchanged {
		conf.Object = current
		c.publish(ctx, conf)
		return nil
	}
	updated, err := update()
	metrics.StatusWrites.WithLabelValues(string(conf.Kind), metrics.Result(err)).Inc()
	if apierrors.IsNotFound(err) {
		// Deleted during the sync: its delete event brings the key back, and the sync
		// then finds it gone and publishes its removal. Nothing to retry.
		klog.FromContext(ctx).V(4).Info("Object deleted during the sync; status not written", "kind", conf.Kind, "object", conf.Key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of %s %s: %w", conf.Kind, conf.Key, err)
	}
	c.own.wrote(key, cachedVersion)
	// The syncers hold this object until the cache's copy comes; nothing reads its
	// managedFields, which the caches drop too.
	if o, err := meta.Accessor(updated); err == nil {
		o.SetManagedFields(nil)
	}
	klog.FromContext(ctx).V(2).Info("Status updated", "kind", conf.Kind, "object", conf.Key, "status", describeStatus(updated, c.controllerName))
	c.events.emit(ctx, updated, statusEvents(current, updated, c.controllerName))
	conf.Object = updated
	c.publish(ctx, conf)
	return nil
}

// publish hands a confirmation to the syncers; one that must not be served (withheld)
// goes as a removal, so nothing derived from it stays in Consul or the data plane.
func (c *Controller) publish(ctx context.Context, conf contract.Confirmation) {
	if conf.Object != nil && withheld(conf.Object) {
		klog.FromContext(ctx).V(4).Info("Confirmed object withheld from the syncers; its status says why", "kind", conf.Kind, "object", conf.Key)
		conf.Object, conf.Route = nil, nil
	}
	c.publisher.Publish(ctx, conf)
}

func resourceVersion(obj runtime.Object) string {
	o, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return o.GetResourceVersion()
}

func objectName(obj runtime.Object) cache.ObjectName {
	o, err := meta.Accessor(obj)
	if err != nil {
		return cache.ObjectName{}
	}
	return cache.MetaObjectToName(o)
}

// describeStatus is a one-line account of the status we wrote, for the log.
func describeStatus(obj runtime.Object, controller gatewayv1.GatewayController) string {
	var parts []string
	switch o := obj.(type) {
	case *gatewayv1.GatewayClass:
		parts = append(parts, describeConditions(o.Status.Conditions))
	case *gatewayv1.Gateway:
		parts = append(parts, describeConditions(o.Status.Conditions))
		for _, l := range o.Status.Listeners {
			parts = append(parts, fmt.Sprintf("listener %s: %s attachedRoutes=%d", l.Name, describeConditions(l.Conditions), l.AttachedRoutes))
		}
	case *gatewayv1.ListenerSet:
		parts = append(parts, describeConditions(o.Status.Conditions))
		for _, l := range o.Status.Listeners {
			parts = append(parts, fmt.Sprintf("listener %s: %s attachedRoutes=%d", l.Name, describeConditions(l.Conditions), l.AttachedRoutes))
		}
	default:
		if kind, ok := gatewayapi.RouteOf(obj); ok {
			parts = describeParents(kind.Parents(obj), controller)
		}
	}
	return strings.Join(parts, "; ")
}

func describeParents(parents []gatewayv1.RouteParentStatus, controller gatewayv1.GatewayController) []string {
	var parts []string
	for _, p := range parents {
		if p.ControllerName != controller {
			continue
		}
		name := string(p.ParentRef.Name)
		if p.ParentRef.SectionName != nil {
			name += "/" + string(*p.ParentRef.SectionName)
		}
		parts = append(parts, fmt.Sprintf("parent %s: %s", name, describeConditions(p.Conditions)))
	}
	if len(parts) == 0 {
		parts = append(parts, "no parent of ours")
	}
	return parts
}

func describeConditions(conds []metav1.Condition) string {
	parts := make([]string, len(conds))
	for i, c := range conds {
		parts[i] = fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason)
	}
	return strings.Join(parts, " ")
}

// syncFinalizer adds the finalizer to a class of ours that Gateways name and removes
// it from one that none names (wantedFinalizers). It reports whether it wrote the
// class: the write's event brings the class back, to be judged at its new version.
// The patch carries the cached resourceVersion, so a stale cache gets a Conflict and
// a retry.
func (c *Controller) syncFinalizer(ctx context.Context, class *gatewayv1.GatewayClass) (bool, error) {
	gateways, err := c.informers.Gateways.Informer().GetIndexer().ByIndex(informers.GatewayClassNameIndex, class.Name)
	if err != nil {
		return false, fmt.Errorf("list the Gateways of GatewayClass %s: %w", class.Name, err)
	}
	finalizers, change := wantedFinalizers(class, len(gateways))
	if !change {
		return false, nil
	}
	patch, err := finalizersPatch(class.ResourceVersion, finalizers)
	if err != nil {
		return false, err
	}
	_, err = c.client.GatewayV1().GatewayClasses().Patch(ctx, class.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("update the finalizers of GatewayClass %s: %w", class.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated GatewayClass finalizer", "class", class.Name, "finalizer", gatewaysExistFinalizer,
		"present", slices.Contains(finalizers, gatewaysExistFinalizer), "gateways", len(gateways), "deleting", class.DeletionTimestamp != nil)
	return true, nil
}
