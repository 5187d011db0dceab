package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	gosync "sync"
	"syscall"
	"testing"
	"time"
)

// BuildController builds the controller binary from this checkout into dir, exactly as
// `make build` builds it, and returns its path.
func BuildController(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "consul-gateway-controller")
	checkout, err := ReadCheckout(root)
	if err != nil {
		return "", err
	}
	revision := checkout.Commit
	if checkout.Changed != "" {
		revision += "-dirty"
	}
	cmd := exec.Command("go", "build", "-ldflags=-X github.com/consul-gateway-controller/consul-gateway-controller/internal/buildinfo.revision="+revision, "-o", path, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build the controller: %w\n%s", err, out)
	}
	return path, nil
}

// controllerBuild is the binary ControllerBinary built for this test binary; Main
// removes it.
var controllerBuild struct {
	once gosync.Once
	dir  string
	path string
	err  error
}

// ControllerBinary builds the controller from this checkout once per test binary and
// returns its path; a build that failed fails t.
func ControllerBinary(t testing.TB) string {
	t.Helper()
	controllerBuild.once.Do(func() {
		controllerBuild.dir, controllerBuild.err = os.MkdirTemp("", "controller-bin-")
		if controllerBuild.err == nil {
			controllerBuild.path, controllerBuild.err = BuildController(controllerBuild.dir)
		}
	})
	if controllerBuild.err != nil {
		t.Fatal(controllerBuild.err)
	}
	return controllerBuild.path
}

// ControllerOptions say how StartController runs the binary.
type ControllerOptions struct {
	// Binary is the controller binary, for example from BuildController or
	// ControllerBinary (RunController's default).
	Binary string
	// Name labels the process and is its leader-election identity unless Args name
	// another.
	Name string
	// Kubeconfig authenticates the process; empty means AdminUser's.
	Kubeconfig string
	// ConsulAddr is the Consul HTTP address; empty means the Env's agent, whose CA
	// the process then trusts when the agent speaks TLS.
	ConsulAddr string
	// ConsulToken is written to the file passed with --consul-token-file; empty means the
	// Env's management token (itself empty when Consul runs without ACLs).
	ConsulToken string
	// Args come after the harness's flags (HarnessFlags); a flag given twice takes its
	// last value, so Args can override any of them.
	Args []string
	// LogDir is where the log goes; empty means the Env's log directory.
	LogDir string
	// LogName is the log's file name in LogDir; empty means controller-<Name>.log. A
	// log that exists already is appended to; Output reads only this process's part.
	LogName string
	// Output, when set, also receives everything the process writes (make run-local
	// shows it on the terminal).
	Output io.Writer
	// Env is the process's environment (KEY=value) besides HOME and PATH, for example
	// consul/api's CONSUL_CACERT and CONSUL_TLS_SERVER_NAME. Nothing else of the
	// caller's environment reaches it.
	Env []string
	// MetricsToken, when set, runs the process with --metrics-auth=kubernetes (as
	// deploy/ does) and is the bearer token Metrics presents; the API server must
	// authenticate it for a user allowed to get /metrics. Empty runs the process with
	// --metrics-auth=none, so scrapes need no grant and keep working while the API
	// server is down.
	MetricsToken string
}

// HarnessFlags are the flags StartController sets on every process, in this order,
// before ControllerOptions.Args: the servers, the token file, free loopback ports for
// metrics, probes and profiles (used with --profiling), the metrics authentication
// (ControllerOptions.MetricsToken), the leader identity, and no start-up check of the
// admission policy.
var HarnessFlags = []string{
	"--kubeconfig", "--consul-http-addr", "--consul-token-file",
	"--metrics-bind-address", "--health-probe-bind-address", "--profiling-bind-address",
	"--metrics-auth", "--leader-elect-identity", "--require-admission-policy",
}

// Controller is the controller binary running as its own process, the way a pod runs
// it: metrics and health on free loopback ports, its output in a log file.
type Controller struct {
	name          string
	logPath       string
	logStart      int64 // the log's size when the process started
	metricsAddr   string
	healthAddr    string
	profilingAddr string
	metricsToken  string
	dir           string

	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
}

// StartController runs opts.Binary against the Env's API server and Consul. The caller
// stops it with Terminate or Kill; it is also killed if the calling process dies.
func (e *Env) StartController(opts ControllerOptions) (*Controller, error) {
	if opts.Binary == "" || opts.Name == "" {
		return nil, errors.New("start controller: Binary and Name are required")
	}
	dir, err := os.MkdirTemp("", "controller-"+opts.Name+"-")
	if err != nil {
		return nil, err
	}
	c, err := e.startController(dir, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start controller %s: %w", opts.Name, err)
	}
	return c, nil
}

