package informers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	kubeinformers "k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayfactory "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/client"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// tlsSecretSelector limits every Secret watch to kubernetes.io/tls Secrets: the only
// type a listener certificateRef may name. A Secret's type is immutable, so no Secret
// ever moves in or out of it.
var tlsSecretSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS))

// Informers holds the shared informers of every kind the controller reads. Listers and
// indexers come from these fields; nothing else in the controller builds an informer.
type Informers struct {
	GatewayClasses gatewayinformers.GatewayClassInformer
	Gateways       gatewayinformers.GatewayInformer
	ListenerSets   gatewayinformers.ListenerSetInformer
	// Routes holds the informer of each kind of gatewayapi.Routes.
	Routes          map[gatewayv1.Kind]cache.SharedIndexInformer
	ReferenceGrants gatewayinformers.ReferenceGrantInformer
	Namespaces      coreinformers.TypedNamespaceInformer
	Services        coreinformers.TypedServiceInformer
	// Secrets caches only the kubernetes.io/tls Secrets a Gateway or ListenerSet
	// listener names (SecretCache). A certificateRef to a Secret of any other type
	// finds nothing here, and is invalid either way.
	Secrets *SecretCache
	// GatewayConfigs caches the project's own parameters kind.
	GatewayConfigs cache.SharedIndexInformer
	// InjectedPods caches the pods consul-k8s injected, trimmed to what says which
	// Consul service a backend Service is (package backends).
	InjectedPods cache.SharedIndexInformer
	// MeshServices caches consul-k8s's MeshServices as unstructured objects; nil when
	// New was not given WithMeshServices (the CRD is not served).
	MeshServices cache.SharedIndexInformer
	// EndpointSlices caches the EndpointSlices not made from a Service's selector:
	// those of Services without one, whose pods they point at (endpointSliceSelector).
	EndpointSlices cache.SharedIndexInformer

	gatewayFactory gatewayfactory.SharedInformerFactory
	coreFactory    kubeinformers.SharedInformerFactory
	// own holds the informers no factory starts, and ownDone their goroutines.
	own     []cache.SharedIndexInformer
	ownDone sync.WaitGroup

	// secretClient lists and watches the certificate Secrets (WithSecretClient); nil
	// for the client of New.
	secretClient kubernetes.Interface
	// controllerName and secretsPerNamespace scope the Secret cache (secretScope).
	controllerName      gatewayv1.GatewayController
	secretsPerNamespace int

	mu sync.Mutex
	// handlersSynced holds the HasSynced of every handler AddEventHandlers registered:
	// true once the handler has been handed the informer's initial list.
	handlersSynced []cache.InformerSynced
}

// New builds the informers and their indexers; nothing talks to the API server until
// Start. resync is the period at which every cached object is delivered again as an
// update, the safety net for any event the mapping in handlers.go misses.
func New(kube kubernetes.Interface, gateway gatewayclient.Interface, configs client.Interface, resync time.Duration, opts ...Option) *Informers {
	gatewayFactory := gatewayfactory.NewSharedInformerFactoryWithOptions(gateway, resync,
		gatewayfactory.WithTransform(trimMetadata))
	coreFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, resync,
		kubeinformers.WithTransform(trimMetadata))
	gatewayV1 := gatewayFactory.Gateway().V1()
	coreV1 := coreFactory.Core().V1()
	i := &Informers{
		GatewayClasses:  gatewayV1.GatewayClasses(),
		Gateways:        gatewayV1.Gateways(),
		ListenerSets:    gatewayV1.ListenerSets(),
		Routes:          make(map[gatewayv1.Kind]cache.SharedIndexInformer, len(gatewayapi.Routes)),
		ReferenceGrants: gatewayV1.ReferenceGrants(),
		Namespaces:      coreV1.Namespaces(),
		Services:        coreV1.Services(),
		gatewayFactory:  gatewayFactory,
		coreFactory:     coreFactory,
		GatewayConfigs:  newGatewayConfigInformer(configs, resync),
		InjectedPods:    newInjectedPodInformer(kube, resync),
		EndpointSlices:  newEndpointSliceInformer(kube, resync),
	}
	i.own = []cache.SharedIndexInformer{i.GatewayConfigs, i.InjectedPods, i.EndpointSlices}
	for _, opt := range opts {
		opt(i, resync)
	}
	for _, kind := range gatewayapi.Routes {
		i.Routes[kind.Kind] = kind.Informer(gatewayV1)
	}
	i.addIndexers()
	secretClient := kube
	if i.secretClient != nil {
		secretClient = i.secretClient
	}
	i.Secrets = newSecretCache(secretClient, resync, i.certificateReferenced, i.secretScope())
	i.mustTrackCertificateReferences()
	return i
}

