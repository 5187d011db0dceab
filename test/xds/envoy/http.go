package envoy

import (
	"fmt"
	"math/rand/v2"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// HTTPRequest is one HTTP/1.1 request on a new connection to a gateway listener.
type HTTPRequest struct {
	Port    uint32              // the listener port the connection reaches
	SNI     string              // TLS server name; "" for plaintext
	Method  string              // "" is GET
	Host    string              // :authority, may carry ":port"
	Target  string              // path with optional ?query
	Headers map[string][]string // request headers (any case)
}

// HTTPAnswer is what Envoy does with a request.
type HTTPAnswer struct {
	// Status is 200 when an endpoint was picked; otherwise Envoy's own answer (400
	// without a Host, 404 without a route, 503 without a healthy endpoint or for an
	// unknown cluster, a direct response's status).
	Status int
	// Cluster is the cluster picked (of weighted clusters, one at random by weight).
	Cluster string
	// Endpoint is "ip:port" of the endpoint picked, "" if none.
	Endpoint string
	// Method, Host and Path (with its query) as the backend receives them, after the
	// route's rewrites and header mutations.
	Method, Host, Path string
	// Headers the backend receives: lower-case names, no pseudo-headers.
	Headers map[string][]string
	// ResponseHeaders are the headers Envoy adds to the response and
	// RemovedResponseHeaders those it removes from it (response_headers_to_add and
	// _remove at every level); the backend's own response headers are not known here,
	// so an append to one of them shows as the appended value alone.
	ResponseHeaders        map[string][]string
	RemovedResponseHeaders []string
	// Body is a direct response's body.
	Body string
}

// ServeHTTP answers a request the way Envoy would with this configuration: the listener
// by port (none: ErrConnectionRefused), the filter chain by server name for TLS (none:
// ErrConnectionReset), the HTTP connection manager's route configuration, the virtual
// host by domain, the first route that matches, its action, the cluster and one of the
// cluster's endpoints. It returns ErrNotModelled for configuration it would have to
// guess about.
func ServeHTTP(c *Config, req HTTPRequest, rnd *rand.Rand) (HTTPAnswer, error) {
	conn := connection{port: req.Port, sni: req.SNI}
	chain, err := c.chainFor(conn)
	if err != nil {
		return HTTPAnswer{}, err
	}
	hcm, err := terminalHCM(chain)
	if err != nil {
		return HTTPAnswer{}, fmt.Errorf("port %d: %w", req.Port, err)
	}
	rc, err := c.routeConfigOf(hcm)
	if err != nil {
		return HTTPAnswer{}, fmt.Errorf("port %d: %w", req.Port, err)
	}
	d, err := downstream(req, conn, hcm, rnd)
	if err != nil {
		return HTTPAnswer{}, fmt.Errorf("port %d: %w", req.Port, err)
	}
	// HTTP/1.1 requires a Host header; Envoy's codec refuses a request without one.
	if d.authority() == "" {
		return HTTPAnswer{Status: 400}, nil
	}
	vh, r, err := selectRoute(rc, d)
	if err != nil || r == nil {
		return HTTPAnswer{Status: 404}, err
	}
	return c.answer(rc, vh, r, d, routerOf(hcm), rnd)
}

// selectRoute is the virtual host and route a request takes; a nil route is Envoy's 404.
func selectRoute(rc *routev3.RouteConfiguration, d request) (*routev3.VirtualHost, *routev3.Route, error) {
	vh := findVirtualHost(rc, d.authority())
	if vh == nil {
		return nil, nil, nil
	}
	if vh.GetRequireTls() != routev3.VirtualHost_NONE {
		return nil, nil, fmt.Errorf("%w: virtual host %q requires TLS (redirect)", ErrNotModelled, vh.GetName())
	}
	r, err := firstRoute(vh, d)
	return vh, r, err
}

// terminalHCM is the chain's HTTP connection manager, its only network filter, checked
// for what the model reproduces.
func terminalHCM(chain *listenerv3.FilterChain) (*hcmv3.HttpConnectionManager, error) {
	filters := chain.GetFilters()
	if len(filters) != 1 {
		return nil, fmt.Errorf("%w: filter chain with %d network filters", ErrNotModelled, len(filters))
	}
	h, ok, err := connectionManager(filters[0])
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("filter chain's network filter %s is not an HTTP connection manager", filters[0].GetName())
	}
	return h, modelledHCM(h)
}