// RunController is StartController for a test: Binary defaults to ControllerBinary,
// the log is named after the test and the process, a failure to start fails t, and
// the process is killed when t ends (a test that wants a graceful stop calls
// Terminate first). The log's path is logged when t failed.
func (e *Env) RunController(t testing.TB, opts ControllerOptions) *Controller {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = ControllerBinary(t)
	}
	if opts.LogName == "" {
		opts.LogName = "controller-" + strings.ReplaceAll(t.Name(), "/", "_") + "-" + opts.Name + ".log"
	}
	c, err := e.StartController(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kill()
		if t.Failed() {
			t.Logf("log of %s: %s", c.Name(), c.LogPath())
		}
	})
	return c
}

func (e *Env) startController(dir string, opts ControllerOptions) (*Controller, error) {
	if opts.Kubeconfig == "" {
		opts.Kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := e.Kube.WriteKubeconfig(opts.Kubeconfig, AdminUser); err != nil {
			return nil, err
		}
	}
	if opts.ConsulAddr == "" {
		opts.ConsulAddr = e.Consul.URL()
		if ca := e.Consul.CACertPEM(); ca != nil {
			caFile := filepath.Join(dir, "consul-ca.pem")
			if err := os.WriteFile(caFile, ca, 0o600); err != nil {
				return nil, err
			}
			opts.Env = append([]string{"CONSUL_CACERT=" + caFile}, opts.Env...)
		}
	}
	token := opts.ConsulToken
	if token == "" {
		token = e.Consul.ManagementToken()
	}
	// A file rather than CONSUL_HTTP_TOKEN keeps the token out of the process list.
	tokenFile := filepath.Join(dir, "consul-token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	if opts.LogDir == "" {
		opts.LogDir = e.LogDir()
	}
	if opts.LogName == "" {
		opts.LogName = "controller-" + opts.Name + ".log"
	}
	c := &Controller{
		name:          opts.Name,
		logPath:       filepath.Join(opts.LogDir, opts.LogName),
		metricsAddr:   fmt.Sprintf("127.0.0.1:%d", ports[0]),
		healthAddr:    fmt.Sprintf("127.0.0.1:%d", ports[1]),
		profilingAddr: fmt.Sprintf("127.0.0.1:%d", ports[2]),
		metricsToken:  opts.MetricsToken,
		dir:           dir,
		exited:        make(chan struct{}),
	}
	metricsAuth := "none"
	if opts.MetricsToken != "" {
		metricsAuth = "kubernetes"
	}
	harness := map[string]string{
		"--kubeconfig":                opts.Kubeconfig,
		"--consul-http-addr":          opts.ConsulAddr,
		"--consul-token-file":         tokenFile,
		"--metrics-bind-address":      c.metricsAddr,
		"--health-probe-bind-address": c.healthAddr,
		"--profiling-bind-address":    c.profilingAddr,
		"--metrics-auth":              metricsAuth,
		"--leader-elect-identity":     opts.Name,
		// The harness runs the controller as the admin, whom the admission policy of
		// deploy/ does not judge: the tests of that policy ask for the check.
		"--require-admission-policy": "false",
	}
	args := make([]string, 0, len(HarnessFlags)+len(opts.Args))
	for _, flag := range HarnessFlags {
		args = append(args, flag+"="+harness[flag])
	}
	return c, c.start(opts.Binary, append(args, opts.Args...), opts.Env, opts.Output)
}

func (c *Controller) start(binary string, args, env []string, output io.Writer) error {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	info, err := logFile.Stat()
	if err != nil {
		logFile.Close()
		return err
	}
	c.logStart = info.Size()
	c.cmd = exec.Command(binary, args...)
	// Nothing from the caller's environment (CONSUL_HTTP_*, KUBECONFIG) reaches it,
	// only what the options say.
	c.cmd.Env = append([]string{"HOME=" + c.dir, "PATH=" + os.Getenv("PATH")}, env...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	if output != nil {
		c.cmd.Stdout = io.MultiWriter(logFile, output)
		c.cmd.Stderr = c.cmd.Stdout
	}
	// Pdeathsig: no controller outlives a caller that died without stopping it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	go func() {
		c.exitErr = c.cmd.Wait()
		logFile.Close()
		_ = os.RemoveAll(c.dir)
		close(c.exited)
	}()
	return nil
}

// Name is the name the controller was started with.
func (c *Controller) Name() string { return c.name }

// Pid is the process id, for reading /proc while the process runs.
func (c *Controller) Pid() int { return c.cmd.Process.Pid }

// LogPath is the file that holds the process's output.
func (c *Controller) LogPath() string { return c.logPath }

