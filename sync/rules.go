package sync

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
)

// ruleProblem says why one rule cannot be programmed.
type ruleProblem struct {
	Reason  gatewayv1.RouteConditionReason // gatewayv1.RouteReasonUnsupportedValue
	Message string
}

// httpRuleProblem returns nil when Consul (per caps) can program the rule exactly, else
// why not (consullimits.HTTPRuleProblem). Unsupported features are reported, never
// silently dropped: the spec requires a rule an implementation cannot honour to be
// refused, and dropping a filter would change what the route does.
func httpRuleProblem(index int, rule gatewayv1.HTTPRouteRule, caps consullimits.Capabilities) *ruleProblem {
	return unsupportedRule(index, consullimits.HTTPRuleProblem(rule, caps))
}

// tcpRuleProblem returns nil when Consul (per caps) can program the TCP rule exactly
// (consullimits.TCPRuleProblem).
func tcpRuleProblem(index int, rule gatewayv1.TCPRouteRule, caps consullimits.Capabilities) *ruleProblem {
	return unsupportedRule(index, consullimits.TCPRuleProblem(rule, caps))
}

// unsupportedRule prefixes the rule index, the one thing every message needs to say;
// no message is no problem.
func unsupportedRule(index int, msg string) *ruleProblem {
	if msg == "" {
		return nil
	}
	return &ruleProblem{
		Reason:  gatewayv1.RouteReasonUnsupportedValue,
		Message: fmt.Sprintf("rule %d: %s", index, msg),
	}
}
