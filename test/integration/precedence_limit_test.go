package integration

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestRoutedAsSpecifiedPastTheMatchLimit: a listener's precedence is judged for the
// matches of its oldest routes up to 256 (then by namespace/name). Two routes of 128
// matches fill it; a third route on the listener is told plainly that its precedence
// was not judged, and is judged again once one of them goes.
func TestRoutedAsSpecifiedPastTheMatchLimit(t *testing.T) {
	const prefix = "routed-limit"
	startController(t, testenv.StackController(prefix), controllerOptions{})
	s := env.NewGatewayStack(t, prefix, "gw", 80, "echo")
	for _, name := range []string{"big1", "big2"} {
		env.Create(t, routeWithMatches(s, name, 128))
	}
	awaitRoutedText(t, s, "big2", "True/RoutedAsSpecified")
	env.Create(t, s.Route("late"))
	awaitRoutedText(t, s, "late", "Unknown/PrecedenceNotJudged", "Precedence was not judged for this route", "listener http serves 257 matches", "up to 256")
	awaitRoutedText(t, s, "big1", "True/RoutedAsSpecified")

	if err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Delete(t.Context(), "big2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRoutedText(t, s, "late", "True/RoutedAsSpecified")
}

// routeWithMatches is the stack's route with matches PathPrefix matches, 64 to a rule
// (the most a rule may have).
func routeWithMatches(s testenv.Stack, name string, matches int) *gatewayv1.HTTPRoute {
	r := s.Route(name)
	template := r.Spec.Rules[0]
	r.Spec.Rules = nil
	for i := 0; i < matches; i += 64 {
		rule := *template.DeepCopy()
		rule.Matches = nil
		for j := i; j < min(i+64, matches); j++ {
			rule.Matches = append(rule.Matches, gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Value: new(fmt.Sprintf("/%s/%d", name, j))}})
		}
		r.Spec.Rules = append(r.Spec.Rules, rule)
	}
	return r
}
