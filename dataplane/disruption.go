package dataplane

import (
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// podDisruptionBudget lets a voluntary disruption (a node drain's evictions) take at
// most one of a Gateway's pods at a time. maxUnavailable rather than minAvailable:
// it holds for any number of replicas, an autoscaler's included, and at one replica
// it allows the eviction, so a Gateway of one pod (the default) never blocks a node
// drain; two or more replicas are what keep a Gateway serving through one.
// AlwaysAllow evicts a pod that is not Ready whatever the budget: a crash-looping
// pod serves nothing, and must not hold a drain either.
func podDisruptionBudget(gw *gatewayv1.Gateway, name string, labels map[string]string, owner *metav1ac.OwnerReferenceApplyConfiguration) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(name, gw.Namespace).
		WithLabels(labels).
		WithOwnerReferences(owner).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(gw))).
			WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow))
}

// rollingUpdate starts a new pod and waits for it to be Ready before it stops an old
// one: a roll never lowers a Gateway's Ready pods, one pod (the default) included.
// It needs room for one more pod per Gateway while it rolls.
func rollingUpdate() *appsv1ac.DeploymentStrategyApplyConfiguration {
	return appsv1ac.DeploymentStrategy().
		WithType(appsv1.RollingUpdateDeploymentStrategyType).
		WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
			WithMaxUnavailable(intstr.FromInt32(0)).
			WithMaxSurge(intstr.FromInt32(1)))
}
