// Package client is the typed client of this project's own API (package v1alpha1). One
// kind needs no generated clientset: client-go's generic gentype client gives the same
// typed methods.
package client

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

// Interface reaches the kinds of package v1alpha1.
type Interface interface {
	GatewayConfigs(namespace string) GatewayConfigInterface
}

// GatewayConfigInterface reads GatewayConfigs of one namespace, "" for all; tests
// and tools also write them.
type GatewayConfigInterface interface {
	Create(ctx context.Context, config *v1alpha1.GatewayConfig, opts metav1.CreateOptions) (*v1alpha1.GatewayConfig, error)
	Update(ctx context.Context, config *v1alpha1.GatewayConfig, opts metav1.UpdateOptions) (*v1alpha1.GatewayConfig, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1alpha1.GatewayConfig, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.GatewayConfigList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Scheme knows the kinds of package v1alpha1 and nothing else.
var Scheme = runtime.NewScheme()

// ParameterCodec encodes list and get options for this API's requests.
var ParameterCodec = runtime.NewParameterCodec(Scheme)

func init() {
	if err := v1alpha1.AddToScheme(Scheme); err != nil {
		panic(err)
	}
}

// Clientset talks to the API server.
type Clientset struct {
	rest rest.Interface
}

// NewForConfig returns a client for cfg; cfg is copied, not changed.
func NewForConfig(cfg *rest.Config) (*Clientset, error) {
	config := rest.CopyConfig(cfg)
	config.GroupVersion = &v1alpha1.SchemeGroupVersion
	config.APIPath = "/apis"
	config.NegotiatedSerializer = serializer.NewCodecFactory(Scheme).WithoutConversion()
	if config.UserAgent == "" {
		config.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(config)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", v1alpha1.SchemeGroupVersion, err)
	}
	return &Clientset{rest: client}, nil
}

// GatewayConfigs returns the GatewayConfigs of namespace, "" for all namespaces.
func (c *Clientset) GatewayConfigs(namespace string) GatewayConfigInterface {
	return gentype.NewClientWithList[*v1alpha1.GatewayConfig, *v1alpha1.GatewayConfigList](
		"gatewayconfigs", c.rest, ParameterCodec, namespace,
		func() *v1alpha1.GatewayConfig { return &v1alpha1.GatewayConfig{} },
		func() *v1alpha1.GatewayConfigList { return &v1alpha1.GatewayConfigList{} },
	)
}
