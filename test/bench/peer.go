package main

// The peer: Envoy Gateway's controller, run on the same kind of stack as the
// controller so the two can be compared. It is built from its own module
// (test/bench/envoygateway), never from the product's go.mod, and run out of cluster
// against the stack's kube-apiserver with the admin kubeconfig.
//
// What Envoy Gateway v1.9.1 needs to start there, beside the Gateway API CRDs the
// stack already holds:
//   - its own CRDs (gateway.envoyproxy.io), from its module's Helm chart;
//   - its namespace (ENVOY_GATEWAY_NAMESPACE, envoy-gateway-system by default);
//   - the Secrets its `certgen` subcommand creates there, as the Helm chart's certgen
//     Job does, and the xDS server's certificate, key and CA as files: under the
//     Kubernetes provider it reads them from /certs (a constant of its source, where
//     the chart mounts the envoy-gateway Secret), so the bench writes them there and
//     removes them afterwards;
//   - an EnvoyGateway configuration (envoygateway/envoy-gateway.yaml) and a
//     GatewayClass of its controllerName.
//
// The listeners it opens: the xDS server on 0.0.0.0:18000 (address and port are
// constants of its source), the admin server on 127.0.0.1:19000, and controller-
// runtime's health probe and metrics servers, bound to 127.0.0.1 on a free port by
// the link flags of buildEnvoyGateway (its source defaults them to :8081 and :8080).
// The Prometheus server (0.0.0.0:19001) and the topology-injector webhook (:9443) are
// turned off in the configuration, and the Wasm cache server (:18002, which would
// also create /var/lib/eg/wasm) does not start because the bench removes the OIDC HMAC
// Secret it keys on; nothing of route status uses it. No listener has a peer off
// this machine: the process only ever dials the stack's loopback API server.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

const (
	// peerModuleDir is the peer's own module, relative to the repository root.
	peerModuleDir = "test/bench/envoygateway"
	peerModule    = "github.com/envoyproxy/gateway"
	// peerConfigFile is the EnvoyGateway configuration, in peerModuleDir.
	peerConfigFile = "envoy-gateway.yaml"
	// peerCRDSubdir holds its CRDs (gateway.envoyproxy.io only) inside the module.
	peerCRDSubdir = "charts/gateway-helm/charts/crds/crds/generated"

	peerControllerName = gatewayv1.GatewayController("gateway.envoyproxy.io/gatewayclass-controller")
	peerClassName      = "bench-envoy-gateway"
	peerNamespace      = "envoy-gateway-system"
	// peerCertDir is where Envoy Gateway's Kubernetes provider reads the xDS server's
	// ca.crt, tls.crt and tls.key (internal/xds/runner: xdsTLSCertFilepath and the
	// rest); it cannot be configured.
	peerCertDir = "/certs"
	// peerCertMarker marks a peerCertDir whose files the bench wrote, so a later run
	// may replace them and never touches files it did not write.
	peerCertMarker = ".written-by-consul-gateway-controller-bench"
	// peerHMACSecret is the Secret certgen creates that the Wasm cache server keys on.
	peerHMACSecret = "envoy-oidc-hmac"
	// peerLeaderLog is in what the process logs when it holds its Lease ("Successfully
	// acquired lease", client-go's leader election through its logger).
	peerLeaderLog = "acquired lease"
)

// peerLDFlags bind controller-runtime's health probe and metrics servers to loopback;
// Envoy Gateway's configuration has no setting for either.
var peerLDFlags = strings.Join([]string{
	"-X github.com/envoyproxy/gateway/internal/provider/kubernetes.healthProbeBindAddress=127.0.0.1:0",
	"-X sigs.k8s.io/controller-runtime/pkg/metrics/server.DefaultBindAddress=127.0.0.1:0",
}, " ")

