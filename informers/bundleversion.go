package informers

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/gateway-api/pkg/consts"
)

// gatewayClassCRD is the CRD whose bundle-version annotation says which Gateway API
// release is installed; every CRD of a release carries the same one.
const gatewayClassCRD = "gatewayclasses.gateway.networking.k8s.io"

// BundleVersion watches the metadata of the GatewayClass CRD (only it: a field selector
// keeps every other CRD out of the cache) for the installed Gateway API bundle version.
type BundleVersion struct {
	informer cache.SharedIndexInformer
}

// NewBundleVersion builds the watch; nothing talks to the API server until Start.
func NewBundleVersion(client metadata.Interface, resync time.Duration) *BundleVersion {
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	informer := metadatainformer.NewFilteredMetadataInformer(client, crds, metav1.NamespaceAll, resync, cache.Indexers{},
		func(options *metav1.ListOptions) {
			options.FieldSelector = fields.OneTermEqualSelector("metadata.name", gatewayClassCRD).String()
		})
	// Only the annotations are read; managedFields would only take memory.
	if err := informer.Informer().SetTransform(trimMetadata); err != nil {
		panic(err) // only fails once started, which it is not yet
	}
	return &BundleVersion{informer: informer.Informer()}
}

// OnChange calls changed whenever the CRD is added, updated or deleted.
func (b *BundleVersion) OnChange(changed func()) error {
	_, err := b.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	})
	return err
}

// Run runs the watch until ctx is done.
func (b *BundleVersion) Run(ctx context.Context) { b.informer.RunWithContext(ctx) }

// HasSynced reports whether the first list has been received.
func (b *BundleVersion) HasSynced() bool { return b.informer.HasSynced() }

// Get returns the installed bundle version, "" when the CRD or its annotation is absent.
func (b *BundleVersion) Get() string {
	obj, exists, err := b.informer.GetStore().GetByKey(gatewayClassCRD)
	if err != nil || !exists {
		return ""
	}
	crd, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return ""
	}
	return crd.Annotations[consts.BundleVersionAnnotation]
}
