package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReaderCommandsRefusePlaintextConsul: status and explain make the controller's
// plaintext check and refuse a Consul off loopback without TLS before they read
// anything. 10.0.0.1 is never dialed: the check comes first, and the kubeconfig's API
// server is a loopback port nothing listens on, so a command that did not check
// fails there, before it would ask Consul.
func TestReaderCommandsRefusePlaintextConsul(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "")
	t.Setenv("CONSUL_HTTP_SSL", "")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--kubeconfig=" + kubeconfig, "--cluster-id=local", "--consul-http-addr=http://10.0.0.1:8500"}
	commands := map[string]func(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int{
		"status": func(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int {
			return Status(ctx, args, stdout, stderr)
		},
		"explain": func(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int {
			return Explain(ctx, append([]string{"route", "demo/echo"}, args...), stdout, stderr)
		},
	}
	for name, run := range commands {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), flags, &stdout, &stderr)
			want := name + ": consul at 10.0.0.1 is plaintext"
			if code != 1 || !strings.Contains(stderr.String(), want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), want)
			}
		})
	}
}