// buildEnvoyGateway builds Envoy Gateway's controller from its module under root
// into binDir, and returns the binary and the directory of its CRDs.
func buildEnvoyGateway(root, binDir string) (binary string, crdDir string, err error) {
	dir := filepath.Join(root, peerModuleDir)
	binary = filepath.Join(binDir, "envoy-gateway")
	start := time.Now()
	build := exec.Command("go", "build", "-ldflags", peerLDFlags, "-o", binary, peerModule+"/cmd/envoy-gateway")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build %s: %w\n%s", peerModule, err, out)
	}
	logf("built Envoy Gateway in %s", seconds(time.Since(start)))
	moduleDir, err := goModuleDir(dir, peerModule)
	if err != nil {
		return "", "", err
	}
	crdDir = filepath.Join(moduleDir, filepath.FromSlash(peerCRDSubdir))
	if files, _ := filepath.Glob(filepath.Join(crdDir, "*.yaml")); len(files) == 0 {
		return "", "", fmt.Errorf("no CRDs in %s", crdDir)
	}
	return binary, crdDir, nil
}

// goModuleDir is where the module cache holds module, as the module in dir requires it.
func goModuleDir(dir, module string) (string, error) {
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	list.Dir = dir
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("locate %s: %w: %s", module, err, stderr.String())
	}
	if d := strings.TrimSpace(string(out)); d != "" {
		return d, nil
	}
	return "", fmt.Errorf("%s is not in the module cache", module)
}

// newPeerLayout is newLayout with the Gateways in the peer's class.
func newPeerLayout(routes int) layout {
	l := newLayout(routes, 0)
	l.class = peerClassName
	return l
}

// peer is Envoy Gateway installed on one stack: everything it needs except a running
// process, which start adds.
type peer struct {
	s          *stack
	binary     string
	dir        string // kubeconfig
	kubeconfig string
	config     string
	certsMade  bool // peerCertDir was created by the bench
	tracker    *tracker
	stopWatch  context.CancelFunc
	procs      []*peerProcess
}

// setupPeer installs Envoy Gateway on a stack made with newPeerLayout: its CRDs, its
// namespace, the Secrets and certificate files certgen makes, and its GatewayClass;
// it then starts a watch that judges the peer's statuses. Close undoes what it can.
func (s *stack) setupPeer(ctx context.Context, binary, crdDir string) (p *peer, err error) {
	if s.size.class != peerClassName {
		return nil, fmt.Errorf("%s: the stack's Gateways name class %q, not the peer's %q (use newPeerLayout)", s.name, s.size.class, peerClassName)
	}
	p = &peer{s: s, binary: binary, config: filepath.Join(s.cfg.root, peerModuleDir, peerConfigFile)}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.dir, err = os.MkdirTemp("", "bench-envoy-gateway-"); err != nil {
		return p, err
	}
	p.kubeconfig = filepath.Join(p.dir, "kubeconfig")
	if err := s.env.Kube.WriteKubeconfig(p.kubeconfig, testenv.AdminUser); err != nil {
		return p, err
	}
	admin := s.env.Kube.Config(testenv.AdminUser)
	if err := testenv.InstallManifests(ctx, admin, crdDir); err != nil {
		return p, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: peerNamespace}}
	if _, err := s.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return p, err
	}
	if err := p.certgen(ctx); err != nil {
		return p, err
	}
	class := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: peerClassName},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: peerControllerName}}
	if _, err := s.gateway.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return p, err
	}
	watchCtx, stop := context.WithCancel(context.Background())
	p.stopWatch = stop
	p.tracker, err = startAttachTracker(watchCtx, s, peerControllerName)
	return p, err
}

