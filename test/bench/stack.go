package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

const (
	benchNamespace = "bench"
	floorNamespace = "bench-floor"
	leaseNamespace = "consul-gateway-controller" // the controller's default Lease namespace
	className      = "bench"
	controllerName = gatewayv1.GatewayController("consul-gateway-controller.github.io/gateway-controller")
	// clusterID is the cluster id of every controller the bench runs: its entries'
	// ownership meta.
	clusterID        = "bench"
	routesPerGateway = 20
	backendPort      = 8080
	createWorkers    = 8
)

// layout is how many objects a stack holds.
type layout struct {
	routes   int
	gateways int
	secrets  int
	// class is the GatewayClass the Gateways name; empty means className. The peer
	// (peer.go) names its own class and creates it.
	class gatewayv1.ObjectName
	// serviceDefaults runs the controllers with --manage-service-defaults: each
	// Gateway's Service gets a service-defaults entry too.
	serviceDefaults bool
}

// entries are the Consul entries the controller desires for the layout: an
// api-gateway per Gateway, an http-route per route, and with serviceDefaults a
// service-defaults per Gateway's Service.
func (l layout) entries() int {
	if l.serviceDefaults {
		return l.routes + 2*l.gateways
	}
	return l.routes + l.gateways
}

// newLayout puts routesPerGateway routes on each Gateway (at least one Gateway when
// there are routes).
func newLayout(routes, secrets int) layout {
	l := layout{routes: routes, gateways: routes / routesPerGateway, secrets: secrets}
	if routes > 0 && l.gateways == 0 {
		l.gateways = 1
	}
	return l
}

func routeName(i int) string   { return fmt.Sprintf("r-%05d", i) }
func gatewayName(k int) string { return fmt.Sprintf("gw-%04d", k) }
func serviceName(k int) string { return fmt.Sprintf("svc-%04d", k) }

// entryName is the Consul entry the controller writes for an object of the bench
// namespace (docs/consul.md: <name>.<namespace>, no prefix by default).
func entryName(name string) string { return name + "." + benchNamespace }

// routePath is route i's path match; edit k of it gets its own value.
func routePath(i, edit int) string {
	if edit < 0 {
		return fmt.Sprintf("/r-%05d", i)
	}
	return fmt.Sprintf("/r-%05d/e%d", i, edit)
}

// stack is one set of servers (etcd, kube-apiserver, Consul) holding one layout, with
// the tracker watching its routes and Gateways. Each stack starts empty, so a cold
// start never sees another scenario's leftovers.
type stack struct {
	cfg     *config
	name    string
	size    layout
	env     *testenv.Env
	kube    kubernetes.Interface
	gateway gatewayclient.Interface
	consul  *consulapi.Client
	tracker *tracker
	stop    context.CancelFunc
	ctls    []*testenv.Controller
}

// newStack starts the servers, creates every object of size (nothing reads them yet),
// and starts the tracker.
func newStack(ctx context.Context, cfg *config, name string, size layout) (s *stack, err error) {
	logf("%s: starting etcd, kube-apiserver and Consul", name)
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: start servers: %w", name, err)
	}
	s = &stack{cfg: cfg, name: name, size: size, env: env, consul: env.ConsulClient}
	defer func() {
		if err != nil {
			s.close(true)
		}
	}()
	// The admin clients of the harness are throttled to 100 QPS; creating thousands of
	// objects needs more, and the controller is not running yet to compete.
	fast := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	fast.QPS, fast.Burst = 1000, 2000
	// The API server warns about every dummy tls.crt; the bench means them to be dummies.
	fast.WarningHandler = rest.NoWarnings{}
	if s.kube, err = kubernetes.NewForConfig(fast); err != nil {
		return s, err
	}
	if s.gateway, err = gatewayclient.NewForConfig(fast); err != nil {
		return s, err
	}
	if err := s.setupConsul(); err != nil {
		return s, err
	}
	start := time.Now()
	if err := s.createObjects(ctx); err != nil {
		return s, fmt.Errorf("%s: create objects: %w", name, err)
	}
	logf("%s: created %d routes, %d Gateways, %d Services, %d Secrets in %s",
		name, size.routes, size.gateways, size.gateways, size.secrets, seconds(time.Since(start)))
	trackerCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if s.tracker, err = startTracker(trackerCtx, s.gateway, benchNamespace, controllerName, size.routes+size.gateways); err != nil {
		return s, err
	}
	return s, nil
}

