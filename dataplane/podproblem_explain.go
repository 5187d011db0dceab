package dataplane

import corev1 "k8s.io/api/core/v1"

// PodProblem is what keeps one gateway pod from being Ready, as the Gateway's status
// words it; "" for a Ready pod or one that reports only progress. explain gateway
// says it per pod.
func PodProblem(pod *corev1.Pod) string { return podProblem(pod) }