// certgen runs Envoy Gateway's certgen subcommand, as the Helm chart's Job does (it
// creates the envoy-gateway, envoy, envoy-rate-limit and envoy-oidc-hmac Secrets in
// the namespace), writes the envoy-gateway Secret's files to peerCertDir, where the
// process reads them, and removes the HMAC Secret so the Wasm cache server stays off.
func (p *peer) certgen(ctx context.Context) error {
	logPath := filepath.Join(p.s.cfg.logDir, p.s.name+"-envoy-gateway-certgen.log")
	cmd := exec.CommandContext(ctx, p.binary, "certgen", "--disable-topology-injector")
	cmd.Env = p.env()
	out, err := cmd.CombinedOutput()
	_ = os.WriteFile(logPath, out, 0o644)
	if err != nil {
		return fmt.Errorf("envoy-gateway certgen: %w (log: %s)", err, logPath)
	}
	secret, err := p.s.kube.CoreV1().Secrets(peerNamespace).Get(ctx, "envoy-gateway", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the Secret certgen makes for Envoy Gateway: %w", err)
	}
	if err := p.writeCerts(secret.Data); err != nil {
		return err
	}
	err = p.s.kube.CoreV1().Secrets(peerNamespace).Delete(ctx, peerHMACSecret, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

var peerCertFiles = []string{"ca.crt", "tls.crt", "tls.key"}

// writeCerts writes the xDS server's files to peerCertDir, refusing to replace files
// the bench did not write.
func (p *peer) writeCerts(data map[string][]byte) error {
	if _, err := os.Stat(peerCertDir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(peerCertDir, 0o755); err != nil {
			return fmt.Errorf("create %s, where Envoy Gateway reads its xDS certificate: %w", peerCertDir, err)
		}
		p.certsMade = true
	} else if err != nil {
		return err
	}
	marker := filepath.Join(peerCertDir, peerCertMarker)
	if _, err := os.Stat(marker); err != nil && !p.certsMade {
		for _, name := range peerCertFiles {
			if _, err := os.Stat(filepath.Join(peerCertDir, name)); err == nil {
				return fmt.Errorf("%s holds %s that the bench did not write; move it away to run Envoy Gateway", peerCertDir, name)
			}
		}
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return err
	}
	for _, name := range peerCertFiles {
		if len(data[name]) == 0 {
			return fmt.Errorf("the envoy-gateway Secret has no %s", name)
		}
		if err := os.WriteFile(filepath.Join(peerCertDir, name), data[name], 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (p *peer) removeCerts() {
	marker := filepath.Join(peerCertDir, peerCertMarker)
	if _, err := os.Stat(marker); err != nil {
		return
	}
	for _, name := range append(peerCertFiles, peerCertMarker) {
		_ = os.Remove(filepath.Join(peerCertDir, name))
	}
	if p.certsMade {
		_ = os.Remove(peerCertDir)
	}
}

// env is the process's whole environment: its kubeconfig and namespace, HOME and PATH.
func (p *peer) env() []string {
	return []string{
		"HOME=" + os.Getenv("HOME"),
		"PATH=" + os.Getenv("PATH"),
		"KUBECONFIG=" + p.kubeconfig,
		"ENVOY_GATEWAY_NAMESPACE=" + peerNamespace,
	}
}

// close kills every process, stops the watch and removes the certificate files and
// the kubeconfig. The stack's objects stay: the stack goes with them.
func (p *peer) close() {
	for _, proc := range p.procs {
		_ = proc.kill()
	}
	if p.stopWatch != nil {
		p.stopWatch()
	}
	p.removeCerts()
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

// peerProcess is one Envoy Gateway process.
type peerProcess struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	log     *os.File
	started time.Time
	exited  chan struct{}
}

// start runs `envoy-gateway server` with the configuration; its output goes to
// <logDir>/<stack>-envoy-gateway-<name>.log.
func (p *peer) start(name string) (*peerProcess, error) {
	proc := &peerProcess{name: "envoy-gateway-" + name,
		logPath: filepath.Join(p.s.cfg.logDir, p.s.name+"-envoy-gateway-"+name+".log")}
	var err error
	if proc.log, err = os.OpenFile(proc.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err != nil {
		return nil, err
	}
	proc.cmd = exec.Command(p.binary, "server", "--config-path", p.config)
	proc.cmd.Env = p.env()
	proc.cmd.Stdout, proc.cmd.Stderr = proc.log, proc.log
	// As testenv does: its own process group, killed if the bench dies.
	proc.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	proc.started = time.Now()
	if err := proc.cmd.Start(); err != nil {
		proc.log.Close()
		return nil, fmt.Errorf("start %s: %w", proc.name, err)
	}
	proc.exited = make(chan struct{})
	go func() {
		_ = proc.cmd.Wait()
		proc.log.Close()
		close(proc.exited)
	}()
	p.procs = append(p.procs, proc)
	return proc, nil
}

func (proc *peerProcess) pid() int { return proc.cmd.Process.Pid }

// terminate sends SIGTERM and waits up to grace for the exit, then SIGKILL.
func (proc *peerProcess) terminate(grace time.Duration) (int, error) {
	_ = syscall.Kill(-proc.pid(), syscall.SIGTERM)
	select {
	case <-proc.exited:
		return proc.cmd.ProcessState.ExitCode(), nil
	case <-time.After(grace):
		_ = proc.kill()
		return -1, fmt.Errorf("%s still running %s after SIGTERM; killed", proc.name, grace)
	}
}

func (proc *peerProcess) kill() error {
	select {
	case <-proc.exited:
		return nil
	default:
	}
	_ = syscall.Kill(-proc.pid(), syscall.SIGKILL)
	<-proc.exited
	return nil
}

// whileRunning is ctx with the bench's timeout, cancelled early if the process exits.
func (proc *peerProcess) whileRunning(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-proc.exited:
			cancel(fmt.Errorf("%s exited (log: %s)", proc.name, proc.logPath))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil); cancelTimeout() }
}

// usage is the process's CPU seconds (utime+stime) and peak RSS (VmHWM, in bytes).
func (proc *peerProcess) usage() (cpu float64, peakRSS int64, err error) {
	if cpu, err = testenv.ProcessCPUSeconds(proc.pid()); err != nil {
		return 0, 0, err
	}
	mem, err := testenv.ProcessMemory(proc.pid())
	return cpu, mem.PeakRSS, err
}

// waitLeader follows the process's log until it says the process holds its Lease,
// and returns when it saw that. It reads each part of the log once.
func (proc *peerProcess) waitLeader(ctx context.Context) (time.Time, error) {
	f, err := os.Open(proc.logPath)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	var tail []byte // the end of what was read, in case the text spans two reads
	buf := make([]byte, 256*1024)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			chunk := append(tail, buf[:n]...)
			if bytes.Contains(chunk, []byte(peerLeaderLog)) {
				return time.Now(), nil
			}
			tail = append([]byte(nil), chunk[max(0, len(chunk)-len(peerLeaderLog)):]...)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return time.Time{}, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for %s to lead: %w", proc.name, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// attachedRouteFinal reports whether the route has a parent status of controller
// with Accepted=True at the route's generation.
func attachedRouteFinal(r *gatewayv1.HTTPRoute, controller gatewayv1.GatewayController) bool {
	for _, p := range r.Status.Parents {
		if p.ControllerName == controller {
			c := meta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted))
			return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == r.Generation
		}
	}
	return false
}

// attachedGatewayFinal reports whether every listener of the Gateway has a status whose
// attachedRoutes is want.
func attachedGatewayFinal(g *gatewayv1.Gateway, want int32) bool {
	for _, l := range g.Spec.Listeners {
		found := false
		for _, ls := range g.Status.Listeners {
			if ls.Name == l.Name {
				found = ls.AttachedRoutes == want
				break
			}
		}
		if !found {
			return false
		}
	}
	return len(g.Spec.Listeners) > 0
}

// routesOf is how many of the layout's routes attach to Gateway k (route i attaches
// to Gateway i mod gateways).
func (l layout) routesOf(k int) int32 {
	n := l.routes / l.gateways
	if k < l.routes%l.gateways {
		n++
	}
	return int32(n)
}

// startAttachTracker is startTracker with the field benchmark's idea of final, which
// Envoy Gateway and this controller can both be held to: a route is final when
// attachedRouteFinal holds for controller, a Gateway when each listener counts the
// routes of the layout attached to it. The tracker's other methods (waitAllFinal,
// lastChange, window) work as they do for the controller.
func startAttachTracker(ctx context.Context, s *stack, controller gatewayv1.GatewayController) (*tracker, error) {
	t := &tracker{controller: controller, expected: s.size.routes + s.size.gateways,
		objects: map[string]*objectState{}, notify: make(chan struct{})}
	want := map[string]int32{}
	for k := range s.size.gateways {
		want[gatewayName(k)] = s.size.routesOf(k)
	}
	factory := gatewayinformers.NewSharedInformerFactoryWithOptions(s.gateway, 0, gatewayinformers.WithNamespace(benchNamespace))
	routes := factory.Gateway().V1().HTTPRoutes().Informer()
	gateways := factory.Gateway().V1().Gateways().Informer()
	observeRoute := func(old, obj any) {
		r, ok := obj.(*gatewayv1.HTTPRoute)
		if !ok {
			return
		}
		o, ok := old.(*gatewayv1.HTTPRoute)
		t.observe(routeKey(r.Name), r.Generation, attachedRouteFinal(r, controller), ok && !apiequality.Semantic.DeepEqual(o.Status, r.Status))
	}
	observeGateway := func(old, obj any) {
		g, ok := obj.(*gatewayv1.Gateway)
		if !ok {
			return
		}
		o, ok := old.(*gatewayv1.Gateway)
		t.observe(gatewayKey(g.Name), g.Generation, attachedGatewayFinal(g, want[g.Name]), ok && !apiequality.Semantic.DeepEqual(o.Status, g.Status))
	}
	if _, err := routes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observeRoute(nil, obj) },
		UpdateFunc: observeRoute,
	}); err != nil {
		return nil, err
	}
	if _, err := gateways.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observeGateway(nil, obj) },
		UpdateFunc: observeGateway,
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("peer tracker: %v never synced", typ)
		}
	}
	return t, nil
}

