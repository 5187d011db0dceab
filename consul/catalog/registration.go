package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	kworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/pods"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

const (
	// metaSyntheticNode marks the nodes registrations create: they stand for a
	// Kubernetes node, not a Consul agent.
	metaSyntheticNode = "synthetic-node"
	// metaPod is the pod an instance stands for.
	metaPod = "k8s-pod"
	// readinessCheckName is the instance's check.
	readinessCheckName = "Kubernetes Readiness Check"
)

// Config is what NewRegistrar needs.
type Config struct {
	Client    *consulapi.Client
	Naming    translate.Naming
	Ownership translate.Ownership
	// Pods holds the gateway pods (the controller's label-selected cache).
	Pods corelisters.PodLister
	// PodsSynced reports whether Pods holds the initial list.
	PodsSynced cache.InformerSynced
	// GatewayPods selects a Gateway's pods in its namespace.
	GatewayPods func(gateway cache.ObjectName) labels.Selector
	// OwnsPod tells a pod of the Gateway's own from one only labelled like it.
	OwnsPod func(gw *gatewayv1.Gateway, pod *corev1.Pod) bool
	// InstanceID is a pod's instance ID, unique on the synthetic node, which the
	// pod's consul-dataplane names too.
	InstanceID func(pod *corev1.Pod) string
	// NodeName is the synthetic Consul node of a Kubernetes node, which the pods'
	// consul-dataplane names too.
	NodeName func(node string) string
	// PrometheusBindAddr is where a pod's Envoy serves Prometheus metrics, "" for
	// nowhere; nil means nowhere for every pod. The instance's proxy configuration
	// carries it (envoy_prometheus_bind_addr), which is what makes Envoy listen there.
	PrometheusBindAddr func(pod *corev1.Pod) string
	Workers            int
}

// prometheusBindAddrKey is the proxy configuration key of Envoy's Prometheus listener,
// as Consul's bootstrap reads it (consul-k8s sets it on its gateway instances).
const prometheusBindAddrKey = "envoy_prometheus_bind_addr"

// Registrar keeps Consul's catalog equal to the gateway pods of every Gateway whose
// Accepted=True status the API server confirmed. It removes only instances it
// registered (ownership meta) and never touches others. Only the leader runs it.
type Registrar struct {
	cfg      Config
	queue    kworkqueue.TypedRateLimitingInterface[cache.ObjectName]
	gateways *contract.AcceptedGateways
}

// NewRegistrar builds a registrar; nothing talks to Consul until Run.
func NewRegistrar(cfg Config) *Registrar {
	return &Registrar{
		cfg:      cfg,
		queue:    workqueue.New[cache.ObjectName]("catalog"),
		gateways: contract.NewAcceptedGateways(),
	}
}

// Publish implements the status pipeline's Publisher: a Gateway accepted at its
// current generation has its pods registered; any other has none.
func (r *Registrar) Publish(_ context.Context, c contract.Confirmation) {
	if key, ok := r.gateways.Record(c); ok {
		r.queue.Add(key)
	}
}

// Enqueue asks for a Gateway's instances to be compared again, for example when one of
// its pods changed.
func (r *Registrar) Enqueue(gateway cache.ObjectName) { r.queue.Add(gateway) }

// Run registers until ctx is done, from when the status pipeline has confirmed every
// object once (initialSyncDone): until then a Gateway without a confirmation may just
// not have been judged yet. A blocking query on Consul's service list notices a Consul
// that lost its data (its index goes back) or a registered service that went away, and
// brings every Gateway back.
func (r *Registrar) Run(ctx context.Context, initialSyncDone <-chan struct{}) error {
	if !cache.WaitForNamedCacheSyncWithContext(ctx, r.cfg.PodsSynced) {
		return fmt.Errorf("gateway pod cache did not sync: %w", context.Cause(ctx))
	}
	select {
	case <-initialSyncDone:
	case <-ctx.Done():
		return nil
	}
	var wg gosync.WaitGroup
	wg.Go(func() { r.watchCatalog(ctx) })
	workqueue.Run(ctx, "catalog", r.queue, r.cfg.Workers, r.sync)
	wg.Wait()
	return nil
}

// catalogWatchWait is how long one blocking query on the catalog may wait for a
// change; its answer then also shows an index that went back (a restored Consul).
const catalogWatchWait = 10 * time.Second

