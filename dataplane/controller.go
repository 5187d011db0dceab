package dataplane

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"
	kworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// Config is what NewController needs.
type Config struct {
	Client kubernetes.Interface
	// ControllerName is this instance's: a Gateway of a class with another is not ours,
	// and neither is an object another instance deployed (see deployedByUs).
	ControllerName gatewayv1.GatewayController
	Gateways       gatewaylisters.GatewayLister
	Classes        gatewaylisters.GatewayClassLister
	// Synced are the HasSynced of the Gateway and GatewayClass caches: before they
	// hold every object, a Gateway would look as if it were of no class of ours.
	Synced   []cache.InformerSynced
	Configs  listers.ResourceIndexer[*v1alpha1.GatewayConfig]
	Owned    *informers.Owned
	Defaults Defaults
	// FieldManager names the controller in the objects' managedFields.
	FieldManager string
	Workers      int
}

// Controller applies the data plane of every Gateway whose Accepted=True status the API
// server has confirmed. It learns of them as a Publisher of the status pipeline, like
// the Consul syncer, and from events on the objects it owns, so a hand edit is put back.
//
// A Gateway that stops being accepted keeps what was deployed from its last valid
// parameters; one that is no longer ours (another class, or its class another
// controller's) loses what this controller deployed for it; deleting it lets the
// garbage collector remove its objects (they carry its controller ownerReference).
type Controller struct {
	cfg   Config
	queue kworkqueue.TypedRateLimitingInterface[cache.ObjectName]

	mu        gosync.Mutex
	confirmed map[cache.ObjectName]*gatewayv1.Gateway
	// listenerSets are the confirmed ListenerSets accepted at their generation, whose
	// listeners' ports the Gateway's pods and Service declare too.
	listenerSets map[cache.ObjectName]*gatewayv1.ListenerSet
	// problems says, per Gateway, why an object of its could not be written in a way
	// no retry fixes (see writeProblem).
	problems map[cache.ObjectName]gwsync.DeploymentState
	// onProblem is told of a Gateway whose problem changed (OnProblemChange).
	onProblem func(cache.ObjectName)
	// applied remembers each object's last apply (see apply), per Gateway, so a
	// deleted Gateway's memory goes with it.
	applied map[cache.ObjectName]map[objectKey]lastApply
}

type objectKey struct{ kind, namespace, name string }

// lastApply is what an apply sent, and the resourceVersion the cache held before it
// ("" for no object): equality only, never ordered.
type lastApply struct {
	cachedVersion string
	desired       any
}

// NewController builds the controller and registers its handlers on cfg.Owned.
func NewController(ctx context.Context, cfg Config) (*Controller, error) {
	c := &Controller{
		cfg:          cfg,
		queue:        workqueue.New[cache.ObjectName]("dataplane"),
		confirmed:    map[cache.ObjectName]*gatewayv1.Gateway{},
		listenerSets: map[cache.ObjectName]*gatewayv1.ListenerSet{},
		problems:     map[cache.ObjectName]gwsync.DeploymentState{},
		onProblem:    func(cache.ObjectName) {},
		applied:      map[cache.ObjectName]map[objectKey]lastApply{},
	}
	if err := cfg.Owned.AddEventHandlers(ctx, c.queue.Add); err != nil {
		return nil, err
	}
	return c, nil
}

// Publish records a confirmed Gateway: one accepted at its current generation is
// deployed; for any other, the sync asks the caches whether it is still ours (see
// syncUnconfirmed).
func (c *Controller) Publish(_ context.Context, conf gwsync.Confirmation) {
	if conf.Kind == gatewayapi.ListenerSetKind {
		c.publishListenerSet(conf)
		return
	}
	if conf.Kind != gatewayapi.GatewayKind {
		return
	}
	gw, ok := conf.Object.(*gatewayv1.Gateway)
	c.mu.Lock()
	switch {
	case ok && gwsync.AcceptedAtGeneration(gw):
		c.confirmed[conf.Key] = gw
	case conf.Object == nil: // deleted, or no longer ours
		delete(c.confirmed, conf.Key)
		delete(c.applied, conf.Key)
		delete(c.problems, conf.Key)
	default:
		delete(c.confirmed, conf.Key)
	}
	c.mu.Unlock()
	c.queue.Add(conf.Key)
}

