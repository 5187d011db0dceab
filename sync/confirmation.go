package sync

import (
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// RouteDecision, Attachment and BackendRefIndex are defined in package decision, so
// that the translation can read a decision without depending on this package.
type (
	RouteDecision   = decision.Route
	Attachment      = decision.Attachment
	BackendRefIndex = decision.BackendRefIndex
	RenamedBackend  = decision.RenamedBackend
)
