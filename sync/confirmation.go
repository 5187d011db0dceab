package sync

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// This file is the contract between the status pipeline and its consumers (the Consul
// syncer, the data plane, the catalog registrar): what they are handed, and when.

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
	Route *RouteDecision
}

// RouteDecision, Attachment and BackendRefIndex are defined in package decision, so
// that the translation can read a decision without depending on this package.
type (
	RouteDecision   = decision.Route
	Attachment      = decision.Attachment
	BackendRefIndex = decision.BackendRefIndex
	RenamedBackend  = decision.RenamedBackend
)

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
