package envoy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	experimentalcreds "google.golang.org/grpc/experimental/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
)

// reconnectDelay is how long a Watcher waits before it reopens a broken stream.
const reconnectDelay = 500 * time.Millisecond

// Watcher keeps one Delta ADS stream to Consul open for a proxy and applies every
// response as Envoy does: it ACKs what it accepts, NACKs what Envoy would refuse
// (keeping the last accepted resources), and follows clusters with endpoint and
// listeners with route configuration subscriptions.
type Watcher struct {
	open   opener
	proxy  Proxy
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	st *state
	// changed is closed and replaced whenever anything below changes.
	changed chan struct{}
	// lastResponse is when Consul last sent something.
	lastResponse time.Time
	// rejected holds, per type, the error of a refused response until a later
	// response of that type is accepted.
	rejected map[string]error
	// streamErr is why the current stream broke; nil while it is up.
	streamErr error
}

// Watch starts watching what Consul serves proxy at grpcAddr, its plaintext gRPC port,
// without a token; it stops when ctx ends or Close is called.
func Watch(ctx context.Context, grpcAddr string, proxy Proxy) *Watcher {
	return WatchWith(ctx, grpcAddr, proxy, DialOptions{})
}

// DialOptions say how a Watcher reaches Consul's gRPC port and who it says it is.
type DialOptions struct {
	// Token is the ACL token sent with each stream as the gRPC metadata
	// x-consul-token, as consul-dataplane sends the token of its login; empty sends
	// none.
	Token string
	// TLS, when set, is the client side of a TLS connection to Consul's gRPC TLS port:
	// its RootCAs verify the server's certificate, for its ServerName when set and for
	// the address's host otherwise. Nil dials plaintext.
	TLS *tls.Config
}

// WatchWith is Watch with dial options: a token, TLS or both. A connection that fails
// (a certificate the CA did not issue, a token Consul refuses) fails the stream: Config
// and Err return why while the Watcher keeps retrying.
func WatchWith(ctx context.Context, grpcAddr string, proxy Proxy, opts DialOptions) *Watcher {
	return watch(ctx, grpcOpener(grpcAddr, opts), proxy)
}

// adsStream is the client side of a Delta ADS stream.
type adsStream = discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient

// opener opens a stream; close releases what it holds.
type opener func(ctx context.Context) (stream adsStream, close func(), err error)

func watch(ctx context.Context, open opener, proxy Proxy) *Watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &Watcher{
		open: open, proxy: proxy, cancel: cancel, done: make(chan struct{}),
		st: newState(), changed: make(chan struct{}), rejected: map[string]error{},
	}
	go w.run(ctx)
	return w
}

// grpcOpener opens Delta ADS streams to Consul's gRPC address, plaintext or TLS.
func grpcOpener(grpcAddr string, opts DialOptions) opener {
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		// Consul 1.15's gRPC TLS port negotiates no ALPN protocol, which grpc-go
		// refuses since 1.67 ("missing selected ALPN property"); Envoy does not
		// require it, and consul-dataplane's connection manager turns the check off
		// the same way.
		creds = experimentalcreds.NewTLSWithALPNDisabled(opts.TLS)
	}
	return func(ctx context.Context) (adsStream, func(), error) {
		conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, nil, fmt.Errorf("dial consul gRPC %s: %w", grpcAddr, err)
		}
		if opts.Token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-consul-token", opts.Token)
		}
		// Not WaitForReady: a connection that cannot be made (refused, a failed TLS
		// handshake) fails the stream at once with its cause, rather than waiting for
		// a connection that will never come.
		stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
		if err != nil {
			_ = conn.Close()
			return nil, nil, fmt.Errorf("open: %w", err)
		}
		return stream, func() { _ = conn.Close() }, nil
	}
}

// Close ends the stream and waits for the Watcher to stop.
func (w *Watcher) Close() {
	w.cancel()
	<-w.done
}

