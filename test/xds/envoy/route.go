package envoy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
)

// Request is an HTTP request as Envoy's router sees it, for Route.
type Request struct {
	Method string
	// Host is the Host header (":authority"), possibly with a port.
	Host string
	// Target is the path with an optional query.
	Target  string
	Headers map[string]string
}

func (r Request) String() string {
	var hs []string
	for k, v := range r.Headers {
		hs = append(hs, k+": "+v)
	}
	slices.Sort(hs)
	s := fmt.Sprintf("%s %s%s", r.method(), r.Host, r.Target)
	if len(hs) > 0 {
		s += " [" + strings.Join(hs, ", ") + "]"
	}
	return s
}

func (r Request) method() string {
	if r.Method == "" {
		return "GET"
	}
	return r.Method
}

// Routed is where Envoy's router sends a request: the clusters with their weights, and
// the request as the backend receives it.
type Routed struct {
	// Clusters maps each cluster to its weight; one cluster has weight 1.
	Clusters map[string]uint32
	// Path is the path after any rewrite, without the query.
	Path string
	// Headers are the request headers after the route's mutations (lower-case names,
	// repeated values joined by ","). A weighted cluster's own mutations are not
	// applied: ServeHTTP applies the picked one's.
	Headers map[string]string
}

// Route returns what a route configuration does with a request: the virtual host by
// domain, then the first of its routes that matches (the same selection as
// ServeHTTP's). ok is false when no route matches (Envoy answers 404). Only route
// actions are understood.
func Route(rc *routev3.RouteConfiguration, req Request) (Routed, bool, error) {
	d := routerRequest(req)
	vh, r, err := selectRoute(rc, d)
	if err != nil || r == nil {
		return Routed{}, false, err
	}
	action := r.GetRoute()
	if action == nil {
		return Routed{}, false, fmt.Errorf("%w: route %v: only route actions are understood", ErrNotModelled, r.GetMatch())
	}
	if err := modelledAction(action); err != nil {
		return Routed{}, false, err
	}
	out := Routed{Clusters: map[string]uint32{}, Headers: map[string]string{}}
	if c := action.GetCluster(); c != "" {
		out.Clusters[c] = 1
	}
	for _, c := range action.GetWeightedClusters().GetClusters() {
		out.Clusters[c.GetName()] += c.GetWeight().GetValue()
	}
	// The router's own headers are left out: Route shows the route's effect alone.
	up, err := upstreamRequest(mutationLevels{rc: rc, vh: vh, route: r}, action, d, &routerv3.Router{SuppressEnvoyHeaders: true})
	if err != nil {
		return Routed{}, false, err
	}
	out.Path = up.path
	for k, vs := range withoutPseudo(up.headers) {
		out.Headers[k] = strings.Join(vs, ",")
	}
	return out, true, nil
}

// routerRequest is a Request with only the pseudo-headers the router matches on added.
func routerRequest(req Request) request {
	headers := map[string][]string{}
	for _, k := range slices.Sorted(maps.Keys(req.Headers)) {
		name := strings.ToLower(k)
		headers[name] = append(headers[name], req.Headers[k])
	}
	path, query, _ := strings.Cut(req.Target, "?")
	headers[":method"] = []string{req.method()}
	headers[":authority"] = []string{req.Host}
	headers[":path"] = []string{req.Target}
	headers[":scheme"] = []string{"http"}
	return request{path: path, query: query, headers: headers}
}
