package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

func controllerBinary(t *testing.T) string { return testenv.ControllerBinary(t) }

// controllerProcess is the controller binary running as its own process, the way a pod
// runs it, with its log kept for assertions.
type controllerProcess struct {
	t           *testing.T
	name        string
	cmd         *exec.Cmd
	log         *syncBuffer
	logPath     string
	metricsAddr string
	healthAddr  string
	exited      chan struct{}
	exitErr     error
}

// processOptions are how a test runs the binary.
type processOptions struct {
	// kubeconfig authenticates the process; empty means the admin's.
	kubeconfig string
	// consulToken, when set, is written to a file passed with --consul-token-file;
	// empty means the harness's management token.
	consulToken string
	// consulAddr is the Consul HTTP address; empty means the harness's agent.
	consulAddr string
	args       []string
}

// startControllerProcess runs the binary with opts and the harness's Consul, metrics
// and health on free loopback ports, and stops it (SIGKILL if still running) when the
// test ends. Its log goes to the test log directory as well.
func startControllerProcess(t *testing.T, name string, opts processOptions) *controllerProcess {
	t.Helper()
	bin := controllerBinary(t)
	dir := t.TempDir()
	if opts.kubeconfig == "" {
		opts.kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := env.Kube.WriteKubeconfig(opts.kubeconfig, testenv.AdminUser); err != nil {
			t.Fatal(err)
		}
	}
	if opts.consulAddr == "" {
		opts.consulAddr = env.Consul.HTTPAddr()
	}
	token := opts.consulToken
	if token == "" {
		token = env.Consul.ManagementToken()
	}
	tokenFile := filepath.Join(dir, "consul-token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &controllerProcess{t: t, name: name, log: &syncBuffer{}, exited: make(chan struct{}),
		metricsAddr: freeAddr(t), healthAddr: freeAddr(t)}
	args := append([]string{
		"--kubeconfig=" + opts.kubeconfig,
		"--consul-http-addr=" + opts.consulAddr,
		"--consul-token-file=" + tokenFile,
		"--metrics-bind-address=" + p.metricsAddr,
		"--health-probe-bind-address=" + p.healthAddr,
		"--leader-elect-identity=" + name,
	}, opts.args...)
	p.logPath = filepath.Join(env.LogDir(), fmt.Sprintf("%s-%s.log", strings.ReplaceAll(t.Name(), "/", "_"), name))
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	// No CONSUL_HTTP_* from the environment of whoever runs the tests.
	p.cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	p.cmd.Stdout = io.MultiWriter(p.log, logFile)
	p.cmd.Stderr = p.cmd.Stdout
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("log of %s: %s", name, p.logPath)
		}
	})
	return p
}

// kill sends SIGKILL, as a node failure or OOM kill would, and waits for the exit.
func (p *controllerProcess) kill() {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.exited
}

// pause stops the process (SIGSTOP) until resume, as a scheduler stall would.
func (p *controllerProcess) pause() {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// resume continues a paused process (SIGCONT); on a running one it does nothing.
func (p *controllerProcess) resume() {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// dumpGoroutines makes a hung process print its goroutines to its log and exit (the
// Go runtime's SIGQUIT), so a test failure shows where it hung.
func (p *controllerProcess) dumpGoroutines() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
}

// terminate sends SIGTERM, as the kubelet does, and returns the exit code.
func (p *controllerProcess) terminate(timeout time.Duration) (int, error) {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	return p.wait(timeout)
}

// wait waits for the process to exit and returns its exit code.
func (p *controllerProcess) wait(timeout time.Duration) (int, error) {
	select {
	case <-p.exited:
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s still running after %v", p.name, timeout)
	}
	var exit *exec.ExitError
	if errors.As(p.exitErr, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, p.exitErr
}

func (p *controllerProcess) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// output is everything the process logged so far.
func (p *controllerProcess) output() string { return p.log.String() }

// get GETs path on the metrics or health address and returns the code and body.
func (p *controllerProcess) get(addr, path string) (int, string, error) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// readyz is the code /readyz answers; 0 while nothing listens.
func (p *controllerProcess) readyz() int {
	code, _, err := p.get(p.healthAddr, "/readyz")
	if err != nil {
		return 0
	}
	return code
}

// metrics is the /metrics text.
func (p *controllerProcess) metrics() (string, error) {
	code, body, err := p.get(p.metricsAddr, "/metrics")
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("/metrics answered %d", code)
	}
	return body, nil
}

// waitReady waits until /readyz answers 200, failing the test if the process exits.
func (p *controllerProcess) waitReady(timeout time.Duration) {
	p.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if !p.running() {
			return false, fmt.Errorf("%s exited: %w", p.name, p.exitErr)
		}
		return p.readyz() == http.StatusOK, nil
	})
	if err != nil {
		p.t.Fatalf("%s never became ready: %v", p.name, err)
	}
}

// freeAddr is a free loopback address. Another process could take it before the
// controller binds it; the window is small and a clash fails loudly.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
