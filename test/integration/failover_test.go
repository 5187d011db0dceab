package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// Lease timing of the failover test: short, so the test is quick, in the proportions
// kube-controller-manager uses.
const (
	failoverLease = 6 * time.Second
	failoverRenew = 4 * time.Second
	failoverRetry = 1 * time.Second
)

// TestLeaderFailoverAcrossProcesses runs replicas of the binary against one API server
// and one Consul, each through its own proxies so that every write is attributed, by
// what the proxies saw rather than what the replica reports:
//  1. exactly one replicaProcess writes, and none before it holds the Lease;
//  2. the leader cut off from the API server stops writing and exits non-zero before
//     the other replicaProcess takes the Lease, and makes no write after that;
//  3. the new leader, SIGKILLed, is replaced within the lease duration by a third
//     replicaProcess, which converges an edit.
func TestLeaderFailoverAcrossProcesses(t *testing.T) {
	s := newConsulStack(t, "failover")
	env.Create(t, s.Route("web"))
	routeEntry := s.naming.EntryName(s.Namespace, "web")

	a := startReplicaProcess(t, "a", failoverArgs(s))
	waitHolder(t, s.Namespace, "failover", "a")
	testenv.Eventually(t, 60*time.Second, "replica a converges the example", func(context.Context) error {
		if got := s.routeCondition(t, "web", gwsync.ConsulAcceptedCondition); got != "True/Accepted" {
			return fmt.Errorf("route web ConsulAccepted = %q", got)
		}
		return nil
	})
	b := startReplicaProcess(t, "b", failoverArgs(s))
	if err := b.process.WaitReady(t.Context(), 60*time.Second); err != nil {
		t.Fatal(err)
	}

	// 1. Only the leader writes, also when there is something to write and the leader
	// is slow to.
	editWhileLeaderPaused(t, s, a, "one.example.com")
	if n := a.kube.since(time.Time{}) + a.consul.since(time.Time{}); n == 0 {
		t.Error("the leader made no writes")
	}
	if n := b.kube.since(time.Time{}); n != 0 {
		t.Errorf("the follower made %d API server writes", n)
	}
	if n := b.consul.since(time.Time{}); n != 0 {
		t.Errorf("the follower made %d Consul writes", n)
	}

	// 2. Cut the leader off from the API server. It cannot renew; within the renew
	// deadline it stops its writers and exits non-zero, and only after that can b
	// take the Lease.
	a.kube.cut()
	code, err := a.process.Wait(failoverRenew + 10*time.Second)
	if err != nil {
		a.process.DumpGoroutines()
	}
	if err != nil || code == 0 {
		t.Fatalf("the cut-off leader: exit %d, %v; want a non-zero exit", code, err)
	}
	acquired := waitHolder(t, s.Namespace, "failover", "b")
	if stopped := logTime(t, a.process.Output(), "Writers stopped"); !stopped.Before(acquired) {
		t.Errorf("a's writers stopped at %v, after b acquired the Lease at %v", stopped, acquired)
	}
	if n := a.consul.since(acquired); n != 0 {
		t.Errorf("the old leader made %d Consul writes after b acquired the Lease", n)
	}
	if !strings.Contains(a.process.Output(), "leader election lost") {
		t.Errorf("the old leader's log does not say it lost the election:\n%s", testenv.Tail(a.process.Output(), 20))
	}
	// b corrects drift that happens while a is gone.
	edited := s.entry(t, consulapi.HTTPRoute, routeEntry).(*consulapi.HTTPRouteConfigEntry)
	edited.Hostnames = []string{"hijacked.example.com"}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(consul.Compact(edited), nil); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.HTTPRoute, routeEntry, "b puts the hand edit back", func(e consulapi.ConfigEntry) bool {
		return e != nil && strings.Join(routeHostnames(e), ",") == "one.example.com"
	})
	if b.consul.since(acquired) == 0 {
		t.Error("b made no Consul write after taking over")
	}

	// 3. SIGKILL the new leader: a third replicaProcess takes over within the lease duration
	// (plus one retry period and scheduling slack) and converges an edit.
	c := startReplicaProcess(t, "c", failoverArgs(s))
	if err := c.process.WaitReady(t.Context(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	// Something to write while c follows: only b may write it.
	editWhileLeaderPaused(t, s, b, "between.example.com")
	killed := time.Now()
	_ = b.process.Kill()
	tookOver := waitHolder(t, s.Namespace, "failover", "c")
	if limit := failoverLease + failoverRetry + 3*time.Second; tookOver.Sub(killed) > limit {
		t.Errorf("c took the Lease %v after b was killed; want within %v", tookOver.Sub(killed), limit)
	}
	setHostnames(t, s.Namespace, "web", "two.example.com")
	s.waitEntry(t, consulapi.HTTPRoute, routeEntry, "c writes the edit", func(e consulapi.ConfigEntry) bool {
		return e != nil && strings.Join(routeHostnames(e), ",") == "two.example.com"
	})
	if c.consul.since(tookOver) == 0 {
		t.Error("c made no Consul write after taking over")
	}
	// Each follower wrote nothing until it held the Lease (a's writes after b took it
	// are checked above).
	if n := b.writesBefore(acquired); n != 0 {
		t.Errorf("b made %d writes before it acquired the Lease", n)
	}
	if n := c.writesBefore(tookOver); n != 0 {
		t.Errorf("c made %d writes before it took over the Lease", n)
	}
}

// editWhileLeaderPaused edits the route "web" while the leader is stopped (SIGSTOP),
// as one stalled by the scheduler still holds the Lease, and gives the followers time
// to write it, which they must not; then resumes the leader and waits for the edit in
// Consul. The pause is well within the renew deadline, so the leader keeps the Lease.
func editWhileLeaderPaused(t *testing.T, s consulStack, leader *replicaProcess, hostname string) {
	t.Helper()
	_ = leader.process.Pause()
	defer func() { _ = leader.process.Resume() }()
	setHostnames(t, s.Namespace, "web", gatewayv1.Hostname(hostname))
	time.Sleep(2 * time.Second)
	_ = leader.process.Resume()
	s.waitEntry(t, consulapi.HTTPRoute, s.naming.EntryName(s.Namespace, "web"), "the leader writes the edit "+hostname, func(e consulapi.ConfigEntry) bool {
		return e != nil && strings.Join(routeHostnames(e), ",") == hostname
	})
}

// replicaProcess is one controller process with the proxies that attribute its traffic.
type replicaProcess struct {
	process *testenv.Controller
	kube    *kubeWriteLog
	consul  *consulWriteLog
}

// writesBefore is how many writes the replica sent before t, to the API server (its
// Lease aside) or to Consul, as its proxies saw them.
func (r *replicaProcess) writesBefore(t time.Time) int {
	return r.kube.before(t) + r.consul.before(t)
}

// replicaOption adjusts a replica's proxies before the process starts.
type replicaOption func(*replicaProcess)

// withListDelay makes Consul answer the replica's lists of config entries late.
func withListDelay(d time.Duration) replicaOption {
	return func(r *replicaProcess) { r.consul.listDelay.Store(int64(d)) }
}

// withStaleLists hands the replica each of Consul's answers to its lists of config
// entries d after Consul gave it: what Consul held then, while the replica's own
// writes land meanwhile, as a busy Consul or client would.
func withStaleLists(d time.Duration) replicaOption {
	return func(r *replicaProcess) { r.consul.answerDelay.Store(int64(d)) }
}

// isEntryList reports whether req lists the config entries of a kind.
func isEntryList(req *http.Request) bool {
	kind, ok := strings.CutPrefix(req.URL.Path, "/v1/config/")
	return ok && req.Method == http.MethodGet && kind != "" && !strings.Contains(kind, "/")
}

// failoverArgs are the flags of the failover test's replicas.
func failoverArgs(s consulStack) []string {
	return []string{
		"--controller-name=" + string(s.Controller), "--cluster-id=failover", "--manage-service-defaults", "-v=2",
		"--leader-elect-resource-namespace=" + s.Namespace, "--leader-elect-resource-name=failover",
		"--leader-elect-lease-duration=" + failoverLease.String(),
		"--leader-elect-renew-deadline=" + failoverRenew.String(),
		"--leader-elect-retry-period=" + failoverRetry.String(),
	}
}

// startReplicaProcess runs the binary as identity with args, reaching the API server
// and Consul through proxies of its own.
func startReplicaProcess(t *testing.T, identity string, args []string, opts ...replicaOption) *replicaProcess {
	t.Helper()
	r := &replicaProcess{kube: startKubeWriteLog(t), consul: startConsulWriteLog(t, env.Consul.HTTPAddr())}
	for _, o := range opts {
		o(r)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kube.WriteKubeconfig(kubeconfig, testenv.AdminUser); err != nil {
		t.Fatal(err)
	}
	throughProxy(t, kubeconfig, r.kube.Server)
	r.process = env.RunController(t, testenv.ControllerOptions{Name: identity, Kubeconfig: kubeconfig, ConsulAddr: r.consul.addr,
		Args: append([]string{"--deploy-gateways=false"}, args...)})
	return r
}

// statusWrites is the replicaProcess's own count of status writes, from its /metrics.
func (r *replicaProcess) statusWrites(t *testing.T) int {
	t.Helper()
	body, err := r.process.Metrics(t.Context())
	if err != nil {
		t.Fatalf("%s: %v", r.process.Name(), err)
	}
	return int(testenv.MetricSum(body, "consul_gateway_controller_status_writes_total"))
}

// waitHolder waits until identity holds the Lease namespace/name and returns when it
// acquired it, by the API server's clock (the same machine's).
func waitHolder(t *testing.T, namespace, name, identity string) time.Time {
	t.Helper()
	var acquired time.Time
	testenv.Eventually(t, 30*time.Second, identity+" holds the Lease", func(context.Context) error {
		lease, err := env.KubeClient.CoordinationV1().Leases(namespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := lease.Spec.HolderIdentity; h == nil || *h != identity || lease.Spec.AcquireTime == nil {
			return fmt.Errorf("holder %v since %v", deref(h), lease.Spec.AcquireTime)
		}

		acquired = lease.Spec.AcquireTime.Time
		return nil
	})
	return acquired
}

// setHostnames sets the hostnames of the HTTPRoute ns/name, as a user's edit would, and
// returns the route written.
func setHostnames(t *testing.T, ns, name string, hostnames ...gatewayv1.Hostname) *gatewayv1.HTTPRoute {
	t.Helper()
	routes := env.GatewayClient.GatewayV1().HTTPRoutes(ns)
	return testenv.Update(t, routes.Get, routes.Update, name, func(r *gatewayv1.HTTPRoute) { r.Spec.Hostnames = hostnames })
}

// logTime is the time of the first klog line of out that contains msg.
func logTime(t *testing.T, out, msg string) time.Time {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, msg) || len(line) < 21 {
			continue
		}
		// klog's header: Lmmdd hh:mm:ss.uuuuuu, in local time.
		at, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
		if err != nil {
			t.Fatalf("parse the time of %q: %v", line, err)
		}
		now := time.Now()
		return at.AddDate(now.Year(), 0, 0)
	}
	t.Fatalf("no log line says %q:\n%s", msg, testenv.Tail(out, 20))
	return time.Time{}
}

// kubeWriteLog is a reverse proxy to the API server that records when each write
// (POST, PUT, PATCH, DELETE) other than of a Lease was sent; the Lease is the election's
// own traffic, which followers make too. Until cut, which closes every connection and
// refuses new ones: a network partition between one replicaProcess and the API server.
// It serves https (client-go sends no token over http) with a certificate of its own;
// each request carries the replica's own token.
type kubeWriteLog struct {
	*httptest.Server
	writeTimes
}

func startKubeWriteLog(t *testing.T) *kubeWriteLog {
	t.Helper()
	reverse := kubeReverseProxy(t)
	// A cut or a replica that goes away ends its requests; that is no news.
	reverse.ErrorLog = log.New(io.Discard, "", 0)
	p := &kubeWriteLog{}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if !strings.Contains(req.URL.Path, "/leases") {
				p.add()
			}
		}
		reverse.ServeHTTP(w, req)
	}))
	t.Cleanup(p.cut)
	return p
}

