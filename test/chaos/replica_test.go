package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	gosync "sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// Leader election is fast here so that failovers fit in a short run; the proportions
// are the defaults'.
const (
	leaseName     = "chaos"
	leaseDuration = 4 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// replica is one controller process slot, supervised as a kubelet would: when the
// process exits it is started again, unless a fault holds it down. It reaches the API
// server and Consul only through its own proxies.
type replica struct {
	name   string
	kube   *faultProxy
	consul *faultProxy
	args   []string
	binary string
	env    *scenarioEnv

	mu        gosync.Mutex
	proc      *testenv.Controller
	down      bool
	starts    int
	startedAt time.Time
}

func newReplica(t *testing.T, s *scenarioEnv, name string, binary string, seed uint64) *replica {
	t.Helper()
	upstreamTLS, err := rest.TLSConfigFor(s.adminConfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := newFaultProxy(name, "kube", s.adminConfig.Host, upstreamTLS, true, s.writes, &s.expired, seed, kubeWrite)
	if err != nil {
		t.Fatal(err)
	}
	consul, err := newFaultProxy(name, "consul", "http://"+env.Consul.HTTPAddr(), nil, false, s.writes, &s.expired, seed+1, consulWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kube.Close(); consul.Close() })
	r := &replica{name: name, kube: kube, consul: consul, binary: binary, env: s}
	r.args = []string{
		"--controller-name=" + s.controllerName, "--cluster-id=" + s.clusterID, "-v=2",
		"--leader-elect-resource-namespace=" + s.ns, "--leader-elect-resource-name=" + leaseName,
		"--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=" + renewDeadline.String(),
		"--leader-elect-retry-period=" + retryPeriod.String(),
	}
	return r
}

// kubeconfig points at the replica's proxy with the admin's token; the proxy's
// certificate is its own, so the replica skips verifying it (the proxy verifies the API
// server's).
func (r *replica) kubeconfig(dir string) (string, error) {
	path := filepath.Join(dir, "kubeconfig-"+r.name)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["chaos"] = &clientcmdapi.Cluster{Server: r.kube.URL(), InsecureSkipTLSVerify: true}
	cfg.AuthInfos["chaos"] = &clientcmdapi.AuthInfo{Token: r.env.adminConfig.BearerToken}
	cfg.Contexts["chaos"] = &clientcmdapi.Context{Cluster: "chaos", AuthInfo: "chaos"}
	cfg.CurrentContext = "chaos"
	return path, clientcmd.WriteToFile(*cfg, path)
}

func (r *replica) start(dir string) error {
	kubeconfig, err := r.kubeconfig(dir)
	if err != nil {
		return err
	}
	proc, err := env.StartController(testenv.ControllerOptions{
		Binary: r.binary, Name: r.name, Kubeconfig: kubeconfig, ConsulAddr: r.consul.URL(), Args: r.args,
	})
	if err != nil {
		return err
	}
	r.proc = proc
	r.starts++
	r.startedAt = time.Now()
	return nil
}

// supervise restarts the process whenever it is not running and not held down,
// backing off as a kubelet does for a container that keeps exiting (a replica exits
// at once while the API server is down).
func (r *replica) supervise(ctx context.Context, dir string, errs chan<- error) {
	backoff := restartBackoff
	for ctx.Err() == nil {
		started, ranFor := r.ensureRunning(dir, errs)
		switch {
		case started && ranFor > 10*time.Second:
			backoff = restartBackoff
		case started:
			backoff = min(2*backoff, maxRestartBackoff)
		}
		wait := 300 * time.Millisecond
		if started {
			wait = backoff
		}
		sleepCtx(ctx, wait)
	}
}

const (
	restartBackoff    = 500 * time.Millisecond
	maxRestartBackoff = 8 * time.Second
)

// ensureRunning starts the process if it is down and not held down; it says whether
// it did, and how long the previous process had run.
func (r *replica) ensureRunning(dir string, errs chan<- error) (bool, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down || (r.proc != nil && r.proc.Running()) {
		return false, 0
	}
	ranFor := time.Since(r.startedAt)
	if err := r.start(dir); err != nil {
		select {
		case errs <- fmt.Errorf("start %s: %w", r.name, err):
		default:
		}
		return false, 0
	}
	return true, ranFor
}

// kill sends SIGKILL; with hold, the process stays down until release.
func (r *replica) kill(hold bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = hold
	if r.proc != nil && r.proc.Running() {
		_ = r.proc.Kill()
		<-r.proc.Exited()
	}
}

func (r *replica) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = false
}

// stop ends the process for good with SIGTERM, as a rollout does.
func (r *replica) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = true
	if r.proc != nil && r.proc.Running() {
		if _, err := r.proc.Terminate(10 * time.Second); err != nil {
			_ = r.proc.Kill()
		}
	}
}

func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil || !r.proc.Running() {
		return 0
	}
	return r.proc.Pid()
}

// counter is a thread-safe count by name.
type counter struct {
	mu gosync.Mutex
	n  map[string]int
}

func (c *counter) add(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name] += n
}
