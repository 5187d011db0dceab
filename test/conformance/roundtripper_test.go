package conformance

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// xdsRoundTripper answers the suite's requests from the configuration Consul serves the
// Gateway's pods, evaluated by the project's xDS router (test/xds/envoy) instead of a
// running Envoy, which no container runs here. The Gateway is not dialled: the request's
// address only names the Gateway (by status.addresses); a Ready gateway pod of it is
// the proxy whose xDS is read, over one Delta ADS stream per Gateway kept open, as
// Envoy keeps it. The answer is what the suite's echo server would say: the request as
// it arrives after the route's rewrites and header mutations, and the pod behind the
// endpoint the router picked. A request the router sends to the responder's cluster
// makes the one real hop: over mTLS with the gateway's leaf certificate to the running
// responder, whose answer is the suite's.
type xdsRoundTripper struct {
	ctx       context.Context
	backends  *testenv.MeshBackends
	responder *testenv.Responder

	mu       gosync.Mutex
	rnd      *rand.Rand
	gateways map[string]types.NamespacedName // by address
	watches  map[types.NamespacedName]*gatewayWatch
	// meshClients connect as a gateway's Envoy does, by gateway.
	meshClients map[types.NamespacedName]*http.Client
	answers     map[string]string // last request and answer, by test name
	answered    map[string]int    // requests answered, by test name
}

// gatewayWatch is the xDS stream of one gateway pod.
type gatewayWatch struct {
	proxy   envoy.Proxy
	watcher *envoy.Watcher
}

// configQuiet is how long Consul must have sent nothing before a configuration counts
// as complete; requests meanwhile wait, as they would on a real Envoy's warming.
const configQuiet = 300 * time.Millisecond

func newXDSRoundTripper(ctx context.Context, backends *testenv.MeshBackends, responder *testenv.Responder) *xdsRoundTripper {
	return &xdsRoundTripper{
		ctx:         ctx,
		backends:    backends,
		responder:   responder,
		rnd:         rand.New(rand.NewPCG(1, 2)),
		gateways:    map[string]types.NamespacedName{},
		watches:     map[types.NamespacedName]*gatewayWatch{},
		meshClients: map[types.NamespacedName]*http.Client{},
		answers:     map[string]string{},
		answered:    map[string]int{},
	}
}

func (rt *xdsRoundTripper) CaptureRoundTrip(req roundtripper.Request) (*roundtripper.CapturedRequest, *roundtripper.CapturedResponse, error) {
	in, err := routerRequest(req)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(rt.ctx, 15*time.Second)
	defer cancel()
	cfg, err := rt.config(ctx, hostOf(req.URL.Host))
	if err != nil {
		return nil, nil, err
	}
	rt.mu.Lock()
	answer, err := envoy.ServeHTTP(cfg, in, rt.rnd)
	rt.mu.Unlock()
	if err != nil {
		rt.remember(req, in, err.Error())
		return nil, nil, fmt.Errorf("xDS router: %w", err)
	}
	if err := checkServerCertificate(cfg, req, in); err != nil {
		rt.remember(req, in, err.Error())
		return nil, nil, err
	}
	captured, response, err := rt.upstream(ctx, req, answer)
	if err != nil {
		rt.remember(req, in, err.Error())
		return nil, nil, err
	}
	rt.remember(req, in, describeAnswer(answer, captured, response))
	rt.countAnswered(req)
	return captured, response, nil
}

// hostOf is the host of host[:port].
func hostOf(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return strings.Trim(hostport, "[]")
}