// setupConsul declares every service http, as a cluster's proxy-defaults would: Consul
// 1.15 accepts an http-route only to http backends, and the controller writes no
// service-defaults unless told to, so the expected entries are exactly api-gateways
// and http-routes.
func (s *stack) setupConsul() error {
	entry := &consulapi.ProxyConfigEntry{Kind: consulapi.ProxyDefaults, Name: consulapi.ProxyConfigGlobal,
		Config: map[string]any{"protocol": "http"}}
	if _, _, err := s.consul.ConfigEntries().Set(consul.Compact(entry), nil); err != nil {
		return fmt.Errorf("write proxy-defaults: %w", err)
	}
	return nil
}

// close stops the controllers and the servers. keepLogs copies the servers' logs
// next to the controllers' first, for a run that failed.
func (s *stack) close(keepLogs bool) {
	for _, c := range s.ctls {
		_ = c.Kill()
	}
	if s.stop != nil {
		s.stop()
	}
	if keepLogs {
		dir := filepath.Join(s.cfg.logDir, s.name+"-servers")
		if err := os.MkdirAll(dir, 0o755); err == nil {
			for _, src := range s.env.LogPaths() {
				if data, err := os.ReadFile(src); err == nil {
					_ = os.WriteFile(filepath.Join(dir, filepath.Base(src)), data, 0o644)
				}
			}
			logf("%s: server logs kept in %s", s.name, dir)
		}
	}
	if err := s.env.Stop(); err != nil {
		logf("%s: %v", s.name, err)
	}
}

// createObjects creates the namespaces, the GatewayClass, and per Gateway its Service,
// the Gateway and its routes, then the Secrets, with several writers at once.
func (s *stack) createObjects(ctx context.Context) error {
	for _, ns := range []string{benchNamespace, leaseNamespace} {
		if _, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	class := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Spec: gatewayv1.GatewayClassSpec{ControllerName: controllerName}}
	if _, err := s.gateway.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return err
	}
	create := []struct {
		n  int
		fn func(context.Context, int) error
	}{
		{s.size.gateways, s.createService},
		{s.size.gateways, s.createGateway},
		{s.size.routes, s.createRoute},
		{s.size.secrets, s.createSecret},
	}
	for _, c := range create {
		if err := parallel(ctx, createWorkers, c.n, c.fn); err != nil {
			return err
		}
	}
	return nil
}

func (s *stack) createService(ctx context.Context, k int) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: serviceName(k)},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: backendPort}}}}
	_, err := s.kube.CoreV1().Services(benchNamespace).Create(ctx, svc, metav1.CreateOptions{})
	return err
}

func (s *stack) createGateway(ctx context.Context, k int) error {
	hostname := gatewayv1.Hostname(gatewayName(k) + ".bench.example.com")
	class := gatewayv1.ObjectName(className)
	if s.size.class != "" {
		class = s.size.class
	}
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: gatewayName(k)},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: class, Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType, Hostname: &hostname},
		}}}
	_, err := s.gateway.GatewayV1().Gateways(benchNamespace).Create(ctx, gw, metav1.CreateOptions{})
	return err
}

func (s *stack) createRoute(ctx context.Context, i int) error {
	_, err := s.gateway.GatewayV1().HTTPRoutes(benchNamespace).Create(ctx, s.route(i), metav1.CreateOptions{})
	return err
}

// route is route i as created: attached to Gateway i mod gateways, one rule with a
// path prefix, backed by that Gateway's Service.
func (s *stack) route(i int) *gatewayv1.HTTPRoute {
	k := i % s.size.gateways
	section := gatewayv1.SectionName("http")
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: routeName(i)},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{
				{Name: gatewayv1.ObjectName(gatewayName(k)), SectionName: &section},
			}},
			Rules: []gatewayv1.HTTPRouteRule{rule(serviceName(k), routePath(i, -1))},
		},
	}
}

func rule(service, path string) gatewayv1.HTTPRouteRule {
	prefix := gatewayv1.PathMatchPathPrefix
	port := gatewayv1.PortNumber(backendPort)
	return gatewayv1.HTTPRouteRule{
		Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &prefix, Value: &path}}},
		BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Name: gatewayv1.ObjectName(service), Port: &port,
		}}}},
	}
}

// createSecret creates Secrets no Gateway refers to: half Opaque, half
// kubernetes.io/tls with dummy bytes, as a cluster's unrelated Secrets would be.
func (s *stack) createSecret(ctx context.Context, i int) error {
	filler := make([]byte, 1024)
	for j := range filler {
		filler[j] = byte('a' + (i+j)%26)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("unrelated-%05d", i)}}
	if i%2 == 0 {
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = map[string][]byte{"password": filler}
	} else {
		secret.Type = corev1.SecretTypeTLS
		secret.Data = map[string][]byte{corev1.TLSCertKey: filler, corev1.TLSPrivateKeyKey: filler}
	}
	_, err := s.kube.CoreV1().Secrets(benchNamespace).Create(ctx, secret, metav1.CreateOptions{})
	return err
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, workers, n int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg gosync.WaitGroup
	for range min(workers, max(n, 1)) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// controllerArgs are the flags of every controller the bench runs; docs/bench.md
