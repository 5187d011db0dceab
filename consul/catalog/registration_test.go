package catalog

import (
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

func TestRegistrationOfPod(t *testing.T) {
	r := NewRegistrar(Config{
		Naming: translate.Naming{Prefix: "k8s-"}, Ownership: translate.Ownership{Controller: "example.com/c", ClusterID: "one"},
		InstanceID: func(pod *corev1.Pod) string { return pod.Name + "@" + pod.Namespace },
		NodeName:   func(node string) string { return "k8s-gateway-" + node },
	})
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "edge", UID: "uid-edge"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "edge-1"},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.7", HostIP: "10.1.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	reg := r.registration(gw, pod)
	if reg.Node != "k8s-gateway-node-a" || reg.Address != "10.1.0.1" || reg.NodeMeta[metaSyntheticNode] != "true" || !reg.SkipNodeUpdate {
		t.Errorf("node %s at %s, meta %v, skip %v", reg.Node, reg.Address, reg.NodeMeta, reg.SkipNodeUpdate)
	}
	if s := reg.Service; s.Kind != consulapi.ServiceKindAPIGateway || s.ID != "edge-1@apps" || s.Service != "k8s-edge.apps" || s.Address != "10.244.0.7" {
		t.Errorf("service %+v", s)
	}
	if !r.ownInstance(reg.Service.Meta, cache.ObjectName{Namespace: "apps", Name: "edge"}) || r.ownInstance(reg.Service.Meta, cache.ObjectName{Namespace: "apps", Name: "other"}) {
		t.Error("the instance's meta does not name exactly its Gateway as owner")
	}
	if reg.Check.Status != consulapi.HealthPassing {
		t.Errorf("check %s for a Ready pod", reg.Check.Status)
	}
	notReady := pod.DeepCopy()
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	if got := r.registration(gw, notReady).Check.Status; got != consulapi.HealthCritical {
		t.Errorf("check %s for a pod that is not Ready, want critical", got)
	}

	// What the catalog answers for the same registration is the same instance; a
	// changed check or address is not.
	entry := &consulapi.ServiceEntry{
		Node:    &consulapi.Node{Node: reg.Node, Address: reg.Address},
		Service: &consulapi.AgentService{Kind: reg.Service.Kind, ID: reg.Service.ID, Service: reg.Service.Service, Address: reg.Service.Address, Meta: reg.Service.Meta},
		Checks:  consulapi.HealthChecks{{CheckID: reg.Check.CheckID, ServiceID: reg.Service.ID, Status: consulapi.HealthPassing}},
	}
	if !sameInstance(entry, reg) {
		t.Error("the catalog's copy of the registration is not the same instance")
	}
	entry.Checks[0].Status = consulapi.HealthCritical
	if sameInstance(entry, reg) {
		t.Error("a critical check is the same as a passing one")
	}
	entry.Checks[0].Status = consulapi.HealthPassing
	entry.Service.Address = "10.244.0.8"
	if sameInstance(entry, reg) {
		t.Error("another address is the same instance")
	}
}