// routerRequest is the suite's request as the router takes it.
func routerRequest(req roundtripper.Request) (envoy.HTTPRequest, error) {
	_, portText, err := net.SplitHostPort(req.URL.Host)
	if err != nil {
		portText = map[string]string{"https": "443"}[req.URL.Scheme]
		if portText == "" {
			portText = "80"
		}
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return envoy.HTTPRequest{}, fmt.Errorf("port of %s: %w", req.URL.Host, err)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	in := envoy.HTTPRequest{Port: uint32(port), Method: req.Method, Host: host, Target: req.URL.RequestURI(), Headers: map[string][]string{}}
	for name, values := range req.Headers {
		in.Headers[strings.ToLower(name)] = slices.Clone(values)
	}
	if req.URL.Scheme == "https" || req.Protocol == roundtripper.HTTPSProtocol {
		in.SNI = req.ServerName
		if in.SNI == "" {
			in.SNI, _, _ = strings.Cut(host, ":")
		}
	}
	return in, nil
}

// upstream is the answer of the upstream the router picked: the responder's own, or
// what the suite's echo server would say.
func (rt *xdsRoundTripper) upstream(ctx context.Context, req roundtripper.Request, a envoy.HTTPAnswer) (*roundtripper.CapturedRequest, *roundtripper.CapturedResponse, error) {
	if a.Status == http.StatusOK && toResponder(a) {
		return rt.fromResponder(ctx, req, a)
	}
	return rt.echo(req, a)
}

// toResponder reports whether the router sent the request to the responder's cluster
// (Consul names an upstream's cluster <service>.<namespace>.<datacenter>...).
func toResponder(a envoy.HTTPAnswer) bool {
	return strings.HasPrefix(a.Cluster, responderService+".")
}

// fromResponder sends the request as the gateway forwards it to the running responder,
// over mTLS with the gateway's leaf certificate, and returns the responder's answer
// with the route's response header mutations, as Envoy would apply them to it.
func (rt *xdsRoundTripper) fromResponder(ctx context.Context, req roundtripper.Request, a envoy.HTTPAnswer) (*roundtripper.CapturedRequest, *roundtripper.CapturedResponse, error) {
	if a.Endpoint != rt.responder.Addr {
		return nil, nil, fmt.Errorf("cluster %s sends to %s, which is not the running responder (%s)", a.Cluster, a.Endpoint, rt.responder.Addr)
	}
	client, err := rt.meshClient(ctx, hostOf(req.URL.Host))
	if err != nil {
		return nil, nil, err
	}
	answer, err := testenv.SendUpstream(ctx, client, testenv.UpstreamRequest{Endpoint: a.Endpoint, Method: a.Method, Host: a.Host, Path: a.Path, Headers: a.Headers})
	if err != nil {
		return nil, nil, fmt.Errorf("the responder: %w", err)
	}
	response := &roundtripper.CapturedResponse{StatusCode: answer.StatusCode, ContentLength: int64(len(answer.Body)), Protocol: "HTTP/1.1", Headers: map[string][]string{}}
	for name, values := range answer.Header {
		response.Headers[name] = values
	}
	// The model knows what the route adds, not whether it appends: what it adds
	// replaces the responder's value of the same name.
	for _, name := range a.RemovedResponseHeaders {
		delete(response.Headers, http.CanonicalHeaderKey(name))
	}
	for name, values := range a.ResponseHeaders {
		response.Headers[http.CanonicalHeaderKey(name)] = values
	}
	// As the suite's own round tripper reads a redirect.
	if roundtripper.IsRedirect(answer.StatusCode) {
		location, err := url.Parse(answer.Header.Get("Location"))
		if err != nil {
			return nil, nil, fmt.Errorf("the responder's redirect: %w", err)
		}
		if location.Host == "" {
			return nil, nil, fmt.Errorf("the responder's redirect has no absolute Location: %q", answer.Header.Get("Location"))
		}
		response.RedirectRequest = &roundtripper.RedirectRequest{Scheme: location.Scheme, Host: location.Hostname(), Port: location.Port(), Path: location.Path}
	}
	return &roundtripper.CapturedRequest{}, response, nil
}

// meshClient connects to the responder as the Envoy of the Gateway at address does:
// with the gateway's leaf certificate.
func (rt *xdsRoundTripper) meshClient(ctx context.Context, address string) (*http.Client, error) {
	gateway, err := rt.gatewayAt(ctx, address)
	if err != nil {
		return nil, err
	}
	rt.mu.Lock()
	client := rt.meshClients[gateway]
	rt.mu.Unlock()
	if client != nil {
		return client, nil
	}
	service := translate.Naming{}.EntryName(gateway.Namespace, gateway.Name)
	if client, err = testenv.GatewayMTLSClient(env.ConsulClient, service, responderService); err != nil {
		return nil, err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.meshClients[gateway] = client
	return client, nil
}

// echo is what the suite's echo server answers to the request the router forwarded.
func (rt *xdsRoundTripper) echo(req roundtripper.Request, a envoy.HTTPAnswer) (*roundtripper.CapturedRequest, *roundtripper.CapturedResponse, error) {
	response := &roundtripper.CapturedResponse{StatusCode: a.Status, Protocol: "HTTP/1.1", Headers: map[string][]string{}}
	// Both the echo server's JSON and Go's client give header names in canonical form
	// (http.Header); some tests read them by that name (Headers["Backend"]).
	for name, values := range a.ResponseHeaders {
		response.Headers[http.CanonicalHeaderKey(name)] = values
	}
	if a.Status != 200 {
		return &roundtripper.CapturedRequest{}, response, nil
	}
	pod, ok := rt.backends.Pod(a.Endpoint)
	if !ok {
		return nil, nil, fmt.Errorf("endpoint %s of cluster %s is no backend pod", a.Endpoint, a.Cluster)
	}
	response.Headers["Content-Type"] = []string{"application/json"}
	captured := &roundtripper.CapturedRequest{
		Path: a.Path, Host: a.Host, Method: a.Method, Protocol: "HTTP/1.1",
		Headers: map[string][]string{}, Namespace: pod.Namespace, Pod: pod.Name,
	}
	for name, values := range a.Headers {
		captured.Headers[http.CanonicalHeaderKey(name)] = values
	}
	if req.ServerName != "" {
		captured.TLS.ServerName = req.ServerName
	}
	return captured, response, nil
}

// config is the latest complete xDS configuration of the Gateway at address.
func (rt *xdsRoundTripper) config(ctx context.Context, address string) (*envoy.Config, error) {
	gateway, err := rt.gatewayAt(ctx, address)
	if err != nil {
		return nil, err
	}
	proxy, err := gatewayProxy(ctx, gateway)
	if err != nil {
		return nil, err
	}
	rt.mu.Lock()
	w := rt.watches[gateway]
	if w == nil || w.proxy != proxy {
		if w != nil {
			w.watcher.Close()
		}
		w = &gatewayWatch{proxy: proxy, watcher: envoy.Watch(rt.ctx, env.Consul.GRPCAddr(), proxy)}
		rt.watches[gateway] = w
	}
	rt.mu.Unlock()
	cfg, err := w.watcher.Config(ctx, configQuiet)
	if err != nil {
		return nil, fmt.Errorf("xDS of gateway %s (pod %s): %w", gateway, proxy.ID, err)
	}
	return cfg, nil
}

// gatewayAt is the Gateway whose status lists address.
func (rt *xdsRoundTripper) gatewayAt(ctx context.Context, address string) (types.NamespacedName, error) {
	rt.mu.Lock()
	gateway, ok := rt.gateways[address]
	rt.mu.Unlock()
	if ok {
		return gateway, nil
	}
	list, err := env.GatewayClient.GatewayV1().Gateways(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return types.NamespacedName{}, fmt.Errorf("list gateways: %w", err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, gw := range list.Items {
		for _, a := range gw.Status.Addresses {
			rt.gateways[a.Value] = types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
		}
	}
	gateway, ok = rt.gateways[address]
	if !ok {
		return types.NamespacedName{}, fmt.Errorf("no Gateway has address %s", address)
	}
	return gateway, nil
}

// gatewayProxy is the catalog instance of a Ready pod of the Gateway (the first by
// ID), as the controller registers it.
func gatewayProxy(ctx context.Context, gateway types.NamespacedName) (envoy.Proxy, error) {
	service := translate.Naming{}.EntryName(gateway.Namespace, gateway.Name)
	entries, _, err := env.ConsulClient.Health().Service(service, "", true, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return envoy.Proxy{}, fmt.Errorf("catalog instances of %s: %w", service, err)
	}
	var proxies []envoy.Proxy
	for _, e := range entries {
		if e.Service.Kind == consulapi.ServiceKindAPIGateway {
			proxies = append(proxies, envoy.Proxy{ID: e.Service.ID, Node: e.Node.Node})
		}
	}
	if len(proxies) == 0 {
		return envoy.Proxy{}, fmt.Errorf("no passing gateway pod of %s in Consul's catalog", gateway)
	}
	slices.SortFunc(proxies, func(a, b envoy.Proxy) int { return strings.Compare(a.ID, b.ID) })
	return proxies[0], nil
}

// checkServerCertificate fails a TLS request whose client would refuse the certificate
// the listener serves for its server name, as the suite's client would.
func checkServerCertificate(cfg *envoy.Config, req roundtripper.Request, in envoy.HTTPRequest) error {
	if in.SNI == "" || len(req.ServerCertificate) == 0 {
		return nil
	}
	chain, err := envoy.ServerCertificate(cfg, in.Port, in.SNI)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(req.ServerCertificate) {
		return errors.New("the request's server certificate is not PEM")
	}
	block, rest := pem.Decode(chain)
	if block == nil {
		return fmt.Errorf("listener on port %d serves no PEM certificate for %s", in.Port, in.SNI)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("listener certificate for %s: %w", in.SNI, err)
	}
	intermediates := x509.NewCertPool()
	intermediates.AppendCertsFromPEM(rest)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: in.SNI})
	if err != nil {
		return fmt.Errorf("tls: the client refuses the certificate served for %s: %w", in.SNI, err)
	}
	return nil
}

// remember keeps the last request of each test and what became of it, for the report.
func (rt *xdsRoundTripper) remember(req roundtripper.Request, in envoy.HTTPRequest, outcome string) {
	if req.T == nil {
		return
	}
	line := fmt.Sprintf("%s %s:%d%s", methodOf(in), in.Host, in.Port, in.Target)
	if len(in.Headers) > 0 {
		line += fmt.Sprintf(" %v", in.Headers)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.answers[topTest(req.T.Name())] = line + " → " + outcome
}

// countAnswered counts a request the xDS answered, for the tables: a pass that sent
// no request is a status-only one.
func (rt *xdsRoundTripper) countAnswered(req roundtripper.Request) {
	if req.T == nil {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.answered[topTest(req.T.Name())]++
}

// traffic is how many requests of a test the xDS answered, and its last request with
// what the xDS said to it.
func (rt *xdsRoundTripper) traffic(test string) (int, string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.answered[test], rt.answers[test]
}

func methodOf(in envoy.HTTPRequest) string {
	if in.Method == "" {
		return "GET"
	}
	return in.Method
}

func describeAnswer(a envoy.HTTPAnswer, c *roundtripper.CapturedRequest, r *roundtripper.CapturedResponse) string {
	switch {
	case a.Status != http.StatusOK:
		return fmt.Sprintf("%d", a.Status)
	case toResponder(a) && r.RedirectRequest != nil:
		return fmt.Sprintf("%d from the responder, Location %s", r.StatusCode, first(r.Headers["Location"]))
	case toResponder(a):
		return fmt.Sprintf("%d from the responder", r.StatusCode)
	}
	return fmt.Sprintf("200 from %s/%s, path %s, host %s", c.Namespace, c.Pod, c.Path, c.Host)
}

func first(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}

// topTest is the suite test a (sub)test name belongs to: TestConformanceTraffic/<ShortName>/...
func topTest(name string) string {
	parts := strings.Split(name, "/")
	if len(parts) < 2 {
		return name
	}
	return parts[1]
}

// statusOnlyRoundTripper ends a test, as skipped, at its first request: the status-only
// run judges what the suite asserts on status before any traffic, and leaves traffic to
// the run through the xDS.
type statusOnlyRoundTripper struct{}

// requestsSkipped holds the suite tests some of whose (sub)tests the status-only run
// ended at a request: such a test is not "passed" even when the subtests that sent the
// requests were the only ones skipped.
var requestsSkipped gosync.Map

const statusOnlySkip = "status checked; the rest sends traffic, judged by the run through the xDS"

func (statusOnlyRoundTripper) CaptureRoundTrip(req roundtripper.Request) (*roundtripper.CapturedRequest, *roundtripper.CapturedResponse, error) {
	// SkipNow ends only the goroutine that calls it: from a helper's own goroutine it
	// would leave the test running, so there the request just fails.
	if req.T != nil && onTestGoroutine() {
		requestsSkipped.Store(topTest(req.T.Name()), true)
		req.T.Skip(statusOnlySkip)
	}
	return nil, nil, errors.New("status-only run: no traffic is answered")
}

// onTestGoroutine reports whether the caller runs on a test's own goroutine.
func onTestGoroutine() bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "testing.tRunner(")
}