// Config returns the latest complete configuration: every subscribed resource has
// arrived and Consul has sent nothing for quiet. It blocks until then or until ctx
// ends. It fails when the stream is broken, when a response was refused (what Envoy
// NACKs), and, once ctx ends, when the configuration is still inconsistent (Check).
// Later calls return newer configurations as Consul sends updates.
func (w *Watcher) Config(ctx context.Context, quiet time.Duration) (*Config, error) {
	var lastCheck error
	for {
		cfg, wait, changed, err := w.ready(quiet)
		if err != nil {
			return nil, err
		}
		if cfg != nil {
			// An inconsistent configuration may be a moment of an update in flight:
			// wait for the next one rather than fail at once.
			if lastCheck = cfg.Check(); lastCheck == nil {
				return cfg, nil
			}
			wait = 0
		}
		if err := w.wait(ctx, wait, changed); err != nil {
			if lastCheck != nil {
				return nil, errors.Join(lastCheck, err)
			}
			return nil, fmt.Errorf("xDS not complete (%s): %w", w.missing(), err)
		}
	}
}

// Err is why the stream is broken (a connection refused, a failed TLS handshake, a
// token Consul refused), or nil while it is up and before the first attempt ends. The
// Watcher keeps reopening a broken stream; Err stays set until a new one opens.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.streamErr
}

// Current returns the configuration as it stands once every subscribed resource has
// arrived, without waiting for quiet and without Check, or nil before that: for tests
// that look at what Consul serves while it is inconsistent.
func (w *Watcher) Current() *Config {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.st.missing() != "" {
		return nil
	}
	return w.st.config()
}

// Partial returns the configuration as it stands, complete or not, and the resources
// still missing ("" when none): for tests that look at what Consul serves beside a
// resource it never sends.
func (w *Watcher) Partial() (*Config, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st.config(), w.st.missing()
}

// ready returns the configuration if it is complete and quiet; otherwise how long to
// wait at most and the channel that says something changed.
func (w *Watcher) ready(quiet time.Duration) (*Config, time.Duration, <-chan struct{}, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.streamErr != nil {
		return nil, 0, nil, w.streamErr
	}
	if err := w.rejectedErr(); err != nil {
		return nil, 0, nil, err
	}
	if w.st.missing() != "" {
		return nil, w.st.nextGiveUp(), w.changed, nil
	}
	if since := time.Since(w.lastResponse); since < quiet {
		return nil, quiet - since, w.changed, nil
	}
	return w.st.config(), 0, w.changed, nil
}

func (w *Watcher) rejectedErr() error {
	var errs []error
	for _, typeURL := range slices.Sorted(maps.Keys(w.rejected)) {
		errs = append(errs, w.rejected[typeURL])
	}
	return errors.Join(errs...)
}

// wait blocks until changed is closed, d passed (d > 0), or ctx ends.
func (w *Watcher) wait(ctx context.Context, d time.Duration, changed <-chan struct{}) error {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-timeout:
	case <-w.done:
		return errors.New("watcher closed")
	}
	return nil
}

func (w *Watcher) missing() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st.missing()
}

// update changes the Watcher's state under its lock and wakes every waiter.
func (w *Watcher) update(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
	close(w.changed)
	w.changed = make(chan struct{})
}

// run keeps a stream open until ctx ends, reopening it when it breaks. A new stream
// starts from nothing, as a restarted Envoy's would; the last complete configuration
// stays readable only once the new stream completes again.
func (w *Watcher) run(ctx context.Context) {
	defer close(w.done)
	for ctx.Err() == nil {
		err := w.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		w.update(func() { w.streamErr = fmt.Errorf("delta ADS stream: %w", err) })
		select {
		case <-ctx.Done():
			return
		case <-time.After(reconnectDelay):
		}
	}
}

