package dataplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// applyObjects applies the Gateway's objects. An object of their name that another
// owner controls, or one the API server refuses as invalid, is nothing a retry fixes:
// it becomes the Gateway's write problem, and the objects' own events, a change of the
// Gateway or a resync bring the key back. An admission policy's refusal is both: the
// Gateway's problem, and retried. Other errors are returned, to be retried.
//
// A conflict deploys nothing: while any of the names is someone else's, no object is
// applied and the Gateway's own Deployment and Service go, so no pod runs as, or
// serves for, another's object (a foreign ServiceAccount would give the pods its
// permissions, and its tokens the Gateway's identity).
//
// A Gateway in conflict is to be looked at again after conflictRecheck: the object in
// the way carries no label of ours, so no cache tells when it goes.
func (c *Controller) applyObjects(ctx context.Context, key cache.ObjectName, gw *gatewayv1.Gateway, objects Objects) ([]workqueue.Requeue[cache.ObjectName], error) {
	problem, err := c.checkOwners(ctx, gw, objects)
	if err != nil || problem.Problem != "" {
		c.setWriteProblem(key, problem)
		if problem.Problem == "" {
			return nil, err
		}
		klog.FromContext(ctx).V(4).Info("Gateway object names are taken; nothing is deployed", "gateway", key, "problem", problem.Problem)
		err = errors.Join(err, c.withdraw(ctx, gw))
		return []workqueue.Requeue[cache.ObjectName]{{Key: key, After: conflictRecheck}}, err
	}
	return nil, c.applyAll(ctx, key, gw, objects)
}

// conflictRecheck is how often the names of a Gateway in conflict are read again: a
// few live reads per Gateway in conflict, and a deployment soon after the name is
// free.
const conflictRecheck = 10 * time.Second

// checkOwners reports, as the Gateway's write problem, each object of its names that
// exists and that the Gateway does not control.
func (c *Controller) checkOwners(ctx context.Context, gw *gatewayv1.Gateway, objects Objects) (contract.DeploymentState, error) {
	ns := gw.Namespace
	return classifyWriteErrors(
		checkOwner(ctx, gw, "ServiceAccount", *objects.ServiceAccount.Name,
			c.cfg.Owned.ServiceAccounts.Lister().ServiceAccounts(ns).Get, c.cfg.Client.CoreV1().ServiceAccounts(ns)),
		checkOwner(ctx, gw, "Deployment", *objects.Deployment.Name,
			c.cfg.Owned.Deployments.Lister().Deployments(ns).Get, c.cfg.Client.AppsV1().Deployments(ns)),
		checkOwner(ctx, gw, "Service", *objects.Service.Name,
			c.cfg.Owned.Services.Lister().Services(ns).Get, c.cfg.Client.CoreV1().Services(ns)),
		checkOwner(ctx, gw, "PodDisruptionBudget", *objects.PodDisruptionBudget.Name,
			c.cfg.Owned.PodDisruptionBudgets.Lister().PodDisruptionBudgets(ns).Get, c.cfg.Client.PolicyV1().PodDisruptionBudgets(ns)),
	)
}

// checkOwner returns a notOwnedError when an object of the name exists and the
// Gateway does not control it; the cache holds only labelled objects, so one it lacks
// is read live.
func checkOwner[T metav1.Object](ctx context.Context, gw *gatewayv1.Gateway, kind, name string,
	cached func(name string) (T, error), live objectGetter[T],
) error {
	existing, err := cached(name)
	switch {
	case apierrors.IsNotFound(err):
		_, err = absentFromCache(ctx, gw, kind, name, live)
		return err
	case err != nil:
		return fmt.Errorf("get %s %s/%s from cache: %w", kind, gw.Namespace, name, err)
	case !metav1.IsControlledBy(existing, gw):
		return notOwnedError{kind: kind, namespace: gw.Namespace, name: name, gateway: gw.Name}
	}
	return nil
}

