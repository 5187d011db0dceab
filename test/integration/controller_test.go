package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	gosync "sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	configclient "github.com/consul-gateway-controller/consul-gateway-controller/api/client"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// runningController is a status controller run in the test process against the real
// API server, with what the tests observe of it.
type runningController struct {
	published *confirmations
	// statusWrites counts status PUTs by response code.
	statusWrites *requestCounter
	// consulWrites counts config entry writes and deletes by response code; nil
	// without a syncer.
	consulWrites *requestCounter
	syncer       *consul.Syncer
	stop         func()
	// base is the test process's metrics before the controller started (settled).
	base string
}

// processMetrics is the test process's metrics registry as /metrics would serve it:
// the queue and sync series of the controllers the tests run in it.
func processMetrics(context.Context) (string, error) {
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		return "", fmt.Errorf("the process's metrics: %d %s", rec.Code, rec.Body.String())
	}
	return rec.Body.String(), nil
}

// settled waits until the controller's queues named in worked took keys and synced
// them all and every queue stayed empty for testenv.SettleQuiet (testenv.Settled):
// only then does a count of what it did not write mean anything. The controllers
// that ran in this process before it count for nothing (its base).
func (rc *runningController) settled(t *testing.T, worked ...string) {
	t.Helper()
	testenv.SettledScrape(t, "the in-process controller", processMetrics, testenv.Scrape{Base: rc.base}, worked...)
}

// controllerOptions adjusts a test controller.
type controllerOptions struct {
	// watchDelay holds every watch event of these resources (plural names) for this
	// long before the informer sees it, so the cache lags the server.
	watchDelay     time.Duration
	delayResources []string
	// delayNamespace, when set, limits the delay to events of objects in it: other
	// tests' objects (thousands, going away as their namespaces are deleted) would
	// otherwise queue up behind the delay.
	delayNamespace string
	// consul runs the Consul syncer too, with these settings.
	consul *consulOptions
	// failStatusOf makes every status write of these routes ("namespace/name") fail.
	failStatusOf []string
}

type consulOptions struct {
	// agent and token select another Consul than the Env's, and the token to use.
	agent       *testenv.ConsulAgent
	token       string
	clusterID   string
	translation translate.Options
	// beforeWrite runs before each config entry write reaches Consul.
	beforeWrite func(req *http.Request)
}

func startController(t *testing.T, name gatewayv1.GatewayController, opts controllerOptions) *runningController {
	t.Helper()
	base, err := processMetrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rc := &runningController{published: &confirmations{}, statusWrites: &requestCounter{}, base: base}
	cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &observingTransport{next: rt, writes: rc.statusWrites, delay: opts.watchDelay, delayResources: opts.delayResources,
			delayNamespace: opts.delayNamespace, failStatusOf: opts.failStatusOf}
	})
	kube := kubernetes.NewForConfigOrDie(cfg)
	gateway := gatewayclient.NewForConfigOrDie(cfg)
	configs, err := configclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inf := informers.New(kube, gateway, configs, 0)
	var publisher contract.Publisher = rc.published
	var verdicts contract.ConsulVerdicts
	if opts.consul != nil {
		rc.consulWrites = &requestCounter{}
		rc.syncer = consul.NewSyncer(consul.Config{
			Client:      consulClient(t, opts.consul, rc.consulWrites),
			Ownership:   translate.Ownership{Controller: string(name), ClusterID: opts.consul.clusterID},
			Options:     opts.consul.translation,
			Secrets:     inf.Secrets.Lister(),
			Services:    inf.Services.Lister(),
			OwnerExists: inf.Exists,
			Workers:     2,
		})
		publisher = contract.Publishers{rc.published, rc.syncer}
		verdicts = rc.syncer
	}
	controller, err := gwsync.NewController(t.Context(), gwsync.Config{
		ControllerName: name,
		Capabilities:   consullimits.Consul115,
		Informers:      gwsync.InformersOf(inf),
		GatewayClient:  gateway,
		Verdicts:       verdicts,
		Publisher:      publisher,
		Workers:        gwsync.Workers{GatewayClasses: 1, Gateways: 2, Routes: 2},
		BundleVersion:  func() string { return "v1.6.3" },
	})
	if err != nil {
		t.Fatal(err)
	}
	if rc.syncer != nil {
		rc.syncer.OnVerdictChange(controller.Enqueue)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inf.StartWithContext(ctx)
	statusDone, syncerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(statusDone)
		if err := controller.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("controller: %v", err)
		}
	}()
	go func() {
		defer close(syncerDone)
		if rc.syncer != nil {
			_ = rc.syncer.Run(ctx, controller.InitialSyncDone())
		}
	}()
	done := make(chan struct{})
	go func() {
		<-statusDone
		<-syncerDone
		close(done)
	}()
	var once gosync.Once
	rc.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			inf.Shutdown()
		})
	}
	t.Cleanup(rc.stop)
	return rc
}