// apiCounts are the kube-apiserver's own count of the requests it served, from its
// /metrics: apiserver_request_total (counted when a request completes) and, for
// watches, apiserver_longrunning_requests (the watches open now). Every client is
// counted, so a difference of two reads (minus) is what all clients did between them:
// the process under test and the API server's own loops (its identity Lease, renewed
// every 10 s). The bench's watches are open at both reads and so cancel out; its
// reads of /metrics are not counted by the server.
type apiCounts struct {
	// requests is every request by the server's verb label: GET, LIST, WATCH, POST
	// (create), PUT (update), PATCH, APPLY (server-side apply), DELETE,
	// DELETECOLLECTION; requests to non-resource URLs (discovery, health) are GETs.
	// WATCH counts the watches opened: those that ended plus those open now (a
	// watch-list, client-go's streaming list, is a WATCH).
	requests map[string]float64
	// byResource is every request by resource ("leases", "httproutes/status", "-" for
	// a non-resource URL), with watches counted as in requests.
	byResource map[string]float64
	// statusWrites are PUT, PATCH and APPLY requests to a status subresource, by
	// resource (conflicts and errors included: the server served them).
	statusWrites map[string]float64
	// writes are POST, PUT, PATCH, APPLY, DELETE and DELETECOLLECTION requests by
	// resource, as in byResource.
	writes map[string]float64
}

