package dataplane

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
)

// syncUnconfirmed handles a Gateway without an accepted confirmation. While it is ours
// (not accepted, or not judged yet) what was deployed stays; once it is not ours, what
// this controller deployed for it goes: another implementation serves it now. A
// deleted Gateway's objects are the garbage collector's.
func (c *Controller) syncUnconfirmed(ctx context.Context, key cache.ObjectName) error {
	gw, err := c.cfg.Gateways.Gateways(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get Gateway %s from cache: %w", key, err)
	}
	ours, err := c.classIs(string(gw.Spec.GatewayClassName), false)
	if err != nil {
		return err
	}
	if ours {
		klog.FromContext(ctx).V(4).Info("Gateway not accepted (any more); what was deployed stays", "gateway", key)
		return nil
	}
	return c.deleteObjects(ctx, gw)
}

// classIs reports whether the named GatewayClass is ours; a class that does not exist
// is ours only when ifMissing says so.
func (c *Controller) classIs(name string, ifMissing bool) (bool, error) {
	class, err := c.cfg.Classes.Get(name)
	if apierrors.IsNotFound(err) {
		return ifMissing, nil
	}
	if err != nil {
		return false, fmt.Errorf("get GatewayClass %s: %w", name, err)
	}
	return class.Spec.ControllerName == c.cfg.ControllerName, nil
}

// deleteObjects deletes the Deployment, Service and ServiceAccount this controller
// deployed for gw, whatever class name they were named after; pods first stop.
func (c *Controller) deleteObjects(ctx context.Context, gw *gatewayv1.Gateway) error {
	return c.deleteOwned(ctx, gw, true)
}

// deleteOwned deletes the Deployment, Service and PodDisruptionBudget this controller
// deployed for gw, and its ServiceAccount too when withServiceAccount.
func (c *Controller) deleteOwned(ctx context.Context, gw *gatewayv1.Gateway, withServiceAccount bool) error {
	selector := PodSelector(cache.MetaObjectToName(gw))
	ns := gw.Namespace
	// A later apply must not take the cache's lack of an object for its own lag.
	defer c.forgetApplied(cache.MetaObjectToName(gw))
	errs := []error{
		deleteOurs(ctx, c, gw, "Deployment", selector,
			c.cfg.Owned.Deployments.Lister().Deployments(ns).List,
			c.cfg.Client.AppsV1().Deployments(ns).Delete),
		deleteOurs(ctx, c, gw, "Service", selector,
			c.cfg.Owned.Services.Lister().Services(ns).List,
			c.cfg.Client.CoreV1().Services(ns).Delete),
		deleteOurs(ctx, c, gw, "PodDisruptionBudget", selector,
			c.cfg.Owned.PodDisruptionBudgets.Lister().PodDisruptionBudgets(ns).List,
			c.cfg.Client.PolicyV1().PodDisruptionBudgets(ns).Delete),
	}
	if withServiceAccount {
		errs = append(errs, deleteOurs(ctx, c, gw, "ServiceAccount", selector,
			c.cfg.Owned.ServiceAccounts.Lister().ServiceAccounts(ns).List,
			c.cfg.Client.CoreV1().ServiceAccounts(ns).Delete))
	}
	return errors.Join(errs...)
}

// deleteOurs deletes each cached object of kind the selector finds that deployedByUs
// says is ours. The preconditions make sure the object deleted is the one judged: a
// replacement (another UID) or a write since (another controller of the same
// ManagedByValue taking it over) makes the delete fail, and the next sync judges again.
func deleteOurs[T metav1.Object](ctx context.Context, c *Controller, gw *gatewayv1.Gateway, kind string, selector labels.Selector,
	list func(labels.Selector) ([]T, error),
	del func(ctx context.Context, name string, opts metav1.DeleteOptions) error,
) error {
	objects, err := list(selector)
	if err != nil {
		return fmt.Errorf("list %ss of Gateway %s/%s from cache: %w", kind, gw.Namespace, gw.Name, err)
	}
	logger := klog.FromContext(ctx)
	var errs []error
	for _, obj := range objects {
		ours, err := c.deployedByUs(obj, gw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ours {
			logger.V(4).Info("Gateway object not ours; left alone", "kind", kind, "object", klog.KObj(obj), "gateway", klog.KObj(gw))
			continue
		}
		logger.V(4).Info("Gateway is no longer ours; deleting what was deployed for it", "kind", kind, "object", klog.KObj(obj), "gateway", klog.KObj(gw), "class", gw.Spec.GatewayClassName)
		uid, version := obj.GetUID(), obj.GetResourceVersion()
		err = del(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &version}})
		if apierrors.IsNotFound(err) {
			// Gone already (a sync before this one deleted it, and the cache has not
			// caught up): what was wanted, and no deletion of ours to count.
			logger.V(4).Info("Gateway object already gone", "kind", kind, "object", klog.KObj(obj), "gateway", klog.KObj(gw))
			continue
		}
		metrics.GatewayObjectDeletions.WithLabelValues(kind, metrics.Result(err)).Inc()
		if err != nil {
			errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err))
			continue
		}
		logger.V(2).Info("Deleted gateway object", "kind", kind, "object", klog.KObj(obj), "gateway", klog.KObj(gw))
	}
	return errors.Join(errs...)
}

// deployedByUs reports whether obj is what this controller deployed for gw: controlled
// by gw (its UID), managed by this controller's kind, and deployed by this instance.
// Instances of other controller names share the managed-by label, so the instance is
// told by controllerAnnotation, or, on an object without it (applied by a build that
// did not set it), by the class label: a class of ours, or one that no longer exists
// (no one serves it). An object of a class another controller has is that
// controller's.
func (c *Controller) deployedByUs(obj metav1.Object, gw *gatewayv1.Gateway) (bool, error) {
	if !metav1.IsControlledBy(obj, gw) || obj.GetLabels()[ManagedByLabel] != ManagedByValue {
		return false, nil
	}
	if name, ok := obj.GetAnnotations()[controllerAnnotation]; ok {
		return gatewayv1.GatewayController(name) == c.cfg.ControllerName, nil
	}
	class := obj.GetLabels()[GatewayClassLabel]
	if class == "" {
		return false, nil
	}
	return c.classIs(class, true)
}

// forgetApplied drops the memory of a Gateway's applies: what they wrote is gone.
func (c *Controller) forgetApplied(gateway cache.ObjectName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.applied, gateway)
}
