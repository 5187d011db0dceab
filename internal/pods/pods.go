// Package pods holds what the data plane and the catalog registrar both read off a
// gateway pod.
package pods

import corev1 "k8s.io/api/core/v1"

// Ready reports whether a gateway pod is Running and Ready, and not on its way out:
// the pods that count towards a Gateway's Programmed condition and that are
// registered in Consul's catalog as passing.
func Ready(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