// publishListenerSet records a confirmed ListenerSet and re-applies its parent
// Gateway, the one before and the one now when the ListenerSet moved.
func (c *Controller) publishListenerSet(conf gwsync.Confirmation) {
	set, ok := conf.Object.(*gatewayv1.ListenerSet)
	c.mu.Lock()
	var parents []cache.ObjectName
	if old := c.listenerSets[conf.Key]; old != nil {
		if parent, ok := gatewayapi.ListenerSetParent(old); ok {
			parents = append(parents, parent)
		}
	}
	if ok && gwsync.ListenerSetAcceptedAtGeneration(set) {
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

// Run waits for the owned caches, then applies until ctx is done. Applying before the
// caches hold the existing objects would rewrite every one of them on each restart.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForNamedCacheSyncWithContext(ctx, append(c.cfg.Owned.HasSynced(), c.cfg.Synced...)...) {
		return fmt.Errorf("gateway object caches did not sync: %w", context.Cause(ctx))
	}
	workqueue.Run(ctx, "dataplane", c.queue, c.cfg.Workers, c.sync)
	return nil
}

// OnProblemChange calls f with a Gateway whose write problem (see State) changed: its
// status depends on it, and no event of the objects may follow. Call it before Run.
func (c *Controller) OnProblemChange(f func(gateway cache.ObjectName)) { c.onProblem = f }

// writeProblem is why a Gateway's objects could not be written in a way no retry
// fixes: in Problem, an object of their name exists and another owner controls it; in
// Invalid, the API server refused one as invalid. The zero value is none.
func (c *Controller) writeProblem(key cache.ObjectName) gwsync.DeploymentState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.problems[key]
}

// setWriteProblem records the Gateway's write problem, and says so when it changed.
func (c *Controller) setWriteProblem(key cache.ObjectName, problem gwsync.DeploymentState) {
	c.mu.Lock()
	changed := c.problems[key].Problem != problem.Problem || c.problems[key].Invalid != problem.Invalid
	if problem.Problem == "" && problem.Invalid == "" {
		delete(c.problems, key)
	} else {
		c.problems[key] = problem
	}
	c.mu.Unlock()
	if changed {
		c.onProblem(key)
	}
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	c.mu.Lock()
	gw := c.confirmed[key]
	c.mu.Unlock()
	if gw == nil {
		return c.syncUnconfirmed(ctx, key)
	}
	if why := Unfit(gw, c.cfg.Defaults.InfrastructureKeys); why != "" {
		klog.FromContext(ctx).V(4).Info("Gateway cannot be deployed; nothing is written", "gateway", key, "problem", why)
		return nil
	}
	class, err := c.cfg.Classes.Get(string(gw.Spec.GatewayClassName))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get GatewayClass %s: %w", gw.Spec.GatewayClassName, err)
	}
	config, problem, err := gwsync.GatewayConfigFor(c.cfg.Configs, gw, class)
	if err != nil {
		return err
	}
	if problem != "" {
		klog.FromContext(ctx).V(4).Info("Parameters not usable; the deployed data plane stays", "gateway", key, "problem", problem)
		return nil
	}
	objects := Desired(Gateway{Gateway: gw, Class: class, Config: config, ListenerSetPorts: c.listenerSetPorts(key)}, c.cfg.Defaults)
	return c.applyObjects(ctx, key, gw, objects)
}

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
func (c *Controller) applyObjects(ctx context.Context, key cache.ObjectName, gw *gatewayv1.Gateway, objects Objects) error {
	problem, err := c.checkOwners(ctx, gw, objects)
	if err != nil || problem.Problem != "" {
		c.setWriteProblem(key, problem)
		if problem.Problem != "" {
			klog.FromContext(ctx).V(4).Info("Gateway object names are taken; nothing is deployed", "gateway", key, "problem", problem.Problem)
			err = errors.Join(err, c.withdraw(ctx, gw))
			// The object in the way carries no label of ours, so no cache tells
			// when it goes: look again.
			c.queue.AddAfter(key, conflictRecheck)
		}
		return err
	}
	return c.applyAll(ctx, key, gw, objects)
}

