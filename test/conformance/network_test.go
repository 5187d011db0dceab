package conformance

import (
	"context"
	"fmt"
	"net"
	"net/http"
	gosync "sync"
	"time"
)

// The suite's default transport must never carry a request: every request is answered
// by the xDS router. Should anything in this process still dial with it (a helper that
// builds its own client from http.DefaultTransport, say), a dial to anything but
// loopback is refused and recorded, and TestMain fails the run. make test-conformance
// also runs the binary in a network namespace with only loopback, so that not even a
// helper with a dialer of its own can send a packet out.
var offLoopback struct {
	mu    gosync.Mutex
	dials []string
}

func guardNetwork() {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		if err := loopbackOnly(address); err != nil {
			offLoopback.mu.Lock()
			offLoopback.dials = append(offLoopback.dials, network+" "+address)
			offLoopback.mu.Unlock()
			return nil, err
		}
		return dialer.DialContext(ctx, network, address)
	}
	http.DefaultTransport = transport
}

// loopbackOnly refuses an address whose host is not a loopback IP or localhost.
func loopbackOnly(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refused to dial %s: tests send packets to loopback only", address)
}

// offLoopbackDials are the refused dials so far.
func offLoopbackDials() []string {
	offLoopback.mu.Lock()
	defer offLoopback.mu.Unlock()
	return append([]string(nil), offLoopback.dials...)
}
