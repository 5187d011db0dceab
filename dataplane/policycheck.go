package dataplane

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// policyProbeNamespace and policyProbeName are the ServiceAccount whose dry-run
// creation CheckAdmissionPolicy expects refused: the admission policy of deploy/
// refuses every write of the controller in kube-system (its rule "namespace").
const (
	policyProbeNamespace = "kube-system"
	policyProbeName      = "consul-gateway-controller-admission-probe"
)

// policyProbeRefusal is what the refusal of the probe must contain: an admission
// policy's denial by the rule that keeps the controller out of kube-system.
const policyProbeRefusal = "rule namespace: "

// errAdmissionPolicyNotInForce is returned by CheckAdmissionPolicy when the API
// server admitted the probe the policy must refuse.
var errAdmissionPolicyNotInForce = errors.New("the admission policy of deploy/validatingadmissionpolicy.yaml is not in force for this controller's identity")

// CheckAdmissionPolicy asks the API server, with a dry run that writes nothing, to
// create a ServiceAccount the admission policy must refuse this client: the policy
// narrows the cluster-wide write on Deployments, Services and ServiceAccounts that
// deploying gateways needs, and without it a stolen token or a bug may write any
// workload. Any answer but the policy's refusal is an error: admitted (no policy, no
// binding, or a client the policy does not match) or another failure (which says
// nothing about the policy).
func CheckAdmissionPolicy(ctx context.Context, client kubernetes.Interface) error {
	probe := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: policyProbeNamespace, Name: policyProbeName}}
	_, err := client.CoreV1().ServiceAccounts(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return fmt.Errorf("%w: a dry-run create of ServiceAccount %s/%s was admitted", errAdmissionPolicyNotInForce, probe.Namespace, probe.Name)
	case isPolicyRefusal(err) && strings.Contains(err.Error(), policyProbeRefusal):
		// Not the refusal's text: an expected refusal is no "forbidden" to look into.
		klog.FromContext(ctx).V(2).Info("Admission policy in force: its rule namespace refused the dry-run probe", "probe", klog.KObj(probe))
		return nil
	default:
		return fmt.Errorf("check the admission policy with a dry-run create of ServiceAccount %s/%s: %w", probe.Namespace, probe.Name, err)
	}
}

// isPolicyRefusal reports whether err is a ValidatingAdmissionPolicy's refusal.
func isPolicyRefusal(err error) bool {
	return (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) &&
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '")
}