// statusWriteVerbs are the verbs that write a status.
var statusWriteVerbs = map[string]bool{"PUT": true, "PATCH": true, "APPLY": true}

// writeVerbs are the verbs that change an object.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// apiCountsOf reads apiserver_request_total and apiserver_longrunning_requests from
// one /metrics text.
func apiCountsOf(text string) (apiCounts, error) {
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "apiserver_request_total{") || strings.HasPrefix(line, "apiserver_longrunning_requests{") {
			lines = append(lines, line)
		}
	}
	m, err := parseScrape(strings.Join(lines, "\n"))
	if err != nil {
		return apiCounts{}, err
	}
	c := apiCounts{requests: map[string]float64{}, byResource: map[string]float64{}, statusWrites: map[string]float64{}, writes: map[string]float64{}}
	for _, x := range m {
		verb := x.labels["verb"]
		if x.name == "apiserver_longrunning_requests" && verb != "WATCH" {
			continue // only watches are counted open
		}
		resource := x.labels["resource"]
		if resource == "" {
			resource = "-"
		} else if sub := x.labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		c.requests[verb] += x.value
		c.byResource[resource] += x.value
		if x.name != "apiserver_request_total" {
			continue
		}
		if writeVerbs[verb] {
			c.writes[resource] += x.value
		}
		if x.labels["subresource"] == "status" && statusWriteVerbs[verb] {
			c.statusWrites[x.labels["resource"]] += x.value
		}
	}
	if len(c.requests) == 0 {
		return c, errors.New("no apiserver_request_total in the API server's /metrics")
	}
	return c, nil
}

