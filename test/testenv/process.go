package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is one server binary run by the harness. It can be stopped and started again
// with the same arguments, so tests can take a server away mid-run and bring it back.
type process struct {
	name    string
	path    string
	args    []string
	env     []string
	logPath string
	// watched servers are ones every test leans on (Consul, etcd, kube-apiserver): once
	// ready, an exit that stop did not ask for is a crash, and Poll reports it at once
	// rather than waiting out its timeout on a server that is gone.
	watched bool

	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{}

	mu       sync.Mutex
	ready    bool // waitFor saw the server ready since the last start
	stopping bool // stop asked the server to exit
}

// crashes holds, for each watched server that exited unasked and has not been
// stopped since, what Poll reports.
var crashes = struct {
	sync.Mutex
	by map[*process]string
}{by: map[*process]string{}}

// crashed is the first crash of a watched server that is still current, or "".
func crashed() string {
	crashes.Lock()
	defer crashes.Unlock()
	for _, msg := range crashes.by {
		return msg
	}
	return ""
}

// exitedUnasked records a watched, ready server's exit that stop did not ask for.
func (p *process) exitedUnasked() {
	p.mu.Lock()
	crash := p.watched && p.ready && !p.stopping
	p.mu.Unlock()
	if !crash {
		return
	}
	msg := fmt.Sprintf("%s exited while in use (log: %s)%s", p.name, p.logPath, logTail(p.logPath))
	crashes.Lock()
	crashes.by[p] = msg
	crashes.Unlock()
	fmt.Fprintf(os.Stderr, "testenv: %s\n", msg)
}

func (p *process) start() error {
	if p.cmd != nil {
		return fmt.Errorf("%s is already running", p.name)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log for %s: %w", p.name, err)
	}
	fmt.Fprintf(logFile, "==== %s starting at %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Pdeathsig kills the server if the test binary dies without cleaning up (a panic or
	// a test timeout), so no server outlives the run that started it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.mu.Lock()
	p.ready, p.stopping = false, false
	p.mu.Unlock()
	p.cmd, p.log, p.exited = cmd, logFile, make(chan struct{})
	go func(exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
		p.exitedUnasked()
	}(p.exited)
	return nil
}

// stop sends SIGTERM to the process group and escalates to SIGKILL after grace.
func (p *process) stop(grace time.Duration) error {
	if p.cmd == nil {
		return nil
	}
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	crashes.Lock()
	delete(crashes.by, p)
	crashes.Unlock()
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.exited
	}
	fmt.Fprintf(p.log, "==== %s stopped at %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	err := p.log.Close()
	p.cmd, p.log = nil, nil
	return err
}

// kill stops the process with SIGKILL at once, as a crash would.
func (p *process) kill() error {
	return p.stop(0)
}

// running reports whether the process was started and has not exited.
func (p *process) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// errExited is returned by waits that notice the process died before it became ready.
var errExited = errors.New("process exited")

// waitFor polls ready until it returns nil, the process exits, or timeout passes.
func (p *process) waitFor(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if !p.running() {
			return fmt.Errorf("%s: %w before it was ready (log: %s)%s", p.name, errExited, p.logPath, logTail(p.logPath))
		}
		if last = ready(); last == nil {
			p.mu.Lock()
			p.ready = true
			p.mu.Unlock()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %w (log: %s)", p.name, timeout, last, p.logPath)
}

// logTail is the end of a log, for errors that are read after the log is gone.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	const max = 2000
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return "; its log ends:\n" + string(data)
}
