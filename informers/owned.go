package informers

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeinformers "k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Owned holds the informers of the objects the controller itself creates for Gateways
// (their Deployments, Services, ServiceAccounts and PodDisruptionBudgets) and of the gateway pods. They list
// and watch only objects carrying the controller's label, so unrelated workloads in the
// cluster cost no memory. Unlike the other caches, these keep managedFields: server-side
// apply's field ownership is how the controller tells what it owns in them.
type Owned struct {
	Deployments     appsinformers.DeploymentInformer
	Services        coreinformers.ServiceInformer
	ServiceAccounts coreinformers.ServiceAccountInformer
	Pods            coreinformers.PodInformer
	// PodDisruptionBudgets are the Gateways' (dataplane/disruption.go).
	PodDisruptionBudgets policyinformers.PodDisruptionBudgetInformer

	factory kubeinformers.SharedInformerFactory
}

// NewOwned builds the informers of the objects selector selects.
func NewOwned(kube kubernetes.Interface, selector string, resync time.Duration) *Owned {
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, resync,
		kubeinformers.WithTweakListOptions(func(options *metav1.ListOptions) {
			options.LabelSelector = selector
		}))
	o := &Owned{
		Deployments:          factory.Apps().V1().Deployments(),
		Services:             factory.Core().V1().Services(),
		ServiceAccounts:      factory.Core().V1().ServiceAccounts(),
		Pods:                 factory.Core().V1().Pods(),
		PodDisruptionBudgets: factory.Policy().V1().PodDisruptionBudgets(),
		factory:              factory,
	}
	for _, informer := range o.informers() {
		informer.Informer() // registers it with the factory
	}
	return o
}

func (o *Owned) informers() []interface {
	Informer() cache.SharedIndexInformer
} {
	return []interface {
		Informer() cache.SharedIndexInformer
	}{o.Deployments, o.Services, o.ServiceAccounts, o.Pods, o.PodDisruptionBudgets}
}

// StartWithContext starts the informers; they stop when ctx is done.
func (o *Owned) StartWithContext(ctx context.Context) { o.factory.StartWithContext(ctx) }

// Shutdown waits for the informers' goroutines; end StartWithContext's ctx first.
func (o *Owned) Shutdown() { o.factory.Shutdown() }

// HasSynced lists every informer's HasSynced.
func (o *Owned) HasSynced() []cache.InformerSynced {
	var synced []cache.InformerSynced
	for _, informer := range o.informers() {
		synced = append(synced, informer.Informer().HasSynced)
	}
	return synced
}

// AddEventHandlers calls each of enqueue with the Gateway an owned object or gateway
// pod belongs to (its namespace and gateway-name label) on every event: a change there
// may call for the object to be put back, or change the Gateway's addresses and
// Programmed condition.
func (o *Owned) AddEventHandlers(ctx context.Context, enqueue ...func(gateway cache.ObjectName)) error {
	logger := klog.FromContext(ctx).WithName("informers")
	mapped := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		object, ok := obj.(metav1.Object)
		if !ok {
			utilruntime.HandleErrorWithLogger(logger, fmt.Errorf("unexpected %T", obj), "Event not mapped to queue keys")
			return
		}
		name := object.GetLabels()[gatewayv1.GatewayNameLabelKey]
		if name == "" {
			return
		}
		for _, add := range enqueue {
			add(cache.ObjectName{Namespace: object.GetNamespace(), Name: name})
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    mapped,
		UpdateFunc: func(_, newObj any) { mapped(newObj) },
		DeleteFunc: mapped,
	}
	for _, informer := range o.informers() {
		if _, err := informer.Informer().AddEventHandler(handler); err != nil {
			return fmt.Errorf("add owned-object event handler: %w", err)
		}
	}
	return nil
}
