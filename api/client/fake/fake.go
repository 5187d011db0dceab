// Package fake is an in-memory client.Interface for unit tests, built like client-go's
// generated fakes: an object tracker behind client-go's generic fake client.
package fake

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/client"
	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

// Clientset serves the objects it was given, and records every action.
type Clientset struct {
	testing.Fake
}

// NewClientset returns a fake holding objects.
func NewClientset(objects ...runtime.Object) *Clientset {
	tracker := testing.NewObjectTracker(client.Scheme, serializer.NewCodecFactory(client.Scheme).UniversalDecoder())
	for _, obj := range objects {
		if err := tracker.Add(obj); err != nil {
			panic(err)
		}
	}
	c := &Clientset{}
	c.AddReactor("*", "*", testing.ObjectReaction(tracker))
	c.AddWatchReactor("*", func(action testing.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(testing.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := tracker.Watch(action.GetResource(), action.GetNamespace(), opts)
		return true, w, err
	})
	return c
}

// IsWatchListSemanticsUnSupported tells informers to list and then watch: the object
// tracker cannot stream a list, as client-go's generated fakes cannot.
func (c *Clientset) IsWatchListSemanticsUnSupported() bool { return true }

// GatewayConfigs implements client.Interface.
func (c *Clientset) GatewayConfigs(namespace string) client.GatewayConfigInterface {
	return gentype.NewFakeClientWithList[*v1alpha1.GatewayConfig, *v1alpha1.GatewayConfigList](
		&c.Fake, namespace,
		v1alpha1.SchemeGroupVersion.WithResource("gatewayconfigs"),
		v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.GatewayConfigKind),
		func() *v1alpha1.GatewayConfig { return &v1alpha1.GatewayConfig{} },
		func() *v1alpha1.GatewayConfigList { return &v1alpha1.GatewayConfigList{} },
		func(dst, src *v1alpha1.GatewayConfigList) { dst.ListMeta = src.ListMeta },
		func(list *v1alpha1.GatewayConfigList) []*v1alpha1.GatewayConfig {
			items := make([]*v1alpha1.GatewayConfig, len(list.Items))
			for i := range list.Items {
				items[i] = &list.Items[i]
			}
			return items
		},
		func(list *v1alpha1.GatewayConfigList, items []*v1alpha1.GatewayConfig) {
			list.Items = make([]v1alpha1.GatewayConfig, len(items))
			for i, item := range items {
				list.Items[i] = *item
			}
		},
	)
}