// applyAll applies the Gateway's objects, once no name is taken.
func (c *Controller) applyAll(ctx context.Context, key cache.ObjectName, gw *gatewayv1.Gateway, objects Objects) error {
	problem, err := classifyWriteErrors(
		c.applyServiceAccount(ctx, gw, objects.ServiceAccount),
		c.applyDeployment(ctx, gw, objects.Deployment),
		c.applyService(ctx, gw, objects.Service),
		c.applyPodDisruptionBudget(ctx, gw, objects.PodDisruptionBudget),
	)
	c.setWriteProblem(key, problem)
	return err
}

func (c *Controller) applyServiceAccount(ctx context.Context, gw *gatewayv1.Gateway, desired *corev1ac.ServiceAccountApplyConfiguration) error {
	return apply(ctx, c, gw, "ServiceAccount", desired, *desired.Name,
		c.cfg.Owned.ServiceAccounts.Lister().ServiceAccounts(gw.Namespace).Get,
		corev1ac.ExtractServiceAccount,
		c.cfg.Client.CoreV1().ServiceAccounts(gw.Namespace).Apply,
		c.cfg.Client.CoreV1().ServiceAccounts(gw.Namespace))
}

func (c *Controller) applyDeployment(ctx context.Context, gw *gatewayv1.Gateway, desired *appsv1ac.DeploymentApplyConfiguration) error {
	return apply(ctx, c, gw, "Deployment", desired, *desired.Name,
		c.cfg.Owned.Deployments.Lister().Deployments(gw.Namespace).Get,
		appsv1ac.ExtractDeployment,
		c.cfg.Client.AppsV1().Deployments(gw.Namespace).Apply,
		c.cfg.Client.AppsV1().Deployments(gw.Namespace))
}

func (c *Controller) applyService(ctx context.Context, gw *gatewayv1.Gateway, desired *corev1ac.ServiceApplyConfiguration) error {
	return apply(ctx, c, gw, "Service", desired, *desired.Name,
		c.cfg.Owned.Services.Lister().Services(gw.Namespace).Get,
		corev1ac.ExtractService,
		c.cfg.Client.CoreV1().Services(gw.Namespace).Apply,
		c.cfg.Client.CoreV1().Services(gw.Namespace))
}

func (c *Controller) applyPodDisruptionBudget(ctx context.Context, gw *gatewayv1.Gateway, desired *policyv1ac.PodDisruptionBudgetApplyConfiguration) error {
	return apply(ctx, c, gw, "PodDisruptionBudget", desired, *desired.Name,
		c.cfg.Owned.PodDisruptionBudgets.Lister().PodDisruptionBudgets(gw.Namespace).Get,
		policyv1ac.ExtractPodDisruptionBudget,
		c.cfg.Client.PolicyV1().PodDisruptionBudgets(gw.Namespace).Apply,
		c.cfg.Client.PolicyV1().PodDisruptionBudgets(gw.Namespace))
}

