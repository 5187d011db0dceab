package testenv

import (
	"testing"

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