// mustTrackCertificateReferences has the Secret cache follow the certificateRefs of
// every Gateway's and ListenerSet's listeners. It panics on failure: the informers are
// fresh and not started, so none is possible.
func (i *Informers) mustTrackCertificateReferences() {
	for _, err := range []error{
		i.Secrets.trackReferrers(gatewayapi.GatewayKind, i.Gateways.Informer(), gatewaySecrets),
		i.Secrets.trackReferrers(gatewayapi.ListenerSetKind, i.ListenerSets.Informer(), listenerSetSecrets),
		i.Secrets.trackScope("GatewayClasses", i.GatewayClasses.Informer()),
		i.Secrets.trackScope("ReferenceGrants", i.ReferenceGrants.Informer()),
	} {
		if err != nil {
			panic(fmt.Sprintf("informers: %v", err))
		}
	}
}

// gatewaySecrets are the Secrets a Gateway's listeners name as certificates (kind
// Secret of the core group, the Gateway's namespace by default): the same reading as
// gatewayCertificateSecretIndex, which certificateReferenced relies on.
func gatewaySecrets(obj any) referrerRecord {
	gw, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return referrerRecord{}
	}
	return referrerRecord{
		created: gw.CreationTimestamp.Time,
		gateway: cache.ObjectName{Namespace: gw.Namespace, Name: gw.Name},
		secrets: gatewayapi.CertificateSecrets(gw),
	}
}

// listenerSetSecrets is gatewaySecrets for a ListenerSet, the same reading as
// listenerSetCertificateSecretIndex.
// The Gateway it is attached to decides its class.
func listenerSetSecrets(obj any) referrerRecord {
	set, ok := obj.(*gatewayv1.ListenerSet)
	if !ok {
		return referrerRecord{}
	}
	parent, _ := gatewayapi.ListenerSetParent(set)
	return referrerRecord{
		created: set.CreationTimestamp.Time,
		gateway: parent,
		secrets: gatewayapi.CertificateSecretsOf(set.Namespace, set.Spec.Listeners),
	}
}

// certificateReferenced reports whether a cached Gateway or ListenerSet names the
// Secret as a listener certificate, from the certificate indexes.
func (i *Informers) certificateReferenced(secret cache.ObjectName) bool {
	for _, lookup := range []struct {
		indexer cache.Indexer
		index   string
	}{
		{i.Gateways.Informer().GetIndexer(), gatewayCertificateSecretIndex},
		{i.ListenerSets.Informer().GetIndexer(), listenerSetCertificateSecretIndex},
	} {
		if keys, err := lookup.indexer.IndexKeys(lookup.index, secret.String()); err == nil && len(keys) > 0 {
			return true
		}
	}
	return false
}

// addIndexers installs the indexers of indexers.go. It also registers every informer
// with its factory: a factory starts only the informers whose Informer() was called.
//
// The generated informers already carry cache.NamespaceIndex; adding it again would be
// an indexer conflict, so only the controller's own indexes are added here.
func (i *Informers) addIndexers() {
	mustAddIndexers(i.GatewayClasses.Informer(), GatewayClassIndexers())
	mustAddIndexers(i.Gateways.Informer(), GatewayIndexers())
	mustAddIndexers(i.ListenerSets.Informer(), ListenerSetIndexers())
	for _, informer := range i.Routes {
		mustAddIndexers(informer, RouteIndexers())
	}
	mustAddIndexers(i.ReferenceGrants.Informer(), nil)
	mustAddIndexers(i.Namespaces.Informer(), nil)
	mustAddIndexers(i.Services.Informer(), ServiceIndexers())
}

// The controller's own indexes of each kind's cache (besides cache.NamespaceIndex).
// A store built without an informer (sync.OfflineDecider) carries the same.

// GatewayClassIndexers are the indexes of the GatewayClass cache.
func GatewayClassIndexers() cache.Indexers {
	return cache.Indexers{gatewayClassParametersIndex: indexGatewayClassParameters}
}

// GatewayIndexers are the indexes of the Gateway cache.
func GatewayIndexers() cache.Indexers {
	return cache.Indexers{
		gatewayClassNameIndex:         indexGatewayClassName,
		gatewayCertificateSecretIndex: indexGatewayCertificateSecrets,
		gatewaySelectsNamespacesIndex: indexGatewaySelectsNamespaces,
		gatewayParametersIndex:        indexGatewayParameters,
	}
}