// apply writes desired with server-side apply unless the cached object already holds
// it: the fields this controller manages in the cached object (extract) are compared
// with desired, so a converged object costs no request, while a field someone else
// changed (and so took over) makes the apply take it back. Fields the controller does
// not set (an autoscaler's replicas, another controller's annotations) are not in
// desired and never fought over.
//
// An existing object of the name that this Gateway does not control is never written.
// The cache holds only objects with this controller's label; see absentFromCache for
// one it lacks.
func apply[T metav1.Object, AC any](ctx context.Context, c *Controller, gw *gatewayv1.Gateway, kind string, desired AC, name string,
	cached func(name string) (T, error),
	extract func(obj T, fieldManager string) (AC, error),
	write func(ctx context.Context, config AC, opts metav1.ApplyOptions) (T, error),
	live objectGetter[T],
) error {
	existing, err := cached(name)
	key := objectKey{kind, gw.Namespace, name}
	cachedVersion := ""
	if err == nil {
		cachedVersion = existing.GetResourceVersion()
	}
	gateway := cache.MetaObjectToName(gw)
	if c.cacheBehind(gateway, key, cachedVersion, desired) {
		return nil // the cache has not seen our last apply of this very object yet; its event requeues the Gateway
	}
	force := true
	switch {
	case apierrors.IsNotFound(err):
		if force, err = absentFromCache(ctx, gw, kind, name, live); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("get %s %s/%s from cache: %w", kind, gw.Namespace, name, err)
	case !metav1.IsControlledBy(existing, gw):
		return notOwnedError{kind: kind, namespace: gw.Namespace, name: name, gateway: gw.Name}
	default:
		current, err := extract(existing, c.cfg.FieldManager)
		if err != nil {
			return fmt.Errorf("read the fields of %s %s/%s this controller manages: %w", kind, gw.Namespace, name, err)
		}
		if apiequality.Semantic.DeepEqual(current, desired) {
			return nil
		}
		if logger := klog.FromContext(ctx); logger.V(4).Enabled() {
			logger.V(4).Info("Gateway object differs from its desired state", "kind", kind, "object", klog.KRef(gw.Namespace, name), "diff", cmp.Diff(current, desired))
		}
	}
	_, err = write(ctx, desired, metav1.ApplyOptions{FieldManager: c.cfg.FieldManager, Force: force})
	metrics.GatewayObjectApplies.WithLabelValues(kind, metrics.Result(err)).Inc()
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", kind, gw.Namespace, name, err)
	}
	c.remember(gateway, key, cachedVersion, desired)
	klog.FromContext(ctx).V(2).Info("Applied gateway object", "kind", kind, "object", klog.KRef(gw.Namespace, name), "gateway", klog.KObj(gw))
	return nil
}

// objectGetter reads an object from the API server.
type objectGetter[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// absentFromCache decides about an object the cache lacks. The cache holds only
// objects with this controller's label, so one of the name may exist: another team's
// Service, say, which a forced apply would take over (its selector replaced, the
// Gateway made its owner, and garbage-collected with it). A live read tells: none, and
// the apply creates it without force, so that one made meanwhile by someone else
// conflicts instead of being taken over; one the Gateway controls (its label was taken
// off) is applied as usual; any other is never written.
func absentFromCache[T metav1.Object](ctx context.Context, gw *gatewayv1.Gateway, kind, name string, live objectGetter[T]) (force bool, err error) {
	existing, err := live.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get %s %s/%s, which the cache lacks: %w", kind, gw.Namespace, name, err)
	case !metav1.IsControlledBy(existing, gw):
		return false, notOwnedError{kind: kind, namespace: gw.Namespace, name: name, gateway: gw.Name}
	}
	return true, nil
}

// remember records what was last written of an object (see cacheBehind).
func (c *Controller) remember(gateway cache.ObjectName, key objectKey, cachedVersion string, desired any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.applied[gateway] == nil {
		c.applied[gateway] = map[objectKey]lastApply{}
	}
	c.applied[gateway][key] = lastApply{cachedVersion: cachedVersion, desired: desired}
}

// cacheBehind reports whether the cache still holds the version an apply of this same
// desired object replaced: comparing it again would find the old fields and apply
// again for nothing. A different desired object is always applied.
func (c *Controller) cacheBehind(gateway cache.ObjectName, key objectKey, cachedVersion string, desired any) bool {
	c.mu.Lock()
	last, ok := c.applied[gateway][key]
	c.mu.Unlock()
	return ok && last.cachedVersion == cachedVersion && apiequality.Semantic.DeepEqual(last.desired, desired)
}

// notOwnedError is an object of the name a Gateway's objects take that is not the
// Gateway's: a user's, or another Gateway's after a name clash.
type notOwnedError struct{ kind, namespace, name, gateway string }

func (e notOwnedError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and is not controlled by Gateway %s; rename or delete it", e.kind, e.namespace, e.name, e.gateway)
}
