package informers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// endpointSlice is a hand-made EndpointSlice of Service namespace/service whose
// endpoints point at pods.
func endpointSlice(namespace, name, service string, pods ...string) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, pod := range pods {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: pod}})
	}
	return slice
}

// TestEndpointSliceEventHandlers: a Service without a selector resolves through its
// EndpointSlices' pods, so a slice's change re-judges the routes naming its Service,
// and a pod's change those naming a Service whose slice points at it.
func TestEndpointSliceEventHandlers(t *testing.T) {
	slice := endpointSlice("apps", "web-svc-1", "web-svc", "backend-1")
	cases := []eventCase{
		{
			name:  "slice of a routed Service",
			event: func(h eventHandlers) { h.endpointSlices.OnAdd(slice, false) },
			want:  enqueued{HTTPRoutes: []string{"apps/web"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name:  "slice deleted",
			event: func(h eventHandlers) { h.endpointSlices.OnDelete(tombstone(slice)) },
			want:  enqueued{HTTPRoutes: []string{"apps/web"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name:  "slice of a Service no route names",
			event: func(h eventHandlers) { h.endpointSlices.OnAdd(endpointSlice("apps", "other-1", "other"), false) },
			want:  enqueued{},
		},
		{
			// The pod no Service selects is an endpoint of web-svc by the slice.
			name: "pod a slice points at",
			event: func(h eventHandlers) {
				h.pods.OnAdd(testenv.InjectedPod("apps", "backend-1", map[string]string{"app": "none"}, "", 80), false)
			},
			want: enqueued{HTTPRoutes: []string{"apps/web"}, GRPCRoutes: []string{"apps/rpc"}},
		},
	}
	runEventCases(t, cases, slice)
}