// consulClient is a client of the harness's Consul that counts config entry writes
// and runs beforeWrite ahead of each.
func consulClient(t *testing.T, opts *consulOptions, writes *requestCounter) *consulapi.Client {
	t.Helper()
	agent, token := env.Consul, env.Consul.ManagementToken()
	if opts.agent != nil {
		agent, token = opts.agent, opts.token
	}
	cfg := consulapi.DefaultNonPooledConfig()
	cfg.Address = agent.HTTPAddr()
	cfg.Token = token
	cfg.TokenFile = ""
	cfg.TLSConfig = consulapi.TLSConfig{}
	cfg.HttpClient = &http.Client{Transport: &consulWriteCounter{next: cleanhttp.DefaultTransport(), writes: writes, before: opts.beforeWrite}}
	client, err := consulapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// consulWriteCounter counts PUT and DELETE requests on /v1/config.
type consulWriteCounter struct {
	next   http.RoundTripper
	writes *requestCounter
	before func(*http.Request)
}

func (c *consulWriteCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	isWrite := (req.Method == http.MethodPut || req.Method == http.MethodDelete) && strings.HasPrefix(req.URL.Path, "/v1/config")
	if isWrite && c.before != nil {
		c.before(req)
	}
	resp, err := c.next.RoundTrip(req)
	if err == nil && isWrite {
		c.writes.add(resp.StatusCode)
	}
	return resp, err
}

// confirmations records what the controller published, in order.
type confirmations struct {
	mu   gosync.Mutex
	list []contract.Confirmation
}

func (c *confirmations) Publish(_ context.Context, conf contract.Confirmation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, conf)
}

func (c *confirmations) of(kind gatewayv1.Kind, key cache.ObjectName) []contract.Confirmation {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []contract.Confirmation
	for _, conf := range c.list {
		if conf.Kind == kind && conf.Key == key {
			out = append(out, conf)
		}
	}
	return out
}

// requestCounter counts status writes by HTTP status code.
type requestCounter struct {
	mu     gosync.Mutex
	byCode map[int]int
}

func (r *requestCounter) add(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byCode == nil {
		r.byCode = map[int]int{}
	}
	r.byCode[code]++
}

func (r *requestCounter) count(code int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byCode[code]
}

func (r *requestCounter) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.byCode {
		n += c
	}
	return n
}

// observingTransport counts status writes and delays watch streams of chosen resources.
type observingTransport struct {
	next           http.RoundTripper
	failStatusOf   []string
	writes         *requestCounter
	delay          time.Duration
	delayResources []string
	delayNamespace string
}

func (o *observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/status") {
		for _, route := range o.failStatusOf {
			ns, name, _ := strings.Cut(route, "/")
			if strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/httproutes/"+name+"/status") {
				o.writes.add(http.StatusServiceUnavailable)
				return nil, fmt.Errorf("test: status writes of %s fail", route)
			}
		}
	}
	resp, err := o.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/status") {
		o.writes.add(resp.StatusCode)
	}
	if o.delay > 0 && req.URL.Query().Get("watch") == "true" && o.delays(req.URL.Path) {
		body := &delayedBody{r: bufio.NewReader(resp.Body), closer: resp.Body, delay: o.delay}
		if o.delayNamespace != "" {
			body.only = []byte(`"namespace":"` + o.delayNamespace + `"`)
		}
		resp.Body = body
	}
	return resp, nil
}

func (o *observingTransport) delays(path string) bool {
	for _, r := range o.delayResources {
		if strings.HasSuffix(path, "/"+r) {
			return true
		}
	}
	return false
}

// delayedBody holds each event (a line of the watch stream) for delay before handing
// it on; with only set, just the events that contain it.
type delayedBody struct {
	r      *bufio.Reader
	closer io.Closer
	delay  time.Duration
	only   []byte

	pending []byte
	err     error
}

func (d *delayedBody) Read(p []byte) (int, error) {
	if len(d.pending) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		d.pending, d.err = d.r.ReadBytes('\n')
		if len(d.pending) > 0 && (d.only == nil || bytes.Contains(d.pending, d.only)) {
			time.Sleep(d.delay)
		}
		if len(d.pending) == 0 {
			return 0, d.err
		}
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	return n, nil
}

func (d *delayedBody) Close() error { return d.closer.Close() }

// writeTimes records when writes were sent, to count those after a moment (a Lease
// changing hands).
type writeTimes struct {
	mu gosync.Mutex
	at []time.Time
}

func (w *writeTimes) add() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at = append(w.at, time.Now())
}

// before is the number of writes sent before t.
func (w *writeTimes) before(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.at {
		if at.Before(t) {
			n++
		}
	}
	return n
}

// since is the number of writes sent at or after t.
func (w *writeTimes) since(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.at {
		if !at.Before(t) {
			n++
		}
	}
	return n
}