// minus is what happened between before and c.
func (c apiCounts) minus(before apiCounts) apiCounts {
	sub := func(a, b map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range a {
			if d := v - b[k]; d != 0 {
				out[k] = d
			}
		}
		for k, v := range b {
			if _, ok := a[k]; !ok && v != 0 {
				out[k] = -v
			}
		}
		return out
	}
	d := apiCounts{requests: sub(c.requests, before.requests), byResource: sub(c.byResource, before.byResource),
		statusWrites: sub(c.statusWrites, before.statusWrites), writes: sub(c.writes, before.writes)}
	return d
}

func sumValues(m map[string]float64) float64 {
	var total float64
	for _, v := range m {
		total += v
	}
	return total
}

// statusWriteTotal is every status write.
func (c apiCounts) statusWriteTotal() float64 { return sumValues(c.statusWrites) }

// requestTotal is every request.
func (c apiCounts) requestTotal() float64 { return sumValues(c.requests) }

// writesBesidesLeases counts the writes to anything but a Lease: what a settled
// process no longer makes (a leader renews its Lease every second forever).
func (c apiCounts) writesBesidesLeases() float64 {
	return sumValues(c.writes) - c.writes["leases"]
}

func (c apiCounts) text() string {
	return fmt.Sprintf("status writes %.0f (%s); requests %.0f (by verb: %s; by resource: %s)",
		c.statusWriteTotal(), breakdown(c.statusWrites), c.requestTotal(), breakdown(c.requests), breakdown(c.byResource))
}

// apiserverCounts reads the stack's kube-apiserver's request counts once; the
// difference of two reads (minus) is what its clients did in between. It works for any
// process under test, the controller as well as the peer. The read itself is not
// counted: kube-apiserver does not instrument its /metrics.
func (s *stack) apiserverCounts(ctx context.Context) (apiCounts, error) {
	raw, err := s.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiCounts{}, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	return apiCountsOf(string(raw))
}

// peerRun is the peer's cold start on a stack, and a restart on the converged stack.
type peerRun struct {
	size layout
	// converge is from the process's start until the watch saw every route Accepted
	// by the peer at its generation and every listener counting its routes.
	converge time.Duration
	// leaderIn is from the process's start until it logged that it holds the Lease.
	leaderIn time.Duration
	// cold is what the API server served from the process's start until it settled:
	// no status change seen by the watch and no write to anything but a Lease for
	// cfg.quiet. settled is how long that took.
	cold    apiCounts
	settled time.Duration
	cpu     float64 // CPU seconds of the process when settled
	peakRSS int64   // VmHWM of the process when settled, bytes
	// restart is the same count for a new process started once the first exited
	// after SIGTERM, until it settled; restartExit is the first one's exit code.
	restart         apiCounts
	restartLeaderIn time.Duration
	restartSettled  time.Duration
	restartExit     int
	// background is what the API server served with no process running, over
	// backgroundFor, read just before the cold start: the part of every window that
	// is not the process's.
	background    apiCounts
	backgroundFor time.Duration
}