// cut refuses new connections, then closes the open ones (watches too, or Close
// would wait for them).
func (p *kubeWriteLog) cut() {
	_ = p.Listener.Close()
	p.CloseClientConnections()
	p.Close()
}

// consulWriteLog is a reverse proxy to Consul that records when each config entry
// write or delete was sent. Lists of config entries (the syncer's reads of Consul's
// verdicts and its watch) can be held back for listDelay, as a slow Consul would, and
// their answers for answerDelay once Consul gave them.
type consulWriteLog struct {
	addr string
	writeTimes
	listDelay   atomic.Int64 // nanoseconds
	answerDelay atomic.Int64 // nanoseconds
}

func startConsulWriteLog(t *testing.T, consulAddr string) *consulWriteLog {
	t.Helper()
	target, err := url.Parse("http://" + strings.TrimPrefix(consulAddr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &consulWriteLog{addr: "http://" + l.Addr().String()}
	proxy := httputil.NewSingleHostReverseProxy(target)
	// A replica that goes away cancels its blocking queries; that is no news.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if (req.Method == http.MethodPut || req.Method == http.MethodDelete) && strings.HasPrefix(req.URL.Path, "/v1/config") {
			w.add()
		}
		if d := time.Duration(w.listDelay.Load()); d > 0 && req.Method == http.MethodGet && strings.Count(strings.Trim(req.URL.Path, "/"), "/") == 2 {
			time.Sleep(d) // GET /v1/config/<kind>: a list
		}
		if d := time.Duration(w.answerDelay.Load()); d > 0 && isEntryList(req) {
			answer := httptest.NewRecorder()
			proxy.ServeHTTP(answer, req)
			time.Sleep(d)
			maps.Copy(rw.Header(), answer.Header())
			rw.WriteHeader(answer.Code)
			_, _ = rw.Write(answer.Body.Bytes())
			return
		}
		proxy.ServeHTTP(rw, req)
	})}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(fmt.Sprintf("consul write log: %v", err))
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return w
}
