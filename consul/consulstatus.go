package consul

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// observe records Consul's own status on an entry of ours.
func (v *verdicts) observe(key translate.EntryKey, entry consulapi.ConfigEntry, owned bool, changed func(gatewayv1.Kind, cache.ObjectName)) {
	if !owned {
		return
	}
	owner, ok := reportedOwner(entry.GetMeta())
	if !ok {
		return
	}
	accepted := AcceptedCondition(entry)
	bindings := v.bindingsOf(key, entry)
	v.update(owner, changed, func(o *ownerState) {
		o.foreign = ""
		o.bindings = bindings
		if accepted == nil {
			o.consulKnown = false
			return
		}
		o.consulKnown = true
		o.consulAccepted = accepted.Status == consulapi.ConditionStatusTrue
		o.consulReason = accepted.Reason
		o.consulMessage = fmt.Sprintf("Consul %s %s: %s", key.Kind, key.Name, accepted.Message)
	})
}

// EntryStatus is the status Consul computed on an entry of a kind it judges (api-gateway,
// http-route, tcp-route); empty for any other kind.
func EntryStatus(entry consulapi.ConfigEntry) consulapi.ConfigEntryStatus {
	switch e := entry.(type) {
	case *consulapi.APIGatewayConfigEntry:
		return e.Status
	case *consulapi.HTTPRouteConfigEntry:
		return e.Status
	case *consulapi.TCPRouteConfigEntry:
		return e.Status
	default:
		return consulapi.ConfigEntryStatus{}
	}
}

// AcceptedCondition is Consul's Accepted condition on an entry, nil before Consul
// computed one.
func AcceptedCondition(entry consulapi.ConfigEntry) *consulapi.Condition {
	status := EntryStatus(entry)
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type == "Accepted" && c.Resource == nil {
			return c
		}
	}
	for i := range status.Conditions {
		if status.Conditions[i].Type == "Accepted" {
			return &status.Conditions[i]
		}
	}
	return nil
}

// bindingsOf reads Consul's Bound conditions on a route entry: one per parent the
// entry names (agent/consul/gateways/controller_gateways.go, reconcileRoute), whose
// Resource is that parent as written, an api-gateway entry and a listener. Conditions
// on entries whose names this controller cannot have written are left out.
func (v *verdicts) bindingsOf(key translate.EntryKey, entry consulapi.ConfigEntry) []binding {
	var out []binding
	for _, c := range EntryStatus(entry).Conditions {
		if c.Type != string(consulapi.RouteConditionBound) || c.Resource == nil || !namesAPIGateway(*c.Resource) {
			continue
		}
		namespace, name, ok := v.naming.SplitEntryName(c.Resource.Name)
		if !ok {
			continue
		}
		out = append(out, binding{
			gateway: cache.ObjectName{Namespace: namespace, Name: name},
			section: c.Resource.SectionName,
			verdict: bindingVerdict(key, c),
		})
	}
	// Consul lists the conditions in no fixed order; sorted, an unchanged status
	// compares equal.
	slices.SortFunc(out, func(a, b binding) int {
		return cmp.Or(cmp.Compare(a.gateway.Namespace, b.gateway.Namespace), cmp.Compare(a.gateway.Name, b.gateway.Name), cmp.Compare(a.section, b.section))
	})
	return out
}

// namesAPIGateway reports whether a parent reference names an api-gateway entry;
// Consul takes an empty kind for one too.
func namesAPIGateway(ref consulapi.ResourceReference) bool {
	return ref.Kind == consulapi.APIGateway || ref.Kind == ""
}

// notYetBound is how Consul 1.15 ends the message of a Bound=False it gives before it
// could judge the binding (see bindingVerdict).
const notYetBound = "has not been accepted"

// bindingVerdict reads one Bound condition. Consul 1.15 binds a route against the
// statuses its route and gateway entries held before the reconcile that binds them
// (controller_gateways.go, bindRoute): a new route is first refused on every parent
// with "route has not been accepted", and one written next to a new gateway with
// "gateway was not found" (GatewayNotFound) or "gateway has not been accepted", until
// the next reconcile binds it. Those are pending: they settle by themselves, and when
// they do not, the Gateway's own status says why (its entry is missing or refused).
// Reporting them as refusals would flap every new route's status, with a Warning Event.
// Any other refusal (wrong protocol, no such listener, no hostname in common) is final.
func bindingVerdict(key translate.EntryKey, c consulapi.Condition) contract.Binding {
	msg := fmt.Sprintf("Consul %s %s: %s", key.Kind, key.Name, c.Message)
	switch {
	case c.Status == consulapi.ConditionStatusTrue:
		return contract.Binding{State: contract.BindingBound, Reason: c.Reason, Message: msg}
	case c.Reason == string(consulapi.RouteReasonGatewayNotFound), strings.HasSuffix(c.Message, notYetBound):
		return contract.Binding{State: contract.BindingPending, Reason: c.Reason, Message: msg}
	default:
		return contract.Binding{State: contract.BindingRefused, Reason: c.Reason, Message: msg}
	}
}
