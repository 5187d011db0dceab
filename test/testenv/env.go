// Package testenv runs the real servers that integration tests talk to: etcd and
// kube-apiserver with the Gateway API CRDs installed, and a Consul dev agent, all built
// by `make tools` and bound to loopback. One Env is shared by the tests of a package
// (see Main); each server can be stopped and started again mid-test.
//
// It also holds what those tests, and the unit tests, would otherwise each write
// again: the one way to run the controller binary (StartController, RunController),
// polling (Eventually, Poll), reading conditions (ConditionReason), the Gateway API
// fixture builders (Gateway, HTTPRoute, ...), and the usual set-up of a namespace,
// class, Service, Gateway and routes (Stack).
package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/kubernetes"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	configclient "github.com/consul-gateway-controller/consul-gateway-controller/api/client"
)

// Options selects what Start brings up.
type Options struct {
	// Users are the named identities that get a bearer token besides the admin. They
	// have no permissions until a test binds RBAC to them.
	Users []string
	// ConsulACL starts Consul with ACLs on (default deny) and a management token.
	ConsulACL bool
	// ConsulTLS starts Consul speaking only TLS (see ConsulOptions.TLS); a controller
	// started with StartController then trusts its CA.
	ConsulTLS bool
	// StateDir keeps the servers' data, certificates and logs there and leaves it in
	// place on Stop (for make run-local). Empty means a temp dir that Stop removes.
	StateDir string
	// Nodes, when above zero, also starts the Workloads with that many fake Nodes, so
	// Deployments roll out to Ready pods and owned objects are garbage-collected.
	Nodes int
	// ConsulDataDir runs Consul as a single server keeping its state in the Env's
	// directory instead of a dev agent, so a restart keeps the data unless WipeData is
	// called between Stop and Start.
	ConsulDataDir bool
	// APIServerArgs are added to kube-apiserver's flags.
	APIServerArgs []string
}

// Env is a running set of servers and admin clients for them.
type Env struct {
	Kube   *KubeAPI
	Consul *ConsulAgent
	// Workloads is nil unless Options.Nodes asked for it.
	Workloads *Workloads

	// Clients authenticated as AdminUser and with Consul's management token.
	KubeClient    kubernetes.Interface
	GatewayClient gatewayclient.Interface
	ConfigClient  configclient.Interface // the project's own API (GatewayConfig)
	ConsulClient  *consulapi.Client

	dir     string
	logDir  string
	keepDir bool
}

// Start brings up etcd, kube-apiserver (with the Gateway API CRDs and the project's own
// Established), Consul and, when asked, the Workloads. On error everything started so
// far is stopped again.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	env = &Env{keepDir: opts.StateDir != ""}
	if env.dir, err = stateDir(opts.StateDir); err != nil {
		return nil, err
	}
	env.logDir = filepath.Join(env.dir, "logs")
	if err := os.MkdirAll(env.logDir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = env.Stop()
			env = nil
		}
	}()
	if env.Kube, err = startKubeAPI(env.dir, env.logDir, opts.Users, opts.APIServerArgs); err != nil {
		return env, err
	}
	consulData := ""
	if opts.ConsulDataDir {
		consulData = filepath.Join(env.dir, "consul")
	}
	if env.Consul, err = startConsul(env.logDir, ConsulOptions{ACL: opts.ConsulACL, TLS: opts.ConsulTLS}, consulData); err != nil {
		return env, err
	}
	if err = InstallGatewayAPI(ctx, env.Kube.Config(AdminUser)); err != nil {
		return env, err
	}
	if err = InstallProjectCRDs(ctx, env.Kube.Config(AdminUser)); err != nil {
		return env, err
	}
	if opts.Nodes > 0 {
		if env.Workloads, err = startWorkloads(ctx, env.dir, env.logDir, env.Kube, opts.Nodes); err != nil {
			return env, err
		}
	}
	return env, env.adminClients()
}

func stateDir(dir string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", "cgc-testenv-")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return abs, os.MkdirAll(abs, 0o755)
}

func (e *Env) adminClients() error {
	var err error
	cfg := e.Kube.Config(AdminUser)
	if e.KubeClient, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if e.GatewayClient, err = gatewayclient.NewForConfig(cfg); err != nil {
		return err
	}
	if e.ConfigClient, err = configclient.NewForConfig(cfg); err != nil {
		return err
	}
	e.ConsulClient, err = e.Consul.Client()
	return err
}

// LogPaths lists the server log files.
func (e *Env) LogPaths() []string {
	paths, _ := filepath.Glob(filepath.Join(e.logDir, "*.log"))
	return paths
}

// LogDir is where the servers write their logs; Main keeps them when a test fails.
func (e *Env) LogDir() string { return e.logDir }

// Dir is the directory that holds the servers' state and logs.
func (e *Env) Dir() string { return e.dir }

// Stop stops every server and removes the state dir unless it was given by the caller.
func (e *Env) Stop() error {
	var errs []string
	if e.Workloads != nil {
		for _, err := range e.Workloads.stop() {
			errs = append(errs, err.Error())
		}
	}
	if e.Consul != nil {
		if err := e.Consul.Stop(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if e.Kube != nil {
		if err := e.Kube.stop(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if !e.keepDir {
		if err := os.RemoveAll(e.dir); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stop testenv: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Main is a TestMain body: it starts one Env for the package, runs the tests, and stops
// the Env. When a test fails, the server logs are copied next to the package (under
// _output/testlogs) and their paths printed, since the temp dir is removed either way.
func Main(m *testing.M, opts Options, env **Env) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	started, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*env = started
	code := m.Run()
	if controllerBuild.dir != "" {
		_ = os.RemoveAll(controllerBuild.dir)
	}
	if code != 0 {
		started.keepLogs()
	}
	if err := started.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// keepLogs copies the server logs to _output/testlogs/<time>/ in the repository and
// prints where they are.
func (e *Env) keepLogs() {
	root, err := RepoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: keep logs: %v\n", err)
		return
	}
	dest := filepath.Join(root, "_output", "testlogs", time.Now().Format("20060102-150405.000"))
	if err := os.MkdirAll(dest, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: keep logs: %v\n", err)
		return
	}
	fmt.Fprintln(os.Stderr, "testenv: a test failed; server logs:")
	for _, src := range e.LogPaths() {
		data, err := os.ReadFile(src)
		if err != nil {
			continue
		}
		path := filepath.Join(dest, filepath.Base(src))
		if err := os.WriteFile(path, data, 0o644); err == nil {
			fmt.Fprintf(os.Stderr, "  %s\n", path)
		}
	}
}
