package testenv

import (
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// MeshService returns a consul-k8s MeshService naming the Consul service consulName,
// of the cluster peer peer ("" for the local datacenter).
func MeshService(namespace, name, consulName, peer string) *unstructured.Unstructured {
	spec := map[string]any{"name": consulName}
	if peer != "" {
		spec["peer"] = peer
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(gatewayapi.MeshServiceGroup + "/" + gatewayapi.MeshServiceVersion)
	u.SetKind(gatewayapi.MeshServiceKind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// MeshServices is the admin's client of the MeshServices of namespace.
func (e *Env) MeshServices(t testing.TB, namespace string) dynamic.ResourceInterface {
	t.Helper()
	client, err := dynamic.NewForConfig(e.Kube.Config(AdminUser))
	if err != nil {
		t.Fatal(err)
	}
	resource := schema.GroupVersionResource{Group: gatewayapi.MeshServiceGroup, Version: gatewayapi.MeshServiceVersion, Resource: gatewayapi.MeshServiceResource}
	return client.Resource(resource).Namespace(namespace)
}

// CreateMeshService creates m; it goes with its namespace.
func (e *Env) CreateMeshService(t testing.TB, m *unstructured.Unstructured) {
	t.Helper()
	if _, err := e.MeshServices(t, m.GetNamespace()).Create(t.Context(), m, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create MeshService %s/%s: %v", m.GetNamespace(), m.GetName(), err)
	}
}

// RegisterPodService registers an instance of the Consul service name at address as
// consul-k8s's endpoints controller registers a pod of namespace: with the namespace
// in the instance's meta, on a node of that namespace's. It is deregistered when the
// test ends.
func (e *Env) RegisterPodService(t testing.TB, namespace, name, address string) {
	t.Helper()
	node := "k8s-" + namespace
	reg := &consulapi.CatalogRegistration{Node: node, Address: "10.4.1.254",
		Service: &consulapi.AgentService{ID: name, Service: name, Address: address, Port: 8080,
			Meta: map[string]string{"k8s-namespace": namespace}}}
	if _, err := e.ConsulClient.Catalog().Register(reg, nil); err != nil {
		t.Fatalf("register Consul service %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = e.ConsulClient.Catalog().Deregister(&consulapi.CatalogDeregistration{Node: node, ServiceID: name}, nil)
	})
}

// RegisterOutsideService registers an instance of the Consul service name at address
// on the node "outside-kubernetes", as a VM's agent would, and deregisters it when the
// test ends.
func (e *Env) RegisterOutsideService(t testing.TB, name, address string) {
	t.Helper()
	const node = "outside-kubernetes"
	reg := &consulapi.CatalogRegistration{Node: node, Address: "10.4.0.254",
		Service: &consulapi.AgentService{ID: name, Service: name, Address: address, Port: 8080}}
	if _, err := e.ConsulClient.Catalog().Register(reg, nil); err != nil {
		t.Fatalf("register Consul service %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = e.ConsulClient.Catalog().Deregister(&consulapi.CatalogDeregistration{Node: node, ServiceID: name}, nil)
	})
}