// ListenerSetIndexers are the indexes of the ListenerSet cache.
func ListenerSetIndexers() cache.Indexers {
	return cache.Indexers{
		ListenerSetParentGatewayIndex:     IndexListenerSetParentGateway,
		listenerSetCertificateSecretIndex: indexListenerSetCertificateSecrets,
	}
}

// RouteIndexers are the indexes of every route kind's cache.
func RouteIndexers() cache.Indexers {
	return cache.Indexers{
		RouteParentGatewayIndex:      IndexRouteParentGateways,
		routeBackendServiceNameIndex: indexRouteBackendServiceNames,
		RouteParentListenerSetIndex:  IndexRouteParentListenerSets,
		routeBackendMeshServiceIndex: indexRouteBackendMeshServices,
	}
}

// ServiceIndexers are the indexes of the Service cache.
func ServiceIndexers() cache.Indexers {
	return cache.Indexers{ServiceNameIndex: IndexServiceName}
}

// mustAddIndexers panics on failure: the informers are fresh and not started, so the
// only possible error is an index name added twice, a bug in this file.
func mustAddIndexers(informer cache.SharedIndexInformer, indexers cache.Indexers) {
	if len(indexers) == 0 {
		return
	}
	if err := informer.AddIndexers(indexers); err != nil {
		panic(fmt.Sprintf("informers: add indexers: %v", err))
	}
}

// StartWithContext starts every informer; they stop when ctx is done. The Secret
// watches' requests log with a logger that never reaches client-go's body logging
// (verbosity 8 and up), so no private key is written to the log at any -v. The Secret
// cache starts first, so the watches the Gateway and ListenerSet events ask for run at
// once.
func (i *Informers) StartWithContext(ctx context.Context) {
	i.Secrets.Start(withoutBodyLogging(ctx))
	i.gatewayFactory.StartWithContext(ctx)
	i.coreFactory.StartWithContext(ctx)
	for _, informer := range i.own {
		i.ownDone.Go(func() { informer.RunWithContext(ctx) })
	}
}

// Shutdown blocks until every informer goroutine has returned. End the context given
// to StartWithContext first, or Shutdown waits forever. The Secret cache goes last:
// Gateway and ListenerSet events start its watches until their informers stop.
func (i *Informers) Shutdown() {
	i.gatewayFactory.Shutdown()
	i.coreFactory.Shutdown()
	i.ownDone.Wait()
	i.Secrets.Shutdown()
}

// HasSynced lists every informer's HasSynced and, once AddEventHandlers has run, every
// event handler's, for cache.WaitForCacheSync. An informer syncs when its cache holds
// the initial list, a handler when it has been handed that list; waiting for both means
// the keys of every object that existed at start-up are in the queues.
func (i *Informers) HasSynced() []cache.InformerSynced {
	i.mu.Lock()
	defer i.mu.Unlock()
	synced := []cache.InformerSynced{
		i.GatewayClasses.Informer().HasSynced,
		i.Gateways.Informer().HasSynced,
		i.ListenerSets.Informer().HasSynced,
		i.ReferenceGrants.Informer().HasSynced,
		i.Namespaces.Informer().HasSynced,
		i.Services.Informer().HasSynced,
		i.Secrets.HasSynced,
		i.GatewayConfigs.HasSynced,
		i.InjectedPods.HasSynced,
		i.EndpointSlices.HasSynced,
	}
	if i.MeshServices != nil {
		synced = append(synced, i.MeshServices.HasSynced)
	}
	for _, informer := range i.Routes {
		synced = append(synced, informer.HasSynced)
	}
	return append(synced, i.handlersSynced...)
}

// trimMetadata is the transform of every factory. managedFields is often the largest
// part of an object's metadata, and kubectl apply's last-applied-configuration
// annotation repeats the whole spec; the controller reads neither, so neither is kept
// in the caches.
//
// A DeletedFinalStateUnknown tombstone passes through untouched: its object came from
// the cache and was transformed when it went in. Anything without object metadata
// passes through too: trimming is an optimisation, and failing the transform would
// fail the informer.
func trimMetadata(obj any) (any, error) {
	if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return obj, nil
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	if annotations := accessor.GetAnnotations(); annotations[corev1.LastAppliedConfigAnnotation] != "" {
		delete(annotations, corev1.LastAppliedConfigAnnotation)
		accessor.SetAnnotations(annotations)
	}
	accessor.SetManagedFields(nil)
	return obj, nil
}
