package sync

import (
	"fmt"
	"strings"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// Request is one HTTP request whose way through a Gateway explain request asks for.
type Request struct {
	// Method is "" for GET.
	Method string
	// Host is the request's host, without a port.
	Host string
	Port gatewayv1.PortNumber
	Path string
	// Headers are keyed by name, any case; Query by name.
	Headers map[string]string
	Query   map[string]string
}

// RuleRef names one rule of an HTTPRoute.
type RuleRef struct {
	Route cache.ObjectName
	Rule  int
}

// RequestRouting is where Gateway API and Consul 1.15 send a request on a Gateway,
// as the status workers model it (precedence_model.go).
type RequestRouting struct {
	// Listener is the Gateway listener that takes the request: the one on its port
	// whose hostname matches the host most closely; "" when none does.
	Listener gatewayv1.SectionName
	// ConsulListener is the api-gateway entry's listener that serves that port.
	ConsulListener gatewayv1.SectionName
	// ListenerSet names the ListenerSet that declares Listener; "" for the Gateway's own.
	ListenerSet string
	// NoListener says why no listener takes the request.
	NoListener string
	// Spec is the rule Gateway API sends the request to; nil for a 404.
	Spec *RuleRef
	// ConsulHost is the virtual host (hostname key) Envoy picks for the host; "" when
	// none serves it (a 404).
	ConsulHost string
	// Consul are the rules Consul 1.15 may send the request to: one, or several when
	// the order Consul bound the routes in decides between them; none is a 404.
	Consul []RuleRef
	// RegexPath: a regex path match is among those that select the request, whose
	// precedence is implementation-specific, and neither answer is given.
	RegexPath bool
}

// RouteRequest says where the HTTP request r goes on gw, of class, from the routes
// cached: the listener by port and host (Gateway API's listener precedence, which
// Envoy's virtual host choice on Consul's one listener per port follows, mergePort),
// then the rule by HTTPRoute precedence and by Consul's own ordering.
func (o *OfflineDecider) RouteRequest(gw *gatewayv1.Gateway, class *gatewayv1.GatewayClass, r Request) (RequestRouting, error) {
	v, err := o.evaluateGateway(gw, class)
	if err != nil {
		return RequestRouting{}, err
	}
	c, why := requestListener(requestCandidates(gw, v), r)
	if c == nil {
		return RequestRouting{NoListener: why}, nil
	}
	st := c.state
	out := RequestRouting{Listener: st.listener.Name, ConsulListener: st.consulListener}
	if c.target.listenerSet != nil {
		out.ListenerSet = c.target.listenerSet.String()
	}
	models, err := o.listenerModels(gatewayapi.HTTPRouteKind, c.target, v)
	if err != nil {
		return RequestRouting{}, err
	}
	m, ok := models[st.entryName]
	if !ok {
		return out, nil
	}
	req := exampleRequest{method: r.Method, host: r.Host, path: r.Path, headers: lowerKeys(r.Headers), query: r.Query}
	t := m.table
	spec, specFound := t.specWinner(req)
	consul, consulDecided := t.consulWinners(req)
	if (!specFound && specRegexSelects(t, req)) || !consulDecided {
		out.RegexPath = true
		return out, nil
	}
	if specFound {
		out.Spec = &RuleRef{Route: t.routes[spec.route].key, Rule: spec.rule}
	}
	out.ConsulHost = consul.host
	for _, c := range consul.rules {
		out.Consul = append(out.Consul, RuleRef{Route: t.routes[c.route].key, Rule: c.rule})
	}
	return out, nil
}

// specRegexSelects reports whether a regex path match selects req: specWinner then
// gives no answer rather than a 404.
func specRegexSelects(t *listenerTable, req exampleRequest) bool {
	for _, route := range t.routes {
		if _, ok := specHostRank(route.hostnames, req.host); !ok {
			continue
		}
		for _, matches := range route.rules {
			for _, m := range matches {
				if m.path == pathRegex && m.specMatches(req) {
					return true
				}
			}
		}
	}
	return false
}

// requestCandidate is a listener that may take a request, and the parent routes
// name to reach it: the Gateway, or the ListenerSet that declares it.
type requestCandidate struct {
	state  *listenerState
	target parentTarget
}

// requestCandidates are gw's own listeners and those of the ListenerSets it allows.
func requestCandidates(gw *gatewayv1.Gateway, v gatewayVerdict) []requestCandidate {
	var out []requestCandidate
	for i := range v.listeners {
		out = append(out, requestCandidate{&v.listeners[i], parentTarget{gw: gw}})
	}
	for i := range v.sets {
		set := &v.sets[i]
		if !set.allowed {
			continue
		}
		key := cache.MetaObjectToName(set.set)
		for j := range set.listeners {
			out = append(out, requestCandidate{&set.listeners[j], parentTarget{gw: gw, listenerSet: &key}})
		}
	}
	return out
}

// requestListener is the accepted HTTP or HTTPS listener of candidates on r's port
// whose hostname matches r's host best: exact, then the longest wildcard, then none;
// or why there is none.
func requestListener(candidates []requestCandidate, r Request) (*requestCandidate, string) {
	var best *requestCandidate
	onPort := 0
	for i := range candidates {
		st := candidates[i].state
		l := st.listener
		if l.Port != r.Port || (l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType) {
			continue
		}
		onPort++
		if !st.programmable() || !listenerTakesHost(l, r.Host) {
			continue
		}
		if best == nil || listenerHostBefore(l, best.state.listener) {
			best = &candidates[i]
		}
	}
	switch {
	case best != nil:
		return best, ""
	case onPort == 0:
		return nil, fmt.Sprintf("neither the Gateway nor its ListenerSets has an HTTP or HTTPS listener on port %d", r.Port)
	}
	return nil, fmt.Sprintf("no programmed listener on port %d takes host %q", r.Port, r.Host)
}

func listenerTakesHost(l gatewayv1.Listener, host string) bool {
	h := hostnameOf(l)
	return h == "" || string(h) == host || gatewayapi.WildcardMatches(h, gatewayv1.Hostname(host))
}

// listenerHostBefore reports whether a's hostname is more specific than b's.
func listenerHostBefore(a, b gatewayv1.Listener) bool {
	ha, hb := string(hostnameOf(a)), string(hostnameOf(b))
	if (ha == "") != (hb == "") {
		return hb == ""
	}
	return hostKeyMoreSpecific(ha, hb)
}

func lowerKeys(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}
