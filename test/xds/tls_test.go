package xds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// gatewayRules are the ACL rules of the token the gateway "gw" of registerChainFixture
// watches its xDS with: its own service to write, what its routes lead to to read.
const gatewayRules = `service "gw" { policy = "write" }
service_prefix "" { policy = "read" }
node_prefix "" { policy = "read" }
mesh = "read"`

// TestXDSOverTLS acts as a gateway pod's Envoy behind consul-dataplane against a
// Consul with ACLs on (default deny) and TLS: over the gRPC TLS port, verifying the
// server's certificate with the CA that issued it and sending a token of the gateway's
// own, it gets the gateway's configuration and a request is routed. Then each of a CA
// that did not issue the certificate, a server name it is not for, a plaintext dial
// and a token Consul does not know fails the stream promptly, with an error that names
// the cause; a token that may not write the gateway's service gets nothing at all.
func TestXDSOverTLS(t *testing.T) {
	// A Consul of the test's own, its log beside the Env's (kept when a test fails).
	agent, admin := testenv.StartConsulFor(t, env.LogDir(), testenv.ConsulOptions{ACL: true, TLS: true})
	gw := registerChainFixture(t, admin)
	writeEntry(t, admin, routeTo("web", "echo"))
	awaitBound(t, admin, "web")
	token := testenv.ACLToken(t, admin, "gw", gatewayRules)
	good := &tls.Config{RootCAs: certPool(t, agent.CACertPEM()), ServerName: testenv.ConsulServerName}

	w := envoy.WatchWith(t.Context(), agent.GRPCTLSAddr(), gw, envoy.DialOptions{Token: token, TLS: good})
	t.Cleanup(w.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := w.Config(ctx, time.Second); err != nil {
		t.Fatalf("xDS over TLS with the gateway's token: %v", err)
	}
	awaitServed(t, w, 8080, "200")
	if err := w.Err(); err != nil {
		t.Errorf("Err() = %v on a stream that serves", err)
	}

	other, err := testcerts.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts envoy.DialOptions
		want string
	}{
		{
			name: "a CA that did not issue the certificate",
			opts: envoy.DialOptions{Token: token, TLS: &tls.Config{RootCAs: certPool(t, other.CertPEM), ServerName: testenv.ConsulServerName}},
			want: "x509: certificate signed by unknown authority",
		},
		{
			name: "a server name the certificate is not for",
			opts: envoy.DialOptions{Token: token, TLS: &tls.Config{RootCAs: certPool(t, agent.CACertPEM()), ServerName: "consul.example.com"}},
			want: "x509: certificate is valid for",
		},
		{
			name: "plaintext to the TLS port",
			opts: envoy.DialOptions{Token: token},
			want: "error reading server preface",
		},
		{
			// Sent as x-consul-token: a token Consul does not know is refused as such,
			// where no token at all would be the anonymous token's (below).
			name: "a token Consul does not know",
			opts: envoy.DialOptions{Token: "00000000-0000-4000-8000-000000000001", TLS: good},
			want: "Unauthenticated desc = unauthenticated: ACL not found",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			w := envoy.WatchWith(t.Context(), agent.GRPCTLSAddr(), gw, tc.opts)
			defer w.Close()
			// Promptly: a stream that hangs ends here with a deadline error.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			cfg, err := w.Config(ctx, time.Second)
			took := time.Since(start)
			if err == nil {
				t.Fatalf("got a configuration of %d listeners, want an error naming %q", len(cfg.Listeners), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("after %s: %v; want an error naming %q", took.Round(time.Millisecond), err, tc.want)
			}
			if werr := w.Err(); werr == nil || !strings.Contains(werr.Error(), tc.want) {
				t.Errorf("Err() = %v, want the stream's error", werr)
			}
			t.Logf("after %s: %v", took.Round(time.Millisecond), err)
		})
	}

	// Consul 1.15 does not refuse a token it knows that may not write the gateway's
	// service (the anonymous one included): the stream stays open and serves
	// nothing, while its log says "lacks permission 'service:write'" for the
	// gateway's leaf certificate. A least-privilege check has to look for that
	// silence, not for an error.
	t.Run("a token without service:write on the gateway gets nothing", func(t *testing.T) {
		other := testenv.ACLToken(t, admin, "other", strings.ReplaceAll(gatewayRules, `service "gw"`, `service "other"`))
		for name, tok := range map[string]string{"another service's token": other, "no token": ""} {
			w := envoy.WatchWith(t.Context(), agent.GRPCTLSAddr(), gw, envoy.DialOptions{Token: tok, TLS: good})
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			cfg, err := w.Config(ctx, time.Second)
			cancel()
			streamErr := w.Err()
			w.Close()
			if err == nil {
				t.Errorf("%s: served %d listeners", name, len(cfg.Listeners))
			} else if !errors.Is(err, context.DeadlineExceeded) || streamErr != nil {
				t.Errorf("%s: %v (stream: %v); want nothing served and no error", name, err, streamErr)
			}
		}
	})
}

func certPool(t *testing.T, pemCerts []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCerts) {
		t.Fatal("no certificate in the CA PEM")
	}
	return pool
}