// conflictRecheck is how often the names of a Gateway in conflict are read again: a
// few live reads per Gateway in conflict, and a deployment soon after the name is
// free.
const conflictRecheck = 10 * time.Second

// checkOwners reports, as the Gateway's write problem, each object of its names that
// exists and that the Gateway does not control.
func (c *Controller) checkOwners(ctx context.Context, gw *gatewayv1.Gateway, objects Objects) (gwsync.DeploymentState, error) {
	ns := gw.Namespace
	return classifyWriteErrors(
		checkOwner(ctx, gw, "ServiceAccount", *objects.ServiceAccount.Name,
			c.cfg.Owned.ServiceAccounts.Lister().ServiceAccounts(ns).Get, c.cfg.Client.CoreV1().ServiceAccounts(ns)),
		checkOwner(ctx, gw, "Deployment", *objects.Deployment.Name,
			c.cfg.Owned.Deployments.Lister().Deployments(ns).Get, c.cfg.Client.AppsV1().Deployments(ns)),
		checkOwner(ctx, gw, "Service", *objects.Service.Name,
			c.cfg.Owned.Services.Lister().Services(ns).Get, c.cfg.Client.CoreV1().Services(ns)),
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

// withdraw deletes the Gateway's own Deployment and Service while a conflict stands:
// its pods must not keep running as, or be reached through, an object that is not
// its own. Its ServiceAccount, if its own, stays (the identity manager binds only
// that one).
func (c *Controller) withdraw(ctx context.Context, gw *gatewayv1.Gateway) error {
	return c.deleteOwned(ctx, gw, false)
}

// applyAll applies the Gateway's objects, once no name is taken.
func (c *Controller) applyAll(ctx context.Context, key cache.ObjectName, gw *gatewayv1.Gateway, objects Objects) error {
	problem, err := classifyWriteErrors(
		c.applyServiceAccount(ctx, gw, objects.ServiceAccount),
		c.applyDeployment(ctx, gw, objects.Deployment),
		c.applyService(ctx, gw, objects.Service),
	)
	c.setWriteProblem(key, problem)
	return err
}

// classifyWriteErrors sorts the errors of the Gateway's objects into its write
// problem (a conflict, an invalid object) and the errors to retry.
func classifyWriteErrors(results ...error) (gwsync.DeploymentState, error) {
	var problem gwsync.DeploymentState
	var errs []error
	for _, err := range results {
		var conflict notOwnedError
		switch {
		case err == nil:
		case errors.As(err, &conflict):
			problem.Problem = joinProblems(problem.Problem, conflict.Error())
		case IsPolicyRefusal(err):
			// Said on the Gateway, with the rule that refused, and retried: what lifts
			// it (the namespace's opt-in label, another writer's field removed) is no
			// event of the Gateway.
			problem.Invalid = joinProblems(problem.Invalid, "An admission policy refused a gateway object: "+err.Error())
			errs = append(errs, err)
		case apierrors.IsInvalid(err):
			problem.Invalid = joinProblems(problem.Invalid, "The API server refused a gateway object: "+err.Error())
		default:
			errs = append(errs, err)
		}
	}
	return problem, errors.Join(errs...)
}

func joinProblems(problems, problem string) string {
	if problems == "" {
		return problem
	}
	return problems + "; " + problem
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
