package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	cmd := exec.Command("go", "build", "-o", path, ".")
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
	// Binary is the controller binary, for example from BuildController.
	Binary string
	// Name labels the process: its log is <LogDir>/controller-<Name>.log, and it is the
	// leader-election identity unless Args name another.
	Name string
	// Kubeconfig authenticates the process; empty means AdminUser's.
	Kubeconfig string
	// ConsulAddr is the Consul HTTP address; empty means the Env's agent.
	ConsulAddr string
	// ConsulToken is written to the file passed with --consul-token-file; empty means the
	// Env's management token (itself empty when Consul runs without ACLs).
	ConsulToken string
	// Args come after the harness's flags; a flag given twice takes its last value, so
	// Args can override any of them.
	Args []string
	// LogDir is where the log goes; empty means the Env's log directory.
	LogDir string
}

// Controller is the controller binary running as its own process, the way a pod runs
// it: metrics and health on free loopback ports, its output in a log file.
type Controller struct {
	name        string
	logPath     string
	metricsAddr string
	healthAddr  string
	dir         string

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

func (e *Env) startController(dir string, opts ControllerOptions) (*Controller, error) {
	if opts.Kubeconfig == "" {
		opts.Kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := e.Kube.WriteKubeconfig(opts.Kubeconfig, AdminUser); err != nil {
			return nil, err
		}
	}
	if opts.ConsulAddr == "" {
		opts.ConsulAddr = e.Consul.HTTPAddr()
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
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	if opts.LogDir == "" {
		opts.LogDir = e.LogDir()
	}
	c := &Controller{
		name:        opts.Name,
		logPath:     filepath.Join(opts.LogDir, "controller-"+opts.Name+".log"),
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		healthAddr:  fmt.Sprintf("127.0.0.1:%d", ports[1]),
		dir:         dir,
		exited:      make(chan struct{}),
	}
	args := append([]string{
		"--kubeconfig=" + opts.Kubeconfig,
		"--consul-http-addr=" + opts.ConsulAddr,
		"--consul-token-file=" + tokenFile,
		"--metrics-bind-address=" + c.metricsAddr,
		"--health-probe-bind-address=" + c.healthAddr,
		"--leader-elect-identity=" + opts.Name,
	}, opts.Args...)
	return c, c.start(opts.Binary, args)
}

func (c *Controller) start(binary string, args []string) error {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	c.cmd = exec.Command(binary, args...)
	// Nothing from the caller's environment (CONSUL_HTTP_*, KUBECONFIG) reaches it.
	c.cmd.Env = []string{"HOME=" + c.dir, "PATH=" + os.Getenv("PATH")}
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
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

// Terminate sends SIGTERM, as the kubelet does, and waits up to grace for the exit,
// then sends SIGKILL. It returns the exit code (-1 when the process was killed by a
// signal).
func (c *Controller) Terminate(grace time.Duration) (int, error) {
	if c.Running() {
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && c.Running() {
			return 0, fmt.Errorf("SIGTERM %s: %w", c.name, err)
		}
	}
	select {
	case <-c.exited:
	case <-time.After(grace):
		_ = c.Kill()
		return c.exitCode(), fmt.Errorf("%s still running %v after SIGTERM; killed", c.name, grace)
	}
	return c.exitCode(), nil
}

// Kill sends SIGKILL, as a node failure or an OOM kill would, and waits for the exit.
func (c *Controller) Kill() error {
	if c.Running() {
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && c.Running() {
			return fmt.Errorf("SIGKILL %s: %w", c.name, err)
		}
	}
	<-c.exited
	return nil
}

func (c *Controller) exitCode() int {
	var exit *exec.ExitError
	if errors.As(c.exitErr, &exit) {
		return exit.ExitCode()
	}
	return 0
}

// Metrics returns the /metrics text.
func (c *Controller) Metrics(ctx context.Context) (string, error) {
	code, body, err := httpGet(ctx, "http://"+c.metricsAddr+"/metrics")
	if err != nil {
		return "", fmt.Errorf("%s /metrics: %w", c.name, err)
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("%s /metrics answered %d", c.name, code)
	}
	return body, nil
}

// Ready reports whether /readyz answers 200.
func (c *Controller) Ready(ctx context.Context) bool {
	code, _, err := httpGet(ctx, "http://"+c.healthAddr+"/readyz")
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

// Memory is what the kernel reports about a process's resident set, in bytes.
type Memory struct {
	// PeakRSS is VmHWM, the most the resident set has been since the process started.
	PeakRSS int64
	// RSS is VmRSS, the resident set now.
	RSS int64
}

// Memory reads /proc/<pid>/status; it fails once the process has exited.
func (c *Controller) Memory() (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.Pid()))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	return parseProcStatus(f)
}

func parseProcStatus(r io.Reader) (Memory, error) {
	var m Memory
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		key, value, ok := strings.Cut(scanner.Text(), ":")
		if !ok || (key != "VmHWM" && key != "VmRSS") {
			continue
		}
		// The kernel writes these as "<n> kB".
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("parse %s %q: %w", key, value, err)
		}
		if key == "VmHWM" {
			m.PeakRSS = kb * 1024
		} else {
			m.RSS = kb * 1024
		}
	}
	if err := scanner.Err(); err != nil {
		return m, err
	}
	if m.PeakRSS == 0 {
		return m, errors.New("no VmHWM in /proc status")
	}
	return m, nil
}

// CPUSeconds is the user plus system CPU time the process has used, from
// /proc/<pid>/stat; it fails once the process has exited.
func (c *Controller) CPUSeconds() (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Pid()))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(string(data))
}

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHZ = 100

func parseProcStatCPU(stat string) (float64, error) {
	// The command name (field 2) is in parentheses and may hold spaces; the fields
	// after the last ')' start at field 3 (state). utime and stime are fields 14, 15.
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	var ticks float64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc stat: %w", err)
		}
		ticks += float64(n)
	}
	return ticks / userHZ, nil
}

func httpGet(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
