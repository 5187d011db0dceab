package sync

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// mergeConditions returns desired with each condition's LastTransitionTime taken from
// the existing condition of the same type when its status did not change, and now
// otherwise. So a system that has not changed computes exactly the status it has, and
// produces no write.
func mergeConditions(existing, desired []metav1.Condition, now metav1.Time) []metav1.Condition {
	if desired == nil {
		return nil
	}
	merged := make([]metav1.Condition, len(desired))
	for i, c := range desired {
		c.LastTransitionTime = now
		for _, old := range existing {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
				break
			}
		}
		merged[i] = c
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
