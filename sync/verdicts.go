package sync

import (
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

// Verdict is what Consul said about the entries written for an object.
type Verdict struct {
	// Known is false until Consul answered for the object's current entries.
	Known      bool
	Programmed bool
	Reason     string
	Message    string
}

// Binding is what Consul said about serving a route on one listener of one Gateway,
// or why the route could not be written for that listener. It narrows the route's
// Verdict for that parent: a route Consul accepted may still be refused on some of its
// parents.
type Binding struct {
	State   BindingState
	Reason  string
	Message string
}

// BindingState is how far Consul got with serving a route on a listener.
type BindingState int

const (
	// BindingUnreported means Consul said nothing about the listener: its
	// answer is for an earlier version of the route, or it reports no bindings.
	BindingUnreported BindingState = iota
	// BindingPending means not bound yet, for a cause that settles by itself or is
	// reported on the Gateway (its entry is missing or refused).
	BindingPending
	BindingBound
	// BindingRefused means Consul will not serve the route on the listener, or the
	// route's entry could not be written for it.
	BindingRefused
)

// ConsulVerdicts reports Consul's verdicts on the entries written for objects, and its
// bindings of routes to listeners. It is how Consul's answers reach status without this
// package knowing Consul: the status workers read it like any other input.
type ConsulVerdicts interface {
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

// ConsulServiceNames says which services Consul's catalog holds: a MeshService that
// names one it does not hold has no instance to send traffic to.
type ConsulServiceNames interface {
	Known(name string) bool
	// RegisteredOutsideKubernetes reports whether the catalog has an instance of
	// the service name that consul-k8s did not register (a VM's, another
	// platform's); false while unknown.
	RegisteredOutsideKubernetes(name string) bool
	// HasSynced reports whether the catalog was read once; the status workers wait
	// for it, as for the verdicts.
	HasSynced() bool
}

// allServicesKnown is used when no catalog is wired in.
type allServicesKnown struct{}

func (allServicesKnown) Known(string) bool                       { return true }
func (allServicesKnown) RegisteredOutsideKubernetes(string) bool { return false }
func (allServicesKnown) HasSynced() bool                         { return true }

// noVerdicts is used when no Consul syncer is wired in: nothing is ever programmed.
type noVerdicts struct{}

func (noVerdicts) Verdict(gatewayv1.Kind, cache.ObjectName) Verdict { return Verdict{} }
func (noVerdicts) Binding(gatewayv1.Kind, cache.ObjectName, cache.ObjectName, gatewayv1.SectionName) Binding {
	return Binding{}
}
func (noVerdicts) HasSynced() bool { return true }