func (r *Registrar) watchCatalog(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("catalog")
	var index uint64
	for ctx.Err() == nil {
		opts := (&consulapi.QueryOptions{WaitIndex: index, WaitTime: catalogWatchWait, Partition: r.cfg.Naming.Partition}).WithContext(ctx)
		_, qm, err := r.cfg.Client.Catalog().Services(opts)
		if err != nil {
			if ctx.Err() == nil {
				logger.V(4).Info("Catalog watch failed; retrying", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			continue
		}
		if qm.LastIndex != index {
			if qm.LastIndex < index {
				logger.V(2).Info("Consul's catalog index went back (a restarted or restored Consul); comparing every gateway's instances")
			}
			r.enqueueAll()
		}
		index = qm.LastIndex
	}
}

func (r *Registrar) enqueueAll() {
	for _, k := range r.gateways.Known() {
		r.queue.Add(k)
	}
}

// SyncOnce compares and writes one Gateway's instances now, as a worker would; tests
// use it to see the error a worker would retry.
func (r *Registrar) SyncOnce(ctx context.Context, gateway cache.ObjectName) error {
	return r.sync(ctx, gateway)
}

// sync makes the catalog hold exactly the desired instances of one Gateway: it reads
// the service's instances, registers what is missing or different, and deregisters
// what is ours and no longer desired.
func (r *Registrar) sync(ctx context.Context, key cache.ObjectName) error {
	gw, known := r.gateways.Get(key)
	if !known {
		// No confirmation named it yet (a pod event came first): nothing is known of
		// what its instances should be, so none is touched.
		return nil
	}
	desired, err := r.desired(key, gw)
	if err != nil {
		return err
	}
	service := r.cfg.Naming.EntryName(key.Namespace, key.Name)
	q := &consulapi.QueryOptions{Namespace: r.cfg.Naming.Namespace(key.Namespace), Partition: r.cfg.Naming.Partition}
	entries, _, err := r.cfg.Client.Health().Service(service, "", false, q.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("read catalog instances of %s: %w", service, err)
	}
	var errs []error
	current := map[string]*consulapi.ServiceEntry{}
	for _, e := range entries {
		if e.Service == nil || !r.ownInstance(e.Service.Meta, key) {
			continue // another writer's instance: never touched
		}
		// An instance no pod stands for goes, and so does one on a node named otherwise
		// (an earlier version's "<node>-virtual"): the same ID on two nodes is two
		// instances.
		if reg, ok := desired[e.Service.ID]; !ok || e.Node == nil || e.Node.Node != reg.Node {
			errs = append(errs, r.deregister(ctx, key, e))
			continue
		}
		current[e.Service.ID] = e
	}
	if gw == nil && len(errs) == 0 {
		r.gateways.ForgetIfGone(key)
	}
	for id, reg := range desired {
		if sameInstance(current[id], reg) {
			continue
		}
		_, err := r.cfg.Client.Catalog().Register(reg, (&consulapi.WriteOptions{Partition: r.cfg.Naming.Partition}).WithContext(ctx))
		metrics.ConsulCatalogWrites.WithLabelValues("register", metrics.Result(err)).Inc()
		if err != nil {
			errs = append(errs, fmt.Errorf("register %s instance %s: %w", service, id, err))
			continue
		}
		klog.FromContext(ctx).V(2).Info("Registered gateway instance", "gateway", key, "service", service, "id", id, "status", reg.Check.Status)
	}
	return errors.Join(errs...)
}

func (r *Registrar) deregister(ctx context.Context, gateway cache.ObjectName, e *consulapi.ServiceEntry) error {
	_, err := r.cfg.Client.Catalog().Deregister(&consulapi.CatalogDeregistration{
		Node: e.Node.Node, ServiceID: e.Service.ID, Namespace: e.Service.Namespace, Partition: e.Service.Partition,
	}, (&consulapi.WriteOptions{Partition: r.cfg.Naming.Partition}).WithContext(ctx))
	metrics.ConsulCatalogWrites.WithLabelValues("deregister", metrics.Result(err)).Inc()
	if err != nil {
		return fmt.Errorf("deregister %s instance %s: %w", e.Service.Service, e.Service.ID, err)
	}
	klog.FromContext(ctx).V(2).Info("Deregistered gateway instance", "gateway", gateway, "service", e.Service.Service, "id", e.Service.ID)
	return nil
}

// ownInstance reports whether an instance was registered by this controller for the
// Gateway.
func (r *Registrar) ownInstance(meta map[string]string, gateway cache.ObjectName) bool {
	owner := translate.OwnerOf(meta)
	return r.cfg.Ownership.Owns(meta) && owner.Kind == "Gateway" && owner.Namespace == gateway.Namespace && owner.Name == gateway.Name
}

// desired is the registration of each pod of an accepted Gateway that has a node and
// an IP, by instance ID; a Gateway that is gone or not accepted has none. A pod that
// only carries the Gateway's labels (anyone who may create pods in the namespace can
// set them) is not one of its pods.
func (r *Registrar) desired(key cache.ObjectName, gw *gatewayv1.Gateway) (map[string]*consulapi.CatalogRegistration, error) {
	out := map[string]*consulapi.CatalogRegistration{}
	if gw == nil {
		return out, nil
	}
	pods, err := r.cfg.Pods.Pods(key.Namespace).List(r.cfg.GatewayPods(key))
	if err != nil {
		return nil, fmt.Errorf("list pods of Gateway %s: %w", key, err)
	}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
			continue
		}
		if !r.cfg.OwnsPod(gw, pod) {
			klog.V(4).InfoS("Pod labelled as a gateway pod is not the Gateway's; not registered", "pod", klog.KObj(pod), "gateway", key)
			continue
		}
		reg := r.registration(gw, pod)
		out[reg.Service.ID] = reg
	}
	return out, nil
}

