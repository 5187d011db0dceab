package dataplane

import (
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// unfit refuses what the API server would refuse forever, and nothing else: each
// case's problem names the value that breaks a limit and the limit.
func TestUnfit(t *testing.T) {
	withInfra := func(gw *gatewayv1.Gateway, labels map[gatewayv1.LabelKey]gatewayv1.LabelValue, annotations map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue) *gatewayv1.Gateway {
		gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{Labels: labels, Annotations: annotations}
		return gw
	}
	withClass := func(gw *gatewayv1.Gateway, class string) *gatewayv1.Gateway {
		gw.Spec.GatewayClassName = gatewayv1.ObjectName(class)
		return gw
	}
	for _, tc := range []struct {
		name    string
		gateway *gatewayv1.Gateway
		allowed gatewayapi.KeyAllowlist
		want    []string // in the problem, which is "" when want is empty
	}{
		{name: "short names", gateway: testGateway("web")},
		// The objects' name is cut with a hash (Name); the labels hold 63.
		{name: "a 63-character Gateway name", gateway: testGateway(strings.Repeat("a", 63))},
		{name: "a 64-character Gateway name", gateway: testGateway(strings.Repeat("a", 64)), want: []string{
			"label gateway.networking.k8s.io/gateway-name=\"" + strings.Repeat("a", 64) + "\": must be no more than 63 bytes",
			"needs a name of at most 63 characters",
		}},
		{name: "a 253-character Gateway name", gateway: testGateway(strings.Repeat("a", 253)), want: []string{
			"label gateway.networking.k8s.io/gateway-name=", "must be no more than 63 bytes",
		}},
		{name: "a 64-character class name", gateway: withClass(testGateway("web"), strings.Repeat("c", 64)), want: []string{
			"label gateway.networking.k8s.io/gateway-class-name=\"" + strings.Repeat("c", 64) + "\": must be no more than 63 bytes",
		}},
		{name: "a Gateway name with a dot", gateway: testGateway("web.example"), want: []string{
			`would be named "web.example-consul" (<gateway>-<class>), which is not a valid Service name`,
		}},
		{name: "a class name with a dot", gateway: withClass(testGateway("web"), "consul.example.com"), want: []string{
			`would be named "web-consul.example.com"`,
		}},
		{name: "infrastructure labels and annotations that fit", gateway: withInfra(testGateway("web"),
			map[gatewayv1.LabelKey]gatewayv1.LabelValue{"team": "edge", "example.com/tier": "front"},
			map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"example.com/note": gatewayv1.AnnotationValue(strings.Repeat("n", 4096))}),
			allowed: gatewayapi.KeyAllowlist{"example.com/*"}},
		// The CRD validates these; a cluster whose CRDs do not still writes nothing.
		{name: "infrastructure values that do not fit", gateway: withInfra(testGateway("web"),
			map[gatewayv1.LabelKey]gatewayv1.LabelValue{"team": "edge team"},
			map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"bad key": "x"}), want: []string{
			`label team="edge team": a valid label must be`,
			`spec.infrastructure.annotations: Invalid value: "bad key"`,
		}},
		// A key the operator does not allow is left out, so it cannot break anything.
		{name: "a key not allowed is not checked", gateway: withInfra(testGateway("web"),
			map[gatewayv1.LabelKey]gatewayv1.LabelValue{"example.com/tier": "not a value"}, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unfit(tc.gateway, tc.allowed)
			if len(tc.want) == 0 {
				if got != "" {
					t.Errorf("Unfit = %q, want none", got)
				}
				return
			}
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("Unfit = %q\nwant it to say %q", got, want)
				}
			}
		})
	}
}
