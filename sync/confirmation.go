package sync

import (
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// The contract between the status pipeline and its consumers (what they are handed,
// and when) is package contract; the status pipeline names its types here.
type (
	Confirmation = contract.Confirmation
	Publisher    = contract.Publisher
	Publishers   = contract.Publishers
)

// RouteDecision, Attachment and BackendRefIndex are defined in package decision, so
// that the translation can read a decision without depending on this package.
type (
	RouteDecision   = decision.Route
	Attachment      = decision.Attachment
	BackendRefIndex = decision.BackendRefIndex
)
