package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	gosync "sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/echo-basic/tcpserver"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// The suite's TCPRoute tests dial the Gateway's address themselves (its tcp helper
// takes no RoundTripper). Inside the network namespace that has only loopback, the
// addresses of the Gateways can be made local: tcpFront puts each on lo and listens on
// its TCP listeners' ports. A connection is then routed as the gateway's Envoy would
// route it, through the listener and tcp_proxy Consul serves the gateway's pod
// (envoy.ServeTCP), to the endpoint picked; the pod behind the endpoint is played by
// an echo server on loopback answering as the suite's TCP echo server does, and the
// bytes really travel there and back. Outside such a namespace nothing is added to any
// interface, and the tests stay skipped.

// loopbackOnlyNamespace reports whether this process's network has no interface but
// lo, so that addresses put on lo can be nobody else's.
func loopbackOnlyNamespace() error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list network interfaces: %w", err)
	}
	for _, i := range ifaces {
		if i.Flags&net.FlagLoopback == 0 {
			return fmt.Errorf("the network has interface %s besides loopback: not the loopback-only namespace of make test-conformance", i.Name)
		}
	}
	return nil
}

// tcpFront answers TCP connections to the Gateways' addresses from the xDS.
type tcpFront struct {
	ctx context.Context
	rt  *xdsRoundTripper

	mu        gosync.Mutex
	addresses map[string]bool         // put on lo
	listeners map[string]net.Listener // by address:port
	echoes    map[testenv.PodRef]string
	failures  map[string]bool // distinct failures to answer a connection or set up a listener
}

// startTCPFront starts making the Gateways' TCP listeners answer, until ctx ends.
func startTCPFront(ctx context.Context, rt *xdsRoundTripper) (*tcpFront, error) {
	if err := loopbackOnlyNamespace(); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("no ip command to put addresses on lo: %w", err)
	}
	f := &tcpFront{ctx: ctx, rt: rt, addresses: map[string]bool{}, listeners: map[string]net.Listener{}, echoes: map[testenv.PodRef]string{}, failures: map[string]bool{}}
	go f.follow()
	return f, nil
}

// follow keeps a listener on every TCP listener of every Gateway with an address.
func (f *tcpFront) follow() {
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for {
		f.sync()
		select {
		case <-f.ctx.Done():
			f.closeAll()
			return
		case <-ticker.C:
		}
	}
}

func (f *tcpFront) sync() {
	list, err := env.GatewayClient.GatewayV1().Gateways(metav1.NamespaceAll).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.setErr(fmt.Errorf("list gateways: %w", err))
		return
	}
	for _, gw := range list.Items {
		for _, a := range gw.Status.Addresses {
			if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
				continue
			}
			for _, l := range gw.Spec.Listeners {
				if l.Protocol != gatewayv1.TCPProtocolType {
					continue
				}
				if err := f.listen(a.Value, uint32(l.Port)); err != nil {
					f.setErr(err)
				}
			}
		}
	}
}

// listen puts address on lo, once, and listens on address:port, once.
func (f *tcpFront) listen(address string, port uint32) error {
	hostport := net.JoinHostPort(address, strconv.Itoa(int(port)))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listeners[hostport] != nil {
		return nil
	}
	if !f.addresses[address] {
		if err := putOnLoopback(f.ctx, address); err != nil {
			return err
		}
		f.addresses[address] = true
	}
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		return fmt.Errorf("listen on the gateway's %s: %w", hostport, err)
	}
	f.listeners[hostport] = ln
	go f.accept(ln, address, port)
	return nil
}

// putOnLoopback makes address local, on lo (of the loopback-only namespace).
func putOnLoopback(ctx context.Context, address string) error {
	ip := net.ParseIP(address)
	if ip == nil {
		return fmt.Errorf("gateway address %q is no IP", address)
	}
	prefix := "/32"
	if ip.To4() == nil {
		prefix = "/128"
	}
	if out, err := exec.CommandContext(ctx, "ip", "addr", "add", address+prefix, "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("put %s on lo: %w: %s", address, err, out)
	}
	return nil
}

func (f *tcpFront) accept(ln net.Listener, address string, port uint32) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go f.serve(conn, address, port)
	}
}

// serve routes one connection as the gateway's Envoy would, and carries its bytes to
// the echo server of the pod behind the endpoint. A connection Envoy would refuse or
// reset is closed.
func (f *tcpFront) serve(conn net.Conn, address string, port uint32) {
	defer conn.Close()
	upstream, err := f.upstream(address, port)
	if err != nil {
		f.setErr(fmt.Errorf("connection to %s:%d: %w", address, port, err))
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, upstream); done <- struct{}{} }()
	<-done
}

// upstream is the connection to the echo server of the pod the gateway's Envoy would
// send a connection to address:port to.
func (f *tcpFront) upstream(address string, port uint32) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(f.ctx, 15*time.Second)
	defer cancel()
	cfg, err := f.rt.config(ctx, address)
	if err != nil {
		return nil, err
	}
	f.rt.mu.Lock()
	cluster, endpoint, err := envoy.ServeTCP(cfg, port, "", f.rt.rnd)
	f.rt.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("xDS router: %w", err)
	}
	pod, ok := f.rt.backends.Pod(endpoint)
	if !ok {
		return nil, fmt.Errorf("endpoint %s of cluster %s is no backend pod", endpoint, cluster)
	}
	echo, err := f.echoOf(pod)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", echo)
}

// echoOf is the address of the echo server playing pod, started on first use.
func (f *tcpFront) echoOf(pod testenv.PodRef) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if addr, ok := f.echoes[pod]; ok {
		return addr, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("echo server of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	f.echoes[pod] = ln.Addr().String()
	f.listeners["echo "+ln.Addr().String()] = ln
	go echoServe(ln, pod)
	return ln.Addr().String(), nil
}

// echoServe answers as the suite's TCP echo server (echo-basic/tcpserver) in pod does
// on its plaintext port: a welcome line, then PONG to PING, false to IS_TLS, and the
// pod's context to TEST.
func echoServe(ln net.Listener, pod testenv.PodRef) {
	payload, err := json.Marshal(tcpserver.TCPAssertions{Context: tcpserver.Context{Namespace: pod.Namespace, Pod: pod.Name}})
	if err != nil {
		return
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			fmt.Fprint(conn, tcpserver.WelcomeMessage)
			scanner := bufio.NewScanner(conn)
			for scanner.Scan() {
				switch scanner.Text() {
				case "TEST":
					fmt.Fprintf(conn, "%s\n", payload)
				case "IS_TLS":
					fmt.Fprint(conn, "false\n")
				case "PING":
					fmt.Fprint(conn, "PONG\n")
				}
			}
		}()
	}
}

func (f *tcpFront) setErr(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[err.Error()] = true
}

// Failures are the distinct failures to answer a Gateway's address, for the log.
func (f *tcpFront) Failures() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sets.List(sets.KeySet(f.failures))
}

func (f *tcpFront) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ln := range f.listeners {
		_ = ln.Close()
	}
}