// stream runs one Delta ADS stream until it fails.
func (w *Watcher) stream(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, closeStream, err := w.open(ctx)
	if err != nil {
		return err
	}
	defer closeStream()
	s := &session{stream: stream, node: proxyNode(w.proxy), st: newState()}
	// The state is the Watcher's from here on: it changes only under its lock.
	var subscribeErr error
	w.update(func() {
		w.st, w.streamErr, w.rejected = s.st, nil, map[string]error{}
		if subscribeErr = s.subscribe(ClusterType, nil); subscribeErr == nil {
			subscribeErr = s.subscribe(ListenerType, nil)
		}
	})
	if subscribeErr != nil {
		return subscribeErr
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if err := w.take(s, resp); err != nil {
			return err
		}
	}
}

// take applies one response under the Watcher's lock (the session's state is the
// Watcher's) and answers it.
func (w *Watcher) take(s *session, resp *discoveryv3.DeltaDiscoveryResponse) error {
	var sendErr error
	w.update(func() {
		w.lastResponse = time.Now()
		err := s.st.apply(resp)
		if err != nil {
			w.rejected[resp.GetTypeUrl()] = err
			sendErr = s.nack(resp, err)
			return
		}
		delete(w.rejected, resp.GetTypeUrl())
		sendErr = s.ack(resp)
	})
	return sendErr
}

func proxyNode(proxy Proxy) *corev3.Node {
	return &corev3.Node{
		Id:                   proxy.ID,
		Cluster:              proxy.ID,
		UserAgentName:        "envoy",
		UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: envoyVersion},
		Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			"node_name": structpb.NewStringValue(proxy.Node),
		}},
	}
}

// session is one Delta ADS stream.
type session struct {
	stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node   *corev3.Node
	// sentNode: only the first request of a stream carries the node.
	sentNode bool
	st       *state
}

func (s *session) send(req *discoveryv3.DeltaDiscoveryRequest) error {
	if !s.sentNode {
		req.Node = s.node
		s.sentNode = true
	}
	if err := s.stream.Send(req); err != nil {
		return fmt.Errorf("send %s request: %w", req.GetTypeUrl(), err)
	}
	return nil
}

// ack accepts a response and follows it: clusters bring endpoint subscriptions,
// listeners route configuration subscriptions.
func (s *session) ack(resp *discoveryv3.DeltaDiscoveryResponse) error {
	if err := s.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}); err != nil {
		return err
	}
	switch resp.GetTypeUrl() {
	case ClusterType:
		return s.subscribe(EndpointType, s.st.edsClusters())
	case ListenerType:
		names, err := s.st.routeNames()
		if err != nil {
			return err
		}
		return s.subscribe(RouteType, names)
	}
	return nil
}

// nack tells Consul the response was refused, as Envoy would (code 3,
// INVALID_ARGUMENT, with the reason).
func (s *session) nack(resp *discoveryv3.DeltaDiscoveryResponse, cause error) error {
	return s.send(&discoveryv3.DeltaDiscoveryRequest{
		TypeUrl:       resp.GetTypeUrl(),
		ResponseNonce: resp.GetNonce(),
		ErrorDetail:   &statuspb.Status{Code: 3, Message: cause.Error()},
	})
}

// subscribe asks for a type: nil names is Envoy's wildcard subscription (clusters and
// listeners); otherwise it adds and removes names to match exactly.
func (s *session) subscribe(typeURL string, names []string) error {
	if names == nil {
		s.st.subscribed[typeURL] = nil
		return s.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL})
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	have, known := s.st.subscribed[typeURL]
	var add, remove []string
	for n := range want {
		if !have[n] {
			add = append(add, n)
		}
	}
	for n := range have {
		if !want[n] {
			remove = append(remove, n)
		}
	}
	if known && len(add) == 0 && len(remove) == 0 {
		return nil
	}
	s.st.subscribed[typeURL] = want
	// Envoy forgets what it no longer subscribes to.
	for _, n := range remove {
		delete(s.st.resources[typeURL], n)
		if typeURL == EndpointType {
			delete(s.st.edsSince, n)
		}
	}
	if typeURL == EndpointType {
		for _, n := range add {
			s.st.edsSince[n] = s.st.now()
		}
	}
	slices.Sort(add)
	slices.Sort(remove)
	return s.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: add, ResourceNamesUnsubscribe: remove})
}
