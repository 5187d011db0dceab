package sync

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ConsulAcceptedCondition is the route condition, per parent of ours, that carries
// Consul's verdict on the route's entry; the Gateway API has no type for it.
const ConsulAcceptedCondition = "consul-gateway-controller.github.io/ConsulAccepted"

// ReasonListenersNotValid is the ConsulAccepted reason of a parent the route is
// accepted on (attachment ignores listener status) but served by no listener, because
// none of the listeners it attaches to can be programmed.
const ReasonListenersNotValid = "ListenersNotValid"

// Verdict is what the data plane said about the entries written for an object.
type Verdict struct {
	// Known is false until the data plane answered for the object's current entries.
	Known      bool
	Programmed bool
	Reason     string
	Message    string
}

// Binding is what the data plane said about serving a route on one listener of one
// Gateway. It narrows the route's Verdict for that parent: a route the data plane
// accepted may still be refused on some of its parents.
type Binding struct {
	State   BindingState
	Reason  string
	Message string
}

// BindingState is how far the data plane got with serving a route on a listener.
type BindingState int

const (
	// BindingUnreported means the data plane said nothing about the listener: its
	// answer is for an earlier version of the route, or it reports no bindings.
	BindingUnreported BindingState = iota
	// BindingPending means not bound yet, for a cause that settles by itself or is
	// reported on the Gateway (its entry is missing or refused).
	BindingPending
	BindingBound
	// BindingRefused means the data plane will not serve the route on the listener.
	BindingRefused
)

// DataPlane reports verdicts. It is how Consul's answers reach status without this
// package knowing Consul: the status workers read it like any other input.
type DataPlane interface {
	Verdict(kind gatewayv1.Kind, key cache.ObjectName) Verdict
	// Binding reports the verdict on serving the route of kind named route on one
	// listener of gateway.
	Binding(kind gatewayv1.Kind, route, gateway cache.ObjectName, listener gatewayv1.SectionName) Binding
	// HasSynced reports whether the verdicts the data plane already holds (Consul's
	// judgement of the entries an earlier leader wrote) have been read. The status
	// workers wait for it like for a cache: judging before would publish Pending over
	// every Programmed status on each restart and failover.
	HasSynced() bool
}

// noDataPlane is used until a data plane is wired in: nothing is ever programmed.
type noDataPlane struct{}

func (noDataPlane) Verdict(gatewayv1.Kind, cache.ObjectName) Verdict { return Verdict{} }
func (noDataPlane) Binding(gatewayv1.Kind, cache.ObjectName, cache.ObjectName, gatewayv1.SectionName) Binding {
	return Binding{}
}
func (noDataPlane) HasSynced() bool { return true }

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
	// Problem says why the data plane cannot be deployed at all; "" when it can.
	Problem string
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