func (r *Registrar) registration(gw *gatewayv1.Gateway, pod *corev1.Pod) *consulapi.CatalogRegistration {
	meta := r.cfg.Ownership.Meta(translate.Owner{Kind: "Gateway", Namespace: gw.Namespace, Name: gw.Name, UID: string(gw.UID)})
	meta[metaPod] = pod.Name
	id := r.cfg.InstanceID(pod)
	status, output := consulapi.HealthCritical, fmt.Sprintf("Pod %s/%s is not Ready", pod.Namespace, pod.Name)
	if pods.Ready(pod) {
		status, output = consulapi.HealthPassing, "Pod is Ready"
	}
	namespace := r.cfg.Naming.Namespace(gw.Namespace)
	reg := &consulapi.CatalogRegistration{
		Node:           r.cfg.NodeName(pod.Spec.NodeName),
		Address:        pod.Status.HostIP,
		NodeMeta:       map[string]string{metaSyntheticNode: "true"},
		SkipNodeUpdate: true,
		Partition:      r.cfg.Naming.Partition,
		Service: &consulapi.AgentService{
			Kind:      consulapi.ServiceKindAPIGateway,
			ID:        id,
			Service:   r.cfg.Naming.EntryName(gw.Namespace, gw.Name),
			Address:   pod.Status.PodIP,
			Meta:      meta,
			Namespace: namespace,
			Partition: r.cfg.Naming.Partition,
		},
		Check: &consulapi.AgentCheck{
			CheckID:   pod.Namespace + "/" + pod.Name,
			Name:      readinessCheckName,
			Status:    status,
			Output:    output,
			ServiceID: id,
			Namespace: namespace,
			Partition: r.cfg.Naming.Partition,
		},
	}
	if r.cfg.PrometheusBindAddr != nil {
		if addr := r.cfg.PrometheusBindAddr(pod); addr != "" {
			reg.Service.Proxy = &consulapi.AgentServiceConnectProxyConfig{Config: map[string]any{prometheusBindAddrKey: addr}}
		}
	}
	return reg
}

// prometheusBindAddr is the instance's envoy_prometheus_bind_addr, "" for none.
func prometheusBindAddr(s *consulapi.AgentService) string {
	if s.Proxy == nil {
		return ""
	}
	addr, _ := s.Proxy.Config[prometheusBindAddrKey].(string)
	return addr
}

// sameInstance reports whether the catalog already holds reg as it would be written:
// node, address, service kind, name, address, meta and Prometheus address, and the
// check's status.
func sameInstance(e *consulapi.ServiceEntry, reg *consulapi.CatalogRegistration) bool {
	if e == nil || e.Node == nil || e.Service == nil {
		return false
	}
	if e.Node.Node != reg.Node || e.Node.Address != reg.Address || e.Service.Kind != reg.Service.Kind ||
		e.Service.Service != reg.Service.Service || e.Service.Address != reg.Service.Address || !maps.Equal(e.Service.Meta, reg.Service.Meta) ||
		prometheusBindAddr(e.Service) != prometheusBindAddr(reg.Service) {
		return false
	}
	for _, c := range e.Checks {
		if c.CheckID == reg.Check.CheckID {
			return c.Status == reg.Check.Status && c.ServiceID == reg.Check.ServiceID
		}
	}
	return false
}
