package dataplane

import (
	"context"
	"fmt"
	gosync "sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayconfig"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
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
	// ImageRolloutLimit is how many gateway Deployments may be rolling to a new
	// image at once, or which percentage of them (rollout.go); unset means
	// DefaultImageRolloutLimit.
	ImageRolloutLimit intstr.IntOrString
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
	problems map[cache.ObjectName]contract.DeploymentState
	// onProblem is told of a Gateway whose problem changed (OnProblemChange).
	onProblem func(cache.ObjectName)
	// applied remembers each object's last apply (see apply), per Gateway, so a
	// deleted Gateway's memory goes with it.
	applied map[cache.ObjectName]map[objectKey]lastApply
	// rollout bounds the Deployments that roll to a new image at once.
	rollout *imageRollout
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
		problems:     map[cache.ObjectName]contract.DeploymentState{},
		onProblem:    func(cache.ObjectName) {},
		applied:      map[cache.ObjectName]map[objectKey]lastApply{},
	}
	limit := cfg.ImageRolloutLimit
	if limit == (intstr.IntOrString{}) {
		limit = intstr.Parse(DefaultImageRolloutLimit)
	}
	c.rollout = &imageRollout{
		limit: limit, controllerName: cfg.ControllerName, deployments: cfg.Owned.Deployments.Lister(),
		started: map[cache.ObjectName]startedRoll{},
	}
	if err := cfg.Owned.AddEventHandlers(ctx, c.queue.Add); err != nil {
		return nil, err
	}
	return c, nil
}

// Publish records a confirmed Gateway: one accepted at its current generation is
// deployed; for any other, the sync asks the caches whether it is still ours (see
// syncUnconfirmed).
func (c *Controller) Publish(_ context.Context, conf contract.Confirmation) {
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
	case ok && contract.AcceptedAtGeneration(gw):
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

// Run waits for the owned caches, then applies until ctx is done. Applying before the
// caches hold the existing objects would rewrite every one of them on each restart.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForNamedCacheSyncWithContext(ctx, append(c.cfg.Owned.HasSynced(), c.cfg.Synced...)...) {
		return fmt.Errorf("gateway object caches did not sync: %w", context.Cause(ctx))
	}
	workqueue.Run(ctx, "dataplane", c.queue, c.cfg.Workers, workqueue.Requeuing(c.queue, c.sync))
	return nil
}

// OnProblemChange calls f with a Gateway whose write problem (see State) changed: its
// status depends on it, and no event of the objects may follow. Call it before Run.
func (c *Controller) OnProblemChange(f func(gateway cache.ObjectName)) { c.onProblem = f }

// sync deploys one Gateway's data plane, or removes it, and returns what must be
// looked at again later.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) ([]workqueue.Requeue[cache.ObjectName], error) {
	c.mu.Lock()
	gw := c.confirmed[key]
	c.mu.Unlock()
	if gw == nil {
		return nil, c.syncUnconfirmed(ctx, key)
	}
	if why := unfit(gw, c.cfg.Defaults.InfrastructureKeys); why != "" {
		klog.FromContext(ctx).V(4).Info("Gateway cannot be deployed; nothing is written", "gateway", key, "problem", why)
		return nil, nil
	}
	class, err := c.cfg.Classes.Get(string(gw.Spec.GatewayClassName))
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get GatewayClass %s: %w", gw.Spec.GatewayClassName, err)
	}
	if class.DeletionTimestamp != nil {
		// Uninstalling: the class's parameters and this controller's RBAC go with it.
		// What is deployed keeps serving as it is (package sync, heldClass).
		klog.FromContext(ctx).V(4).Info("GatewayClass is being deleted; the deployed data plane stays as it is", "gateway", key, "class", class.Name)
		return nil, nil
	}
	config, problem, err := gatewayconfig.For(c.cfg.Configs, gw, class)
	if err != nil {
		return nil, err
	}
	if problem != "" {
		klog.FromContext(ctx).V(4).Info("Parameters not usable; the deployed data plane stays", "gateway", key, "problem", problem)
		return nil, nil
	}
	objects := Desired(Gateway{Gateway: gw, Class: class, Config: config, ListenerSetPorts: c.listenerSetPorts(key)}, c.cfg.Defaults)
	roll, err := c.boundImageRoll(ctx, gw, objects)
	if err != nil {
		return nil, err
	}
	requeue, err := c.applyObjects(ctx, key, gw, objects)
	switch {
	case roll == imageHeld:
		requeue = append(requeue, workqueue.Requeue[cache.ObjectName]{Key: key, After: rolloutRecheck})
	case roll == imageAdmitted && err != nil:
		c.rollout.release(key)
	}
	return requeue, err
}

// withdraw deletes the Gateway's own Deployment, Service and PodDisruptionBudget while a conflict stands:
// its pods must not keep running as, or be reached through, an object that is not
// its own. Its ServiceAccount, if its own, stays (the identity manager binds only
// that one).
func (c *Controller) withdraw(ctx context.Context, gw *gatewayv1.Gateway) error {
	return c.deleteOwned(ctx, gw, false)
}
