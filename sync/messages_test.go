package sync

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Messages the spec prescribes, or that must say what is wrong.
func TestListenerMessages(t *testing.T) {
	t.Parallel()
	noTLS := httpsListener("https", 443, "", "cert")
	noTLS.TLS = nil
	badSelector := allowSelector(httpListener("http", 80, ""), nil)
	badSelector.AllowedRoutes.Namespaces.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Among", Values: []string{"a"}}}}
	noSelector := allowSelector(httpListener("http", 80, ""), nil)
	noSelector.AllowedRoutes.Namespaces.Selector = nil

	tests := []struct {
		name     string
		listener gatewayv1.Listener
		want     summary
		message  string // the condition's message contains it
	}{
		{"HTTPS without a tls block", noTLS, summary{"ResolvedRefs", "False", "InvalidCertificateRef"}, "has no tls block"},
		{"an invalid namespace selector", badSelector, summary{"Accepted", "False", "UnsupportedValue"}, "allowedRoutes.namespaces.selector is not a valid label selector"},
		{"From Selector without a selector", noSelector, summary{"Accepted", "False", "UnsupportedValue"}, "allowedRoutes.namespaces.from is Selector, but no selector is given"},
		{"an IP address as hostname", httpListener("http", 80, "10.1.2.3"), summary{"Accepted", "False", "UnsupportedValue"}, `hostname "10.1.2.3" is an IP address; Gateway API allows only DNS names`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := gateway("infra", "gw", tt.listener)
			d := newTestDecider(t, ourClass(), gw)
			status, err := d.gatewayStatus(gw, ourClass(), metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			c := findCondition(status.Listeners[0].Conditions, tt.want.Type)
			if c == nil {
				t.Fatalf("no %s condition: %v", tt.want.Type, summarize(status.Listeners[0].Conditions))
			}
			if got := (summary{c.Type, string(c.Status), c.Reason}); got != tt.want || !strings.Contains(c.Message, tt.message) {
				t.Errorf("%v %q, want %v with a message containing %q", got, c.Message, tt.want, tt.message)
			}
		})
	}
}

// The spec: the PartiallyInvalid message "MUST start with the prefix "Dropped Rule"".
func TestPartiallyInvalidMessageStartsWithDroppedRule(t *testing.T) {
	t.Parallel()
	route := httpRoute("infra", "r", nil, parentRef("", "gw", ""))
	route.Spec.Rules = append(route.Spec.Rules, gatewayv1.HTTPRouteRule{
		Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{}}},
	})
	d := newTestDecider(t, ourClass(), gateway("infra", "gw", httpListener("http", 80, "")), service("infra", "echo", 8080), route)
	view, rules, err := d.viewRoute(route)
	if err != nil {
		t.Fatal(err)
	}
	parents, _, err := d.routeParentStatuses(view, rules, nil, route.Generation, metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := findCondition(parents[0].Conditions, string(gatewayv1.RouteConditionPartiallyInvalid))
	if c == nil {
		t.Fatalf("no PartiallyInvalid condition: %v", summarize(parents[0].Conditions))
	}
	if !strings.HasPrefix(c.Message, "Dropped Rule") || !strings.Contains(c.Message, "rule 1") {
		t.Errorf("PartiallyInvalid message %q, want it to start with \"Dropped Rule\" and name rule 1", c.Message)
	}
}
