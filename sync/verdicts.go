package sync

import (
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// ConsulAcceptedCondition is the route condition, per parent of ours, that carries
// Consul's verdict on the route's entry; the Gateway API has no type for it.
const ConsulAcceptedCondition = "consul-gateway-controller.github.io/ConsulAccepted"

// ReasonListenersNotValid is the ConsulAccepted reason of a parent the route is
// accepted on (attachment ignores listener status) but served by no listener, because
// none of the listeners it attaches to can be programmed.
const ReasonListenersNotValid = "ListenersNotValid"

// ReasonOlderRouteServed is the ConsulAccepted reason of a TCPRoute accepted on a parent
// whose TCP listeners serve an older TCPRoute, as the spec says they do: it is not
// written to them.
const ReasonOlderRouteServed = "OlderRouteServed"

// allServicesKnown is used when no catalog is wired in.
type allServicesKnown struct{}

func (allServicesKnown) Known(string) bool                       { return true }
func (allServicesKnown) RegisteredOutsideKubernetes(string) bool { return false }
func (allServicesKnown) HasSynced() bool                         { return true }

// noVerdicts is used when no Consul syncer is wired in: nothing is ever programmed.
type noVerdicts struct{}

func (noVerdicts) Verdict(gatewayv1.Kind, cache.ObjectName) contract.Verdict {
	return contract.Verdict{}
}
func (noVerdicts) Binding(gatewayv1.Kind, cache.ObjectName, cache.ObjectName, gatewayv1.SectionName, gatewayv1.SectionName) contract.Binding {
	return contract.Binding{}
}
func (noVerdicts) HasSynced() bool { return true }
