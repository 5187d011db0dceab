package dataplane

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// SyntheticNodePrefix starts the name of every Consul node gateway pods are
// registered on, after the --consul-entry-prefix.
const SyntheticNodePrefix = "gateway-"

// SyntheticNode is the Consul node that gateway pods on the Kubernetes node are
// registered on, and that their consul-dataplane names: prefix then the node's name.
// A fixed prefix lets the controller's ACL token write only these nodes
// (node_prefix), where a suffix ("<node>-virtual") needed write on every node.
func SyntheticNode(prefix, node string) string {
	if prefix == "" {
		prefix = SyntheticNodePrefix
	}
	return prefix + node
}

// ProxyServiceID is the ID of a gateway pod's instance in Consul's catalog, which its
// consul-dataplane names with -proxy-service-id: "<pod>.<namespace>". Pods of every
// namespace share the synthetic node of their Kubernetes node, so the pod's name alone
// would let a pod of another namespace, named alike, replace the instance.
func ProxyServiceID(pod *corev1.Pod) string { return pod.Name + "." + pod.Namespace }

// OwnsPod reports whether pod is one of the Gateway's gateway pods: controlled by a
// ReplicaSet of the Gateway's Deployment (named after it and the pod's template hash),
// not merely labelled like one.
func OwnsPod(gw *gatewayv1.Gateway, pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	return ref != nil && ref.APIVersion == appsv1.SchemeGroupVersion.String() && ref.Kind == "ReplicaSet" &&
		hash != "" && ref.Name == Name(gw)+"-"+hash
}

// PodSelector selects a Gateway's pods within its namespace.
func PodSelector(gateway cache.ObjectName) labels.Selector {
	return labels.SelectorFromSet(map[string]string{GatewayNameLabel: gateway.Name, ManagedByLabel: ManagedByValue})
}
