package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
)

// MeshServices are read only when the API server serves them: an informer of a
// resource that does not exist would never sync, and the controller never start.
func TestMeshServicesClient(t *testing.T) {
	groupVersion := informers.MeshServiceResource.GroupVersion().String()
	tests := []struct {
		name   string
		served []*metav1.APIResourceList
		want   bool
	}{
		{name: "group not served", want: false},
		{name: "group without MeshServices", served: []*metav1.APIResourceList{{GroupVersion: groupVersion, APIResources: []metav1.APIResource{{Name: "meshes"}}}}, want: false},
		{name: "MeshServices served", served: []*metav1.APIResourceList{{GroupVersion: groupVersion, APIResources: []metav1.APIResource{{Name: "meshservices"}}}}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = tt.served
			client, err := meshServicesClient(t.Context(), kube, &rest.Config{Host: "https://127.0.0.1:1"})
			if err != nil {
				t.Fatal(err)
			}
			if got := client != nil; got != tt.want {
				t.Errorf("MeshService client made: %v, want %v", got, tt.want)
			}
		})
	}
}
