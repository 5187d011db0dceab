// Package contract is what the status pipeline and its consumers (the Consul syncer,
// the data plane, the catalog registrar, the identity manager) agree on: the
// confirmations the pipeline hands out and what a confirmed Gateway's status means to
// them (AcceptedAtGeneration, AcceptedGateways), and what the pipeline reads back:
// Consul's verdicts and the state of the data plane. It is data, interfaces and
// readings of them only (no client, no clock), so a consumer depends on it and not on
// the status workers.
package contract

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// Confirmation is an object whose status the API server holds exactly as this
// controller computed it: the object a status write returned, or a cached object whose
// stored status already equals the computed one. Object is nil when the object was
// deleted, is no longer ours, or must not be served (a Gateway asking for TLS Consul
// cannot honour; its status says why); whatever was derived from it must go.
type Confirmation struct {
	Kind   gatewayv1.Kind
	Key    cache.ObjectName
	Object runtime.Object
	// Route is set for routes with an Object: the decision made together with the
	// confirmed status, which the status itself does not spell out.
	Route *decision.Route
}

// Publisher receives confirmations. For one key they arrive in the order the API server
// confirmed them, because one key is synced by one worker at a time.
type Publisher interface {
	Publish(ctx context.Context, c Confirmation)
}

// Publishers hands each confirmation to every one of its Publishers, in order.
type Publishers []Publisher

// Publish implements Publisher.
func (ps Publishers) Publish(ctx context.Context, c Confirmation) {
	for _, p := range ps {
		p.Publish(ctx, c)
	}
}

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
	// listener of gateway (its name in the api-gateway entry's terms, see
	// gatewayapi.ListenerSetListenerName), which Consul serves as its listener
	// consulListener: the Gateway's listeners on one port are one Consul listener.
	Binding(kind gatewayv1.Kind, route, gateway cache.ObjectName, listener, consulListener gatewayv1.SectionName) Binding
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
