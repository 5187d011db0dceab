package backends

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// endpointsCase is one case of testdata/endpoints.yaml: a Service without a selector,
// its EndpointSlices, the other Services of its namespace and the injected pods.
type endpointsCase struct {
	Name           string                       `json:"name"`
	Service        *corev1.Service              `json:"service"`
	EndpointSlices []*discoveryv1.EndpointSlice `json:"endpointSlices"`
	Services       []*corev1.Service            `json:"services"`
	Pods           []*corev1.Pod                `json:"pods"`
	Port           int32                        `json:"port"`
	Want           wantResolution               `json:"want"`
}

func TestResolveEndpoints(t *testing.T) {
	for _, tc := range readCases[endpointsCase](t, "testdata/endpoints.yaml") {
		t.Run(tc.Name, func(t *testing.T) {
			port := servicePort(t, tc.Service, tc.Port)
			ref := tc.Service.Namespace + "/" + tc.Service.Name
			services := append([]*corev1.Service{tc.Service}, tc.Services...)
			got, problem := ResolveEndpoints(ref, tc.Service, port, tc.EndpointSlices, services, tc.Pods)
			tc.Want.check(t, "ResolveEndpoints", got, problem)
		})
	}
}