// MetricsAddr is host:port of /metrics.
func (c *Controller) MetricsAddr() string { return c.metricsAddr }

// HealthAddr is host:port of /healthz and /readyz.
func (c *Controller) HealthAddr() string { return c.healthAddr }

// ProfilingAddr is host:port of /debug/pprof/, served when Args hold --profiling.
func (c *Controller) ProfilingAddr() string { return c.profilingAddr }

// Exited is closed once the process has exited.
func (c *Controller) Exited() <-chan struct{} { return c.exited }

// Running reports whether the process has not exited yet.
func (c *Controller) Running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// ExitError is what the process exited with: nil while it runs or after exit code 0,
// an *exec.ExitError otherwise.
func (c *Controller) ExitError() error {
	if c.Running() {
		return nil
	}
	return c.exitErr
}

// Output is everything the process has written to its log so far.
func (c *Controller) Output() string {
	f, err := os.Open(c.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, c.logStart, math.MaxInt64-c.logStart))
	if err != nil {
		return ""
	}
	return string(data)
}

// Wait waits up to timeout for the process to exit and returns its exit code (-1 when
// a signal ended it); the error says it still runs.
func (c *Controller) Wait(timeout time.Duration) (int, error) {
	select {
	case <-c.exited:
		return c.exitCode(), nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s still running after %v", c.name, timeout)
	}
}

// Terminate sends SIGTERM, as the kubelet does, and waits up to grace for the exit,
// then sends SIGKILL. It returns the exit code (-1 when the process was killed by a
// signal).
func (c *Controller) Terminate(grace time.Duration) (int, error) {
	if err := c.signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	if code, err := c.Wait(grace); err == nil {
		return code, nil
	}
	_ = c.Kill()
	return c.exitCode(), fmt.Errorf("%s still running %v after SIGTERM; killed", c.name, grace)
}

// Kill sends SIGKILL, as a node failure or an OOM kill would, and waits for the exit.
func (c *Controller) Kill() error {
	if err := c.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-c.exited
	return nil
}

// Pause stops the process (SIGSTOP) until Resume, as a scheduler stall would.
func (c *Controller) Pause() error { return c.signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT); a running one carries on as it was.
func (c *Controller) Resume() error { return c.signal(syscall.SIGCONT) }

// DumpGoroutines makes a hung process print its goroutines to its log and exit (the
// Go runtime's answer to SIGQUIT), and waits up to 5 s for that, so that a failure
// shows where it hung.
func (c *Controller) DumpGoroutines() {
	if err := c.signal(syscall.SIGQUIT); err != nil {
		return
	}
	_, _ = c.Wait(5 * time.Second)
}

// signal sends sig unless the process has exited.
func (c *Controller) signal(sig syscall.Signal) error {
	if !c.Running() {
		return nil
	}
	if err := c.cmd.Process.Signal(sig); err != nil && c.Running() {
		return fmt.Errorf("%v to %s: %w", sig, c.name, err)
	}
	return nil
}

func (c *Controller) exitCode() int {
	var exit *exec.ExitError
	if errors.As(c.exitErr, &exit) {
		return exit.ExitCode()
	}
	return 0
}

// Metrics returns the /metrics text, asked for with ControllerOptions.MetricsToken.
func (c *Controller) Metrics(ctx context.Context) (string, error) {
	code, body, err := HTTPGet(ctx, "http://"+c.metricsAddr+"/metrics", c.metricsToken)
	if err != nil {
		return "", fmt.Errorf("%s /metrics: %w", c.name, err)
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("%s /metrics answered %d", c.name, code)
	}
	return body, nil
}

// Readyz is /readyz's answer: its status code and body.
func (c *Controller) Readyz(ctx context.Context) (int, string, error) {
	return HTTPGet(ctx, "http://"+c.healthAddr+"/readyz", "")
}

// Ready reports whether /readyz answers 200.
func (c *Controller) Ready(ctx context.Context) bool {
	code, _, err := c.Readyz(ctx)
	return err == nil && code == http.StatusOK
}

// WaitReady waits until /readyz answers 200, the process exits, or timeout passes.
func (c *Controller) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if !c.Running() {
			err := c.exitErr
			if err == nil {
				err = errExited
			}
			return fmt.Errorf("%s exited before it was ready (log: %s): %w", c.name, c.logPath, err)
		}
		if c.Ready(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (log: %s)", c.name, ctx.Err(), c.logPath)
		case <-tick.C:
		}
	}
}

// HTTPGet GETs url, with token as its bearer token unless empty, and returns the
// status code and the body.
func HTTPGet(ctx context.Context, url, token string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
