package contract

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// GatewayDeployments reports the state of the pods and Service a Gateway is deployed
// with, when this controller deploys them. The Gateway's addresses come from it, and
// its Programmed condition needs a Ready pod and an address besides Consul's verdict.
type GatewayDeployments interface {
	State(gw *gatewayv1.Gateway) DeploymentState
	// HasSynced reports whether the caches the states come from have synced.
	HasSynced() bool
}

// DeploymentState is what a Gateway's data plane looks like in the cluster.
type DeploymentState struct {
	// Addresses are the Gateway's addresses, from its Service.
	Addresses []gatewayv1.GatewayStatusAddress
	// ReadyPods counts the gateway pods that are Ready.
	ReadyPods int
	// Problem says why the data plane cannot be deployed for now (an object of its
	// name that someone else owns, pods that cannot log in to Consul); "" when it can.
	// Programmed is False with reason Pending and this message.
	Problem string
	// Invalid says why the data plane cannot be deployed as the Gateway is: a name or
	// label derived from it breaks a Kubernetes limit, or the API server refused an
	// object built from it as invalid; "" when nothing does. Nothing is written for
	// such a Gateway, and Programmed is False with reason Invalid and this message.
	Invalid string
	// PodProblem says what the gateway pods report that keeps them from being Ready
	// (a container's waiting reason, its last exit, a pod the scheduler cannot
	// place); "" when a pod is Ready or none reports anything but progress. It never
	// holds what changes at each restart (counts, back-off times), so a crash loop
	// does not rewrite the Gateway's status at every crash.
	PodProblem string
}

// AcceptedAtGeneration reports whether a confirmed Gateway's status says Accepted=True
// for its current spec: what the data plane and the catalog registration act on.
func AcceptedAtGeneration(gw *gatewayv1.Gateway) bool {
	return acceptedAt(gw.Status.Conditions, gw.Generation)
}

// ListenerSetAcceptedAtGeneration is AcceptedAtGeneration for a ListenerSet.
func ListenerSetAcceptedAtGeneration(set *gatewayv1.ListenerSet) bool {
	return acceptedAt(set.Status.Conditions, set.Generation)
}

func acceptedAt(conds []metav1.Condition, generation int64) bool {
	c := meta.FindStatusCondition(conds, "Accepted")
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}
