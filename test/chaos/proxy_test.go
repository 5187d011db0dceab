package chaos

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"
)

// write is one mutating request a replica sent through its proxy: what the
// single-writer check reads.
type write struct {
	replica string
	target  string // "kube" or "consul"
	method  string
	path    string
	query   string // the raw query: a Consul config entry write must carry cas=
	at      time.Time
}

// faultProxy is a replica's only way to one server. It forwards HTTP (watches stream)
// and records every mutating request that reached the server. Faults are switched on
// and off while it runs: latency, errors, dropped connections, a partition, and watches
// ended as an expired watch ends.
type faultProxy struct {
	replica  string
	target   string
	server   *httptest.Server
	upstream *url.URL
	proxy    *httputil.ReverseProxy
	recorder *writeLog
	isWrite  func(*http.Request) bool

	// writesInFlight counts mutating requests forwarded and not answered yet. The
	// server may still apply one after the replica gave up on it (Consul holds a
	// write while it waits for a leader), so such a write is not cancelled with the
	// replica's request, and the convergence check waits for none to be left.
	writesInFlight atomic.Int64

	latency   atomic.Int64 // max added delay, nanoseconds
	errorRate atomic.Int64 // per mille of requests answered 503 without reaching the server
	partition atomic.Bool
	expired   *atomic.Int64 // watch events that ended a watch with 410 Gone, counted

	// What the faults did, counted where it happened: a fault that moved none of its
	// counts did not happen (see fault.effect).
	delayed        atomic.Int64 // requests held back by the latency fault
	failed         atomic.Int64 // requests answered with an injected error
	cutOff         atomic.Int64 // requests the partition closed the connection of
	upstreamFailed atomic.Int64 // requests the server did not answer (it was down)
	// openWatches counts the watch streams open through the proxy.
	openWatches atomic.Int64

	mu    gosync.Mutex
	conns map[net.Conn]struct{}
	rng   *rand.Rand
}

type writeLog struct {
	mu     gosync.Mutex
	writes []write
}

func (l *writeLog) add(w write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

func (l *writeLog) all() []write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]write(nil), l.writes...)
}

// newFaultProxy serves on loopback; tlsServe makes it an HTTPS server (client-go
// speaks to an https kubeconfig server), upstreamTLS is how it reaches the target.
func newFaultProxy(replica, target, upstream string, upstreamTLS *tls.Config, tlsServe bool, writes *writeLog, expired *atomic.Int64, seed uint64, isWrite func(*http.Request) bool) (*faultProxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	p := &faultProxy{
		replica: replica, target: target, upstream: u, recorder: writes, isWrite: isWrite, expired: expired,
		conns: map[net.Conn]struct{}{}, rng: rand.New(rand.NewPCG(seed, 0x70)),
	}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
			if isWrite(r.In) {
				r.Out = r.Out.WithContext(context.WithoutCancel(r.Out.Context()))
			}
		},
		Transport:      &http.Transport{TLSClientConfig: upstreamTLS, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 32},
		FlushInterval:  -1,
		ModifyResponse: p.countExpired,
		// Broken streams are the point of the faults, not news.
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			p.upstreamFailed.Add(1)
			http.Error(w, "chaos proxy: "+err.Error(), http.StatusBadGateway)
		},
	}
	p.server = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.server.Config.ConnState = p.track
	if tlsServe {
		p.server.StartTLS()
	} else {
		p.server.Start()
	}
	return p, nil
}

// URL is where the replica is pointed.
func (p *faultProxy) URL() string { return p.server.URL }

func (p *faultProxy) Close() { p.server.CloseClientConnections(); p.server.Close() }

func (p *faultProxy) track(c net.Conn, state http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch state {
	case http.StateNew:
		p.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}

// dropConnections closes every open connection, watches included: what a load
// balancer restart or a network blip does.
func (p *faultProxy) dropConnections() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// heal switches every fault off.
func (p *faultProxy) heal() {
	p.latency.Store(0)
	p.errorRate.Store(0)
	p.partition.Store(false)
}

func (p *faultProxy) random(n int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Int64N(n)
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	if p.partition.Load() {
		// A partition: the request never arrives. Hijack and close, so the client sees
		// a broken connection, not an answer.
		p.cutOff.Add(1)
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		http.Error(w, "partitioned", http.StatusServiceUnavailable)
		return
	}
	if d := p.latency.Load(); d > 0 {
		p.delayed.Add(1)
		if !sleepCtx(r.Context(), time.Duration(p.random(d))) {
			return
		}
	}
	if rate := p.errorRate.Load(); rate > 0 && p.random(1000) < rate {
		p.failed.Add(1)
		http.Error(w, "chaos proxy: injected error", http.StatusServiceUnavailable)
		return
	}
	if p.isWrite(r) {
		p.recorder.add(write{replica: p.replica, target: p.target, method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, at: time.Now()})
		p.writesInFlight.Add(1)
		defer p.writesInFlight.Add(-1)
	}
	p.proxy.ServeHTTP(w, r)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// countExpired counts the 410 Gone events in watch streams: proof that a fault made
// the informers relist.
func (p *faultProxy) countExpired(resp *http.Response) error {
	if resp.Request.URL.Query().Get("watch") != "true" {
		return nil
	}
	p.openWatches.Add(1)
	resp.Body = &goneCounter{ReadCloser: resp.Body, count: p.expired, open: &p.openWatches}
	return nil
}

type goneCounter struct {
	io.ReadCloser
	count  *atomic.Int64
	open   *atomic.Int64
	closed atomic.Bool
	tail   []byte
}

func (g *goneCounter) Close() error {
	if !g.closed.Swap(true) {
		g.open.Add(-1)
	}
	return g.ReadCloser.Close()
}

func (g *goneCounter) Read(b []byte) (int, error) {
	n, err := g.ReadCloser.Read(b)
	buf := append(g.tail, b[:n]...)
	g.count.Add(int64(bytes.Count(buf, []byte(`"code":410`))))
	// Keep what could be the start of a match split across reads, minus a whole one.
	if keep := len(`"code":410`) - 1; len(buf) > keep {
		buf = buf[len(buf)-keep:]
	}
	g.tail = append(g.tail[:0], buf...)
	return n, err
}

// kubeWrite: every mutation but leader election's Lease (candidates write it by
// design) and Events (best effort, not state).
func kubeWrite(r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false
	}
	return !strings.Contains(r.URL.Path, "/leases/") && !strings.HasSuffix(r.URL.Path, "/leases") &&
		!strings.Contains(r.URL.Path, "/events")
}

// consulWrite: config entry and catalog mutations.
func consulWrite(r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false
	}
	return strings.HasPrefix(r.URL.Path, "/v1/config") || strings.HasPrefix(r.URL.Path, "/v1/catalog")
}

// configEntryWrite: a write of a Consul config entry (PUT /v1/config, DELETE
// /v1/config/<kind>/<name>), which must be check-and-set. Catalog registrations are
// not config entries and have no check-and-set.
func (w write) configEntryWrite() bool {
	if w.target != "consul" || (w.method != http.MethodPut && w.method != http.MethodDelete) {
		return false
	}
	return w.path == "/v1/config" || strings.HasPrefix(w.path, "/v1/config/")
}
