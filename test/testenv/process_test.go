package testenv

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPollStopsAtAWatchedServersCrash kills a ready, watched server behind the
// harness's back and expects Poll to give up at once with the server's name, where it
// would otherwise wait out its whole timeout; stopping the server clears the crash.
func TestPollStopsAtAWatchedServersCrash(t *testing.T) {
	p := startReadySleeper(t)
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited

	start := time.Now()
	err := Poll(context.Background(), PollInterval, time.Minute, func(context.Context) error { return fmt.Errorf("never") })
	if err == nil || !strings.Contains(err.Error(), "sleeper exited while in use") {
		t.Fatalf("Poll after the crash = %v, want the crash", err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("Poll waited %s after the crash", waited)
	}

	if err := p.stop(0); err != nil {
		t.Fatal(err)
	}
	if err := Poll(context.Background(), PollInterval, time.Second, func(context.Context) error { return nil }); err != nil {
		t.Errorf("Poll after the crashed server was stopped = %v, want nil", err)
	}
}

// TestStopIsNotACrash stops a watched server as chaos tests do and expects Poll to go
// on as before.
func TestStopIsNotACrash(t *testing.T) {
	p := startReadySleeper(t)
	if err := p.kill(); err != nil {
		t.Fatal(err)
	}
	if msg := crashed(); msg != "" {
		t.Errorf("a killed server was reported as crashed: %s", msg)
	}
}

// TestFreePortsAreBelowTheEphemeralRange expects distinct ports, each free for TCP and
// UDP, that an outgoing connection cannot be given.
func TestFreePortsAreBelowTheEphemeralRange(t *testing.T) {
	ports, err := freePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	low := ephemeralLow()
	seen := map[int]bool{}
	for _, port := range ports {
		if seen[port] {
			t.Errorf("port %d handed out twice", port)
		}
		seen[port] = true
		if low > minPort+1000 && (port < minPort || port >= low) {
			t.Errorf("port %d is outside [%d, %d)", port, minPort, low)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("port %d is not free for TCP: %v", port, err)
			continue
		}
		l.Close()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Errorf("port %d is not free for UDP: %v", port, err)
			continue
		}
		u.Close()
	}
}

// startReadySleeper starts a watched process that sleeps a minute, seen ready at once;
// the test's end stops it.
func startReadySleeper(t *testing.T) *process {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	p := &process{watched: true, name: "sleeper", path: sleep, args: []string{"60"}, logPath: filepath.Join(t.TempDir(), "sleeper.log")}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.stop(0) })
	if err := p.waitFor(5*time.Second, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	return p
}
