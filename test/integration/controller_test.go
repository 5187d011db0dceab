package integration

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	gosync "sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// runningController is a status controller run in the test process against the real
// API server, with what the tests observe of it.
type runningController struct {
	published *confirmations
	// statusWrites counts status PUTs by response code.
	statusWrites *requestCounter
	stop         func()
}

// controllerOptions adjusts a test controller.
type controllerOptions struct {
	// watchDelay holds every watch event of these resources (plural names) for this
	// long before the informer sees it, so the cache lags the server.
	watchDelay     time.Duration
	delayResources []string
}

func startController(t *testing.T, name gatewayv1.GatewayController, opts controllerOptions) *runningController {
	t.Helper()
	rc := &runningController{published: &confirmations{}, statusWrites: &requestCounter{}}
	cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &observingTransport{next: rt, writes: rc.statusWrites, delay: opts.watchDelay, delayResources: opts.delayResources}
	})
	kube := kubernetes.NewForConfigOrDie(cfg)
	gateway := gatewayclient.NewForConfigOrDie(cfg)
	inf := informers.New(kube, gateway, 0)
	controller, err := gwsync.NewController(gwsync.Config{
		ControllerName: name,
		Capabilities:   gwsync.Consul115,
		Informers:      inf,
		GatewayClient:  gateway,
		Publisher:      rc.published,
		Workers:        gwsync.Workers{GatewayClasses: 1, Gateways: 2, HTTPRoutes: 2, TCPRoutes: 1, GRPCRoutes: 1},
		BundleVersion:  func() string { return "v1.6.3" },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inf.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := controller.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("controller: %v", err)
		}
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

// confirmations records what the controller published, in order.
type confirmations struct {
	mu   gosync.Mutex
	list []gwsync.Confirmation
}

func (c *confirmations) Publish(_ context.Context, conf gwsync.Confirmation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, conf)
}

func (c *confirmations) of(kind gatewayv1.Kind, key cache.ObjectName) []gwsync.Confirmation {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []gwsync.Confirmation
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
	writes         *requestCounter
	delay          time.Duration
	delayResources []string
}

func (o *observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/status") {
		o.writes.add(resp.StatusCode)
	}
	if o.delay > 0 && req.URL.Query().Get("watch") == "true" && o.delays(req.URL.Path) {
		resp.Body = &delayedBody{r: bufio.NewReader(resp.Body), closer: resp.Body, delay: o.delay}
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

// delayedBody holds each chunk it reads for delay before handing it on.
type delayedBody struct {
	r      *bufio.Reader
	closer io.Closer
	delay  time.Duration
}

func (d *delayedBody) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if n > 0 {
		time.Sleep(d.delay)
	}
	return n, err
}

func (d *delayedBody) Close() error { return d.closer.Close() }

// eventually polls cond until it returns true or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
	}
}

func conditionReason(conds []metav1.Condition, condType string) string {
	for _, c := range conds {
		if c.Type == condType {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}
