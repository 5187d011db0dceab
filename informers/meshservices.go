package informers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// MeshServiceResource is the resource of consul-k8s's MeshService kind.
var MeshServiceResource = schema.GroupVersionResource{
	Group: gatewayapi.MeshServiceGroup, Version: gatewayapi.MeshServiceVersion, Resource: gatewayapi.MeshServiceResource,
}

// meshServiceConsulNameIndex is on MeshServices: the Consul service their spec.name
// names, to find the MeshServices (and so the routes) a catalog change affects.
const meshServiceConsulNameIndex = "meshServiceConsulName"

// indexMeshServiceConsulName is the index function of meshServiceConsulNameIndex.
func indexMeshServiceConsulName(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, unexpectedType(meshServiceConsulNameIndex, obj)
	}
	if name, _, _ := unstructured.NestedString(u.Object, "spec", "name"); name != "" {
		return []string{name}, nil
	}
	return nil, nil
}

// Option adds an optional cache to New.
type Option func(i *Informers, resync time.Duration)

// WithMeshServices caches consul-k8s's MeshServices through client. Give it only when
// the CRD is served: an informer of a resource that does not exist never syncs, and
// nothing would start.
func WithMeshServices(client dynamic.Interface) Option {
	return func(i *Informers, resync time.Duration) {
		informer := dynamicinformer.NewFilteredDynamicInformer(client, MeshServiceResource, metav1.NamespaceAll, resync,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, meshServiceConsulNameIndex: indexMeshServiceConsulName}, nil).Informer()
		mustSetTransform(informer, trimMetadata)
		i.MeshServices = informer
		i.own = append(i.own, informer)
	}
}