// lists them.
func controllerArgs(cfg *config, qps float64, burst int) []string {
	var profiling []string
	if cfg.profiles {
		profiling = []string{"--profiling"}
	}
	return append(append([]string{
		fmt.Sprintf("--kube-api-qps=%g", qps),
		fmt.Sprintf("--kube-api-burst=%d", burst),
		fmt.Sprintf("--consul-workers=%d", consulWorkers),
		"--cluster-id=" + clusterID,
		// The stacks have no kubelet: gateway pods would never be Ready, and Programmed
		// would wait for them. The data plane is measured by test/dataplane, not here.
		"--deploy-gateways=false",
		// Short lease timings keep the failover quick; the proportions are
		// kube-controller-manager's.
		"--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=4s",
		"--leader-elect-retry-period=1s",
		fmt.Sprintf("-v=%d", cfg.verbosity),
	}, profiling...), cfg.extraArgs...)
}

const (
	// consulWorkers is the controller's default --consul-workers, passed explicitly so
	// the Consul floor uses the same number.
	consulWorkers = 2
	// routeWorkers is the controller's default --route-workers: the status floor writes
	// with as many goroutines.
	routeWorkers  = 4
	leaseDuration = 6 * time.Second
)

// startController runs the controller binary on this stack; close kills it.
func (s *stack) startController(name string, qps float64, burst int) (*testenv.Controller, error) {
	args := controllerArgs(s.cfg, qps, burst)
	if s.size.serviceDefaults {
		// As the user who found entries created twice ran it: with its
		// changes logged, so a write made twice shows in the log.
		args = append(args, "--manage-service-defaults", fmt.Sprintf("-v=%d", max(s.cfg.verbosity, 2)))
	}
	ctl, err := s.env.StartController(testenv.ControllerOptions{
		Binary: s.cfg.binary, Name: s.name + "-" + name, LogDir: s.cfg.logDir,
		Args: args,
	})
	if err != nil {
		return nil, err
	}
	s.ctls = append(s.ctls, ctl)
	return ctl, nil
}

// whileRunning is ctx with a timeout, cancelled early if ctl exits, so no wait outlives
// a controller that crashed.
func whileRunning(ctx context.Context, timeout time.Duration, ctl *testenv.Controller) (context.Context, context.CancelFunc) {
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-ctl.Exited():
			cancel(fmt.Errorf("controller %s exited (log: %s)", ctl.Name(), ctl.LogPath()))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil); cancelTimeout() }
}

// expectedEntries are the Consul entries of a converged stack, by kind.
func (s *stack) expectedEntries() map[string][]string {
	want := map[string][]string{}
	for k := range s.size.gateways {
		want[consulapi.APIGateway] = append(want[consulapi.APIGateway], entryName(gatewayName(k)))
	}
	for i := range s.size.routes {
		want[consulapi.HTTPRoute] = append(want[consulapi.HTTPRoute], entryName(routeName(i)))
	}
	return want
}

// consulJudged counts expected entries that are missing and that Consul has not
// accepted.
func (s *stack) consulJudged(ctx context.Context) (missing, unjudged int, err error) {
	for kind, names := range s.expectedEntries() {
		entries, _, err := s.consul.ConfigEntries().List(kind, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return 0, 0, fmt.Errorf("list %s entries: %w", kind, err)
		}
		byName := make(map[string]consulapi.ConfigEntry, len(entries))
		for _, e := range entries {
			byName[e.GetName()] = e
		}
		for _, name := range names {
			e, ok := byName[name]
			switch {
			case !ok:
				missing++
			case !entryAccepted(e):
				unjudged++
			}
		}
	}
	return missing, unjudged, nil
}

// entryAccepted reports whether Consul's own status of the entry says Accepted=True.
func entryAccepted(e consulapi.ConfigEntry) bool {
	for _, c := range consul.EntryStatus(e).Conditions {
		if c.Type == "Accepted" && c.Status == consulapi.ConditionStatusTrue {
			return true
		}
	}
	return false
}

// waitConsulJudged polls until every expected entry exists and is accepted, and
// returns when it saw that. It is called once the statuses are final, which already
// needs Consul's verdicts, so it normally succeeds at the first look.
func (s *stack) waitConsulJudged(ctx context.Context) (time.Time, error) {
	for {
		missing, unjudged, err := s.consulJudged(ctx)
		if err == nil && missing == 0 && unjudged == 0 {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for Consul's verdicts (%d missing, %d not accepted): %w",
				missing, unjudged, errors.Join(context.Cause(ctx), err))
		case <-time.After(500 * time.Millisecond):
		}
	}
}