// peerColdStart installs the peer on a stack made with newPeerLayout, starts it on
// the routes and Gateways the stack holds, measures it until it settled, then
// restarts it (SIGTERM, then a new process) and counts what the new one does until it
// settled. Nothing of the peer is left running when it returns.
func (s *stack) peerColdStart(ctx context.Context, binary, crdDir string) (*peerRun, error) {
	p, err := s.setupPeer(ctx, binary, crdDir)
	if err != nil {
		return nil, err
	}
	defer p.close()
	run := &peerRun{size: s.size}

	// The background: the same window length the settling needs, with nothing running.
	idleFrom, err := s.apiserverCounts(ctx)
	if err != nil {
		return nil, err
	}
	idleStart := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(s.cfg.quiet):
	}
	idleTo, err := s.apiserverCounts(ctx)
	if err != nil {
		return nil, err
	}
	run.background, run.backgroundFor = idleTo.minus(idleFrom), time.Since(idleStart)

	before := idleTo
	proc, err := p.start("cold")
	if err != nil {
		return nil, err
	}
	wctx, cancel := proc.whileRunning(ctx, s.cfg.timeout)
	defer cancel()
	led, err := proc.waitLeader(wctx)
	if err != nil {
		return nil, err
	}
	run.leaderIn = led.Sub(proc.started)
	finalAt, err := p.tracker.waitAllFinal(wctx)
	if err != nil {
		return nil, err
	}
	run.converge = finalAt.Sub(proc.started)
	logf("%s: Envoy Gateway converged in %s", s.name, seconds(run.converge))
	after, err := p.settle(wctx, proc)
	if err != nil {
		return nil, err
	}
	run.cold, run.settled = after.minus(before), time.Since(proc.started)
	if run.cpu, run.peakRSS, err = proc.usage(); err != nil {
		return nil, err
	}
	logf("%s: Envoy Gateway settled in %s: %s", s.name, seconds(run.settled), run.cold.text())

	if run.restartExit, err = proc.terminate(30 * time.Second); err != nil {
		return nil, err
	}
	before, err = s.apiserverCounts(ctx)
	if err != nil {
		return nil, err
	}
	next, err := p.start("restart")
	if err != nil {
		return nil, err
	}
	rctx, rcancel := next.whileRunning(ctx, s.cfg.timeout)
	defer rcancel()
	if led, err = next.waitLeader(rctx); err != nil {
		return nil, err
	}
	run.restartLeaderIn = led.Sub(next.started)
	if after, err = p.settle(rctx, next); err != nil {
		return nil, err
	}
	run.restart, run.restartSettled = after.minus(before), time.Since(next.started)
	logf("%s: restarted Envoy Gateway settled in %s: %s", s.name, seconds(run.restartSettled), run.restart.text())
	if _, err := next.terminate(30 * time.Second); err != nil {
		return nil, err
	}
	return run, nil
}

// settle waits until every object is final and, for cfg.quiet, the watch saw no
// status change and the API server counted no status write and no write to anything
// but a Lease; it returns the last read. Call it once the process leads.
func (p *peer) settle(ctx context.Context, proc *peerProcess) (apiCounts, error) {
	var last apiCounts
	lastWrites, changed := -1.0, time.Now()
	for {
		c, err := p.s.apiserverCounts(ctx)
		if err != nil {
			return last, err
		}
		last = c
		now := time.Now()
		if w := c.statusWriteTotal() + c.writesBesidesLeases(); w != lastWrites {
			lastWrites, changed = w, now
		}
		quietSince := changed
		if lc := p.tracker.lastChange(); lc.After(quietSince) {
			quietSince = lc
		}
		if p.tracker.allFinal() && now.Sub(quietSince) >= p.s.cfg.quiet {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for %s to settle: %w (%s)", proc.name, context.Cause(ctx), p.tracker.summary())
		case <-time.After(time.Second):
		}
	}
}

// text is the run in a few lines, for the log and the report.
func (r *peerRun) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Envoy Gateway, %d routes on %d Gateways:\n", r.size.routes, r.size.gateways)
	fmt.Fprintf(&b, "  cold start: leader in %s, all routes Accepted and attached in %s, settled in %s\n",
		seconds(r.leaderIn), seconds(r.converge), seconds(r.settled))
	fmt.Fprintf(&b, "    %s\n", r.cold.text())
	fmt.Fprintf(&b, "    CPU %.2f s, peak RSS %.1f MiB\n", r.cpu, float64(r.peakRSS)/(1<<20))
	fmt.Fprintf(&b, "  restart (exit code %d): leader in %s, settled in %s\n", r.restartExit, seconds(r.restartLeaderIn), seconds(r.restartSettled))
	fmt.Fprintf(&b, "    %s\n", r.restart.text())
	fmt.Fprintf(&b, "  background over %s with no process: %s\n", seconds(r.backgroundFor), r.background.text())
	return b.String()
}
