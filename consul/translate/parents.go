package translate

import (
	"fmt"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// parentListener is one Consul listener a route is written to, with the Gateway
// listeners it serves that the route attaches to.
type parentListener struct {
	gateway  cache.ObjectName
	ref      consulapi.ResourceReference
	hostname string // the Consul listener's hostname, "" for any
	members  []memberListener
}

// memberListener is a Gateway listener, by its name in the api-gateway entry's terms,
// its own hostname ("" for any), and the hostnames of the listeners of its port
// (itself included): a request goes to the most specific of them.
type memberListener struct {
	name      gatewayv1.SectionName
	hostname  string
	portHosts []string
}

// routeParents returns the written Consul listeners of the route's attachments that
// serve protocol, in attachment order, each once with the Gateway listeners of it the
// route attaches to: Consul refuses duplicate parents
// (Consul 1.15.4 agent/structs/config_entry_routes.go:152). Every parent names its listener (SectionName): a
// parent without one would bind the route to every listener, also those the route does
// not attach to. dropped are the listeners of another protocol, and why.
func (t *pass) routeParents(kind string, key cache.ObjectName, attachments []gwdecision.Attachment, protocol string) (parents []parentListener, dropped []droppedParent) {
	var missing []string
	for _, a := range attachments {
		gw, _ := t.read(readGateway, a.Gateway).(*programmedGateway)
		for _, name := range a.Listeners {
			var listener gatewayListener
			found := false
			if gw != nil {
				listener, found = gw.listeners[name]
			}
			if !found {
				missing = append(missing, a.Gateway.String()+"/"+string(name))
				continue
			}
			if listener.consul.Protocol != protocol {
				dropped = append(dropped, droppedParent{ProblemParent{a.Gateway, name},
					fmt.Sprintf("listener %s/%s is a %s listener in Consul; the route is left out of it", a.Gateway, name, listener.consul.Protocol)})
				continue
			}
			ref := consulapi.ResourceReference{Kind: consulapi.APIGateway, Name: gw.entryName, SectionName: listener.consul.Name, Namespace: gw.namespace, Partition: t.naming.Partition}
			member := memberListener{name: name, hostname: listener.hostname, portHosts: listener.portHosts}
			i := slices.IndexFunc(parents, func(q parentListener) bool { return q.ref == ref })
			if i < 0 {
				parents = append(parents, parentListener{gateway: a.Gateway, ref: ref, hostname: listener.consul.Hostname})
				i = len(parents) - 1
			}
			if !slices.ContainsFunc(parents[i].members, func(m memberListener) bool { return m.name == member.name }) {
				parents[i].members = append(parents[i].members, member)
			}
		}
	}
	// Listeners that are not written are the Gateway's problem, reported there; the
	// route has one only when it is served nowhere.
	if len(parents) == 0 && len(missing) > 0 {
		t.problem(kind, key, "none of the listeners the route is accepted on is programmed in Consul (%s)", strings.Join(missing, ", "))
	}
	return parents, dropped
}

// droppedParent is a listener a route attaches to but is left out of, and why.
type droppedParent struct {
	parent ProblemParent
	why    string
}

func (p parentListener) problemParent(m memberListener) ProblemParent {
	return ProblemParent{Gateway: p.gateway, Listener: m.name}
}

func parentRefs(parents []parentListener) []consulapi.ResourceReference {
	refs := make([]consulapi.ResourceReference, len(parents))
	for i, p := range parents {
		refs[i] = p.ref
	}
	return refs
}
