package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// tlsConsul starts a Consul of the test's own with ACLs on (default deny) and TLS: its
// API only on HTTPS, xDS only on the gRPC TLS port. It returns the agent, a management
// client, and the agent's CA written to a file, as a CONSUL_CACERT is.
func tlsConsul(t *testing.T) (*testenv.ConsulAgent, *consulapi.Client, string) {
	t.Helper()
	agent, admin := testenv.StartConsulFor(t, env.LogDir(), testenv.ConsulOptions{ACL: true, TLS: true})
	return agent, admin, writeFile(t, "consul-ca.pem", agent.CACertPEM())
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConsulTLS runs the controller binary against a Consul that serves its API only
// over HTTPS (with ACLs on, default deny), given the CA the way an operator does:
// consul/api's environment (CONSUL_CACERT, CONSUL_TLS_SERVER_NAME) or --consul-cacert.
// With the right CA a Gateway and its route are written and accepted; with a CA that
// did not issue Consul's certificate, or a server name it is not for, /readyz says
// Consul does not answer (and no more: the detail is not for the network), and the
// Gateway's Programmed condition and the log name the certificate problem within a
// bounded time, and nothing is written.
func TestConsulTLS(t *testing.T) {
	agent, admin, caFile := tlsConsul(t)
	other, err := testcerts.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	otherCAFile := writeFile(t, "other-ca.pem", other.CertPEM)
	testenv.ControllerBinary(t) // built before the clocks below start

	// run starts the binary for a stack of its own, talking to agent over HTTPS only.
	run := func(t *testing.T, s consulStack, environ []string, args ...string) *testenv.Controller {
		t.Helper()
		return env.RunController(t, testenv.ControllerOptions{
			Name: s.Namespace, ConsulAddr: agent.URL(), ConsulToken: agent.ManagementToken(), Env: environ,
			Args: append([]string{
				"--controller-name=" + string(s.Controller), "--cluster-id=" + s.Namespace, "--manage-service-defaults",
				"--deploy-gateways=false", "--leader-elect=false",
			}, args...),
		})
	}

	for _, tc := range []struct {
		name, ns string
		env      []string
		args     []string
	}{
		{name: "consul/api environment", ns: "tls-env", env: []string{"CONSUL_CACERT=" + caFile, "CONSUL_TLS_SERVER_NAME=" + testenv.ConsulServerName}},
		{name: "--consul-cacert", ns: "tls-flag", args: []string{"--consul-cacert=" + caFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newConsulStack(t, tc.ns)
			env.Create(t, s.Route("web"))
			start := time.Now()
			p := run(t, s, tc.env, tc.args...)
			testenv.Eventually(t, 60*time.Second, "the Gateway and its route programmed over HTTPS", func(ctx context.Context) error {
				if got := s.gatewayCondition(t, "edge", "Programmed"); got != "True/Programmed" {
					return fmt.Errorf("Gateway edge Programmed = %q", got)
				}
				if got := s.routeCondition(t, "web", gwsync.ConsulAcceptedCondition); got != "True/Accepted" {
					return fmt.Errorf("route web ConsulAccepted = %q", got)
				}
				return nil
			})
			for _, k := range []struct{ kind, name string }{
				{consulapi.APIGateway, s.naming.EntryName(s.Namespace, "edge")},
				{consulapi.HTTPRoute, s.naming.EntryName(s.Namespace, "web")},
			} {
				if _, _, err := admin.ConfigEntries().Get(k.kind, k.name, nil); err != nil {
					t.Errorf("%s %s in Consul: %v", k.kind, k.name, err)
				}
			}
			if code, body, err := p.Readyz(t.Context()); err != nil || code != http.StatusOK {
				t.Errorf("/readyz = %d %q (%v), want 200", code, body, err)
			}
			t.Logf("programmed %s after the start", time.Since(start).Round(100*time.Millisecond))
		})
	}

	for _, tc := range []struct {
		name, ns string
		env      []string
		want     string
	}{
		{
			name: "a CA that did not issue the certificate", ns: "tls-bad-ca",
			env:  []string{"CONSUL_CACERT=" + otherCAFile, "CONSUL_TLS_SERVER_NAME=" + testenv.ConsulServerName},
			want: "x509: certificate signed by unknown authority",
		},
		{
			name: "a server name the certificate is not for", ns: "tls-bad-name",
			env:  []string{"CONSUL_CACERT=" + caFile, "CONSUL_TLS_SERVER_NAME=consul.example.com"},
			want: "x509: certificate is valid for server.dc1.consul, localhost, not consul.example.com",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newConsulStack(t, tc.ns)
			env.Create(t, s.Route("web"))
			start := time.Now()
			p := run(t, s, tc.env)
			var readyzAt, programmedAt time.Duration
			// Bounded well below the 30 s the status pipeline waits at most for Consul's
			// verdicts (consul.verdictsTimeout): a certificate error does not make it
			// wait.
			testenv.Eventually(t, 20*time.Second, "Consul unreachable on /readyz, the certificate problem on the Gateway", func(ctx context.Context) error {
				if readyzAt == 0 {
					code, body, err := p.Readyz(ctx)
					if err != nil {
						return fmt.Errorf("/readyz: %w", err)
					}
					if code != http.StatusServiceUnavailable || strings.TrimSpace(body) != "not ready: consul does not answer" {
						return fmt.Errorf("/readyz = %d %q", code, body)
					}
					readyzAt = time.Since(start)
				}
				// Not ctx: a read the deadline cuts short would hide the last state.
				g, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Get(t.Context(), "edge", metav1.GetOptions{})
				if err != nil {
					return err
				}
				c := meta.FindStatusCondition(g.Status.Conditions, "Programmed")
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != consul.ReasonWriteFailed || !strings.Contains(c.Message, tc.want) {
					return fmt.Errorf("Gateway edge Programmed = %+v", c)
				}
				programmedAt = time.Since(start)
				return nil
			})
			if out := p.Output(); !strings.Contains(out, tc.want) {
				t.Errorf("the log does not name %q:\n%s", tc.want, out)
			}
			for _, k := range []struct{ kind, name string }{
				{consulapi.APIGateway, s.naming.EntryName(s.Namespace, "edge")},
				{consulapi.HTTPRoute, s.naming.EntryName(s.Namespace, "web")},
			} {
				if entry, _, err := admin.ConfigEntries().Get(k.kind, k.name, nil); err == nil {
					t.Errorf("%s %s was written: %+v", k.kind, k.name, entry)
				}
			}
			t.Logf("/readyz said so %s after the start, the Gateway %s", readyzAt.Round(100*time.Millisecond), programmedAt.Round(100*time.Millisecond))
		})
	}
}
