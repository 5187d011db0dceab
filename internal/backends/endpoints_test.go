package backends

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"
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
	Want           struct {
		Service string `json:"service"`
		Pods    int    `json:"pods"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"want"`
}

func TestResolveEndpoints(t *testing.T) {
	raw, err := os.ReadFile("testdata/endpoints.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []endpointsCase
	if err := yaml.UnmarshalStrict(raw, &cases); err != nil {
		t.Fatalf("testdata/endpoints.yaml: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var port *corev1.ServicePort
			for i := range tc.Service.Spec.Ports {
				if tc.Service.Spec.Ports[i].Port == tc.Port {
					port = &tc.Service.Spec.Ports[i]
				}
			}
			if port == nil {
				t.Fatalf("the Service has no port %d", tc.Port)
			}
			ref := tc.Service.Namespace + "/" + tc.Service.Name
			services := append([]*corev1.Service{tc.Service}, tc.Services...)
			got, problem := ResolveEndpoints(ref, tc.Service, port, tc.EndpointSlices, services, tc.Pods)
			if tc.Want.Reason != "" {
				if problem == nil {
					t.Fatalf("ResolveEndpoints = %+v, want a %s problem", got, tc.Want.Reason)
				}
				if problem.Reason != tc.Want.Reason || !strings.Contains(problem.Message, tc.Want.Message) {
					t.Fatalf("problem %s: %s\nwant %s containing %q", problem.Reason, problem.Message, tc.Want.Reason, tc.Want.Message)
				}
				return
			}
			if problem != nil {
				t.Fatalf("unexpected problem %s: %s", problem.Reason, problem.Message)
			}
			if diff := cmp.Diff(Resolution{Service: tc.Want.Service, Pods: tc.Want.Pods}, got); diff != "" {
				t.Errorf("ResolveEndpoints (-want +got):\n%s", diff)
			}
		})
	}
}
