package testenv

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RepoRoot returns the repository root: the nearest parent of the working directory that
// holds tools/versions.mk. Tests run in their package directory, so this finds the
// checkout they belong to.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "versions.mk")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no repository root (tools/versions.mk) above the working directory")
		}
		dir = parent
	}
}

// binary returns the path of a server binary built by `make tools`. A missing binary is
// an error that names the target to run: CI must run these tests, so it is never a skip.
func binary(name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, "bin", name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is missing: run `make tools` at the repository root to build it", path)
	}
	return path, nil
}

// freePorts finds n loopback ports that are free for TCP and UDP (Consul's serf
// listens on both) and lie below the kernel's ephemeral range. Ports the kernel hands
// out are also what it gives the next outgoing connection, which can take one between
// the choice and the server's bind: a Consul agent failed to start that way. Below the
// range only another listener can take a port, and a clash fails the start loudly.
func freePorts(n int) ([]int, error) {
	low := ephemeralLow()
	if low <= minPort+1000 {
		return kernelPorts(n)
	}
	// Every socket is held until all are chosen so no port is handed out twice.
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 10000 {
			return nil, fmt.Errorf("find %d free ports below %d: only %d found", n, low, len(ports))
		}
		port := minPort + rand.IntN(low-minPort)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			l.Close()
			continue
		}
		held = append(held, l, u)
		ports = append(ports, port)
	}
	return ports, nil
}

// minPort keeps clear of the well-known and registered ports that system services
// commonly listen on.
const minPort = 10000

// ephemeralLow is the first port of the kernel's ephemeral range, 32768 where it
// cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return low
}

// kernelPorts asks the kernel for n free ports, for machines whose ephemeral range
// leaves no room below it.
func kernelPorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Kubectl returns the path of the kubectl that `make tools` built, of the same
// Kubernetes version as the API server.
func Kubectl() (string, error) { return binary("kubectl") }

// Helm returns the path of the helm that `make tools` built (tools/helm).
func Helm() (string, error) { return binary("helm") }
