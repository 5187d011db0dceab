package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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

// freePorts asks the kernel for n free loopback ports. Another process could take one
// before the server binds it; the window is small and a clash fails loudly.
func freePorts(n int) ([]int, error) {
	// Every listener is held until all are chosen so no port is handed out twice.
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
