package sync

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// condition builds a condition for an object at generation; LastTransitionTime is
// filled in by mergeConditions.
func condition[T, R ~string](condType T, status bool, reason R, message string, generation int64) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{
		Type:               string(condType),
		Status:             s,
		Reason:             string(reason),
		Message:            message,
		ObservedGeneration: generation,
	}
}

// ourConditionPrefix starts the condition types of our own that the Gateway API does
// not define (ConsulAcceptedCondition).
const ourConditionPrefix = "consul-gateway-controller.github.io/"

// ownedConditionTypes are the Gateway API condition types this controller decides on
// the objects it writes (GatewayClass, Gateway, listener, its own route parent
// entries): it may replace or remove them. Any other type was set by someone else.
var ownedConditionTypes = map[string]bool{
	string(gatewayv1.GatewayConditionAccepted):                    true,
	string(gatewayv1.GatewayConditionProgrammed):                  true,
	string(gatewayv1.ListenerConditionResolvedRefs):               true,
	string(gatewayv1.ListenerConditionConflicted):                 true,
	string(gatewayv1.GatewayClassConditionStatusSupportedVersion): true,
	string(gatewayv1.RouteConditionPartiallyInvalid):              true,
}

// ownsCondition reports whether conditions of condType are ours to decide.
func ownsCondition(condType string) bool {
	return ownedConditionTypes[condType] || strings.HasPrefix(condType, ourConditionPrefix)
}

// mergeConditions returns desired with each condition's LastTransitionTime taken from
// the existing condition of the same type when its status did not change, and now
// otherwise, followed by the existing conditions of types we do not own, untouched and
// in their order: the spec forbids removing another controller's conditions. So a
// system that has not changed computes exactly the status it has, and produces no
// write.
func mergeConditions(existing, desired []metav1.Condition, now metav1.Time) []metav1.Condition {
	merged := make([]metav1.Condition, 0, len(desired)+len(existing))
	for _, c := range desired {
		c.LastTransitionTime = now
		for _, old := range existing {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
				break
			}
		}
		merged = append(merged, c)
	}
	for _, old := range existing {
		if !ownsCondition(old.Type) && findCondition(desired, old.Type) == nil {
			merged = append(merged, old)
		}
	}
	if len(merged) == 0 {
		return nil
	}
	return merged
}

// findCondition returns the condition of condType, or nil.
func findCondition(conds []metav1.Condition, condType string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == condType {
			return &conds[i]
		}
	}
	return nil
}