// modelledHCM refuses HTTP filters other than the router (they could answer or change
// requests) and path normalisation (the router would match normalised paths).
func modelledHCM(h *hcmv3.HttpConnectionManager) error {
	for _, f := range h.GetHttpFilters() {
		if !f.GetTypedConfig().MessageIs(&routerv3.Router{}) {
			return fmt.Errorf("%w: HTTP filter %s", ErrNotModelled, f.GetName())
		}
	}
	switch h.GetPathWithEscapedSlashesAction() {
	case hcmv3.HttpConnectionManager_IMPLEMENTATION_SPECIFIC_DEFAULT, hcmv3.HttpConnectionManager_KEEP_UNCHANGED:
	default:
		return fmt.Errorf("%w: path_with_escaped_slashes_action %s", ErrNotModelled, h.GetPathWithEscapedSlashesAction())
	}
	if h.GetNormalizePath().GetValue() || h.GetMergeSlashes() {
		return fmt.Errorf("%w: path normalisation", ErrNotModelled)
	}
	return nil
}

func routerOf(h *hcmv3.HttpConnectionManager) *routerv3.Router {
	r := &routerv3.Router{}
	for _, f := range h.GetHttpFilters() {
		if f.GetTypedConfig().MessageIs(r) {
			_ = f.GetTypedConfig().UnmarshalTo(r)
		}
	}
	return r
}

// routeConfigOf is the route configuration a connection manager uses: by RDS or inline.
func (c *Config) routeConfigOf(h *hcmv3.HttpConnectionManager) (*routev3.RouteConfiguration, error) {
	switch {
	case h.GetRds() != nil:
		rc := c.Routes[h.GetRds().GetRouteConfigName()]
		if rc == nil {
			return nil, fmt.Errorf("route configuration %q not received", h.GetRds().GetRouteConfigName())
		}
		return rc, nil
	case h.GetRouteConfig() != nil:
		return h.GetRouteConfig(), nil
	}
	return nil, fmt.Errorf("%w: scoped routes", ErrNotModelled)
}

// hopByHop are the connection-level headers Envoy does not forward upstream.
var hopByHop = []string{"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}

// downstream is the request as the connection manager hands it to the router: header
// names lower-cased, hop-by-hop headers gone, the Host's port stripped if the manager
// says so, x-forwarded-proto set when absent, an x-request-id generated when absent.
// (source/common/http/conn_manager_utility.cc, mutateRequestHeaders; docs:
// configuration/http/http_conn_man/headers.)
func downstream(req HTTPRequest, conn connection, h *hcmv3.HttpConnectionManager, rnd *rand.Rand) (request, error) {
	headers := map[string][]string{}
	for k, vs := range req.Headers {
		name := strings.ToLower(k)
		headers[name] = append(headers[name], vs...)
	}
	for _, name := range hopByHop {
		delete(headers, name)
	}
	if _, ok := headers["host"]; ok {
		return request{}, fmt.Errorf("the Host header goes in HTTPRequest.Host, not Headers")
	}
	host := req.Host
	switch {
	case h.GetStripAnyHostPort():
		host = stripPort(host)
	case h.GetStripMatchingHostPort() && strings.HasSuffix(host, fmt.Sprintf(":%d", conn.port)):
		host = stripPort(host)
	}
	scheme := "http"
	if conn.tls() {
		scheme = "https"
	}
	if len(headers["x-forwarded-proto"]) == 0 {
		headers["x-forwarded-proto"] = []string{scheme}
	}
	if len(headers["x-request-id"]) == 0 && (h.GetGenerateRequestId() == nil || h.GetGenerateRequestId().GetValue()) {
		headers["x-request-id"] = []string{uuid(rnd)}
	}
	method := req.Method
	if method == "" {
		method = "GET"
	}
	path, query, _ := strings.Cut(req.Target, "?")
	headers[":method"] = []string{method}
	headers[":authority"] = []string{host}
	headers[":path"] = []string{req.Target}
	headers[":scheme"] = []string{scheme}
	return request{path: path, query: query, headers: headers}, nil
}

func (r request) authority() string { return first(r.headers[":authority"]) }

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// uuid is a random version 4 UUID, as Envoy generates request IDs.
func uuid(rnd *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rnd.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
