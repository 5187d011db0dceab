package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
)

// Responder is a `consul-gateway-controller responder` process on loopback, talking to
// a Consul agent of the harness.
type Responder struct {
	proc *process
	// Addr is host:port of its mTLS listener, and the address it registers in Consul's
	// catalog; HealthAddr serves /healthz and /readyz.
	Addr       string
	HealthAddr string
}

// ResponderOptions say how StartResponder runs a responder.
type ResponderOptions struct {
	// Binary is the controller binary (ControllerBinary or BuildController).
	Binary string
	// Service is its Consul service name; ServiceID its instance's ID.
	Service   string
	ServiceID string
	// LogDir holds its log.
	LogDir string
	// Token is its Consul ACL token; empty is the agent's management token (none
	// without ACLs).
	Token string
}

// StartResponder runs a responder against agent with opts.Token or the agent's
// management token, stopped when t ends, and returns it once /readyz answers (it holds its leaf
// certificate and Consul's roots).
func StartResponder(t testing.TB, agent *ConsulAgent, opts ResponderOptions) *Responder {
	t.Helper()
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	r := &Responder{Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), HealthAddr: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	args := []string{"responder",
		"--consul-http-addr=" + agent.URL(),
		"--service=" + opts.Service,
		"--service-id=" + opts.ServiceID,
		"--advertise-address=127.0.0.1",
		"--listen-address=" + r.Addr,
		"--health-address=" + r.HealthAddr,
		"-v=4",
	}
	dir := t.TempDir()
	token := opts.Token
	if token == "" {
		token = agent.ManagementToken()
	}
	if token != "" {
		path := filepath.Join(dir, "token")
		if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--consul-token-file="+path)
	}
	if ca := agent.CACertPEM(); ca != nil {
		path := filepath.Join(dir, "consul-ca.pem")
		if err := os.WriteFile(path, ca, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--consul-cacert="+path)
	}
	r.proc = &process{
		name:    "responder",
		path:    opts.Binary,
		args:    args,
		logPath: filepath.Join(opts.LogDir, "responder-"+opts.ServiceID+".log"),
		// Only the flags say where Consul is and with which token.
		env: []string{"CONSUL_HTTP_TOKEN=", "CONSUL_HTTP_ADDR=", "CONSUL_HTTP_TOKEN_FILE=", "HOSTNAME=", "POD_IP="},
	}
	if err := r.proc.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.proc.stop(10 * time.Second) })
	err = r.proc.waitFor(30*time.Second, func() error {
		code, body, err := HTTPGet(context.Background(), "http://"+r.HealthAddr+"/readyz", "")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Stop stops the responder gracefully: it deregisters from Consul's catalog.
func (r *Responder) Stop() error { return r.proc.stop(10 * time.Second) }

// LogPath is the responder's log.
func (r *Responder) LogPath() string { return r.proc.logPath }

// GatewayMTLSClient is an HTTP client that connects as Consul service gateway does
// from its Envoy: with the gateway's leaf certificate (read through client, whose
// token may write the gateway's service), trusting Consul's roots, and accepting only
// a server whose SPIFFE ID is that of service server in datacenter dc1. It follows no
// redirect: the answer is what the server said.
func GatewayMTLSClient(client *consulapi.Client, gateway, server string) (*http.Client, error) {
	leaf, _, err := client.Agent().ConnectCALeaf(gateway, nil)
	if err != nil {
		return nil, fmt.Errorf("leaf certificate of %s: %w", gateway, err)
	}
	cert, err := tls.X509KeyPair([]byte(leaf.CertPEM), []byte(leaf.PrivateKeyPEM))
	if err != nil {
		return nil, fmt.Errorf("parse leaf certificate of %s: %w", gateway, err)
	}
	return MeshClient(client, cert, server)
}

// UpstreamRequest is a request as a gateway's Envoy sends it to an upstream instance:
// the instance's endpoint (host:port), and the method ("" is GET), host, path with its
// query, and headers after the route's rewrites and header mutations.
type UpstreamRequest struct {
	Endpoint           string
	Method, Host, Path string
	Headers            map[string][]string
}

// UpstreamAnswer is what an upstream instance answered: its status, headers and body.
type UpstreamAnswer struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// SendUpstream makes the gateway's hop to an upstream instance: r over client
// (GatewayMTLSClient for a mesh instance). The body is read whole, so the connection
// is free for the next request.
func SendUpstream(ctx context.Context, client *http.Client, r UpstreamRequest) (UpstreamAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, "https://"+r.Endpoint+r.Path, nil)
	if err != nil {
		return UpstreamAnswer{}, fmt.Errorf("request to %s: %w", r.Endpoint, err)
	}
	req.Host = r.Host
	for name, values := range r.Headers {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return UpstreamAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return UpstreamAnswer{}, fmt.Errorf("read the answer of %s: %w", r.Endpoint, err)
	}
	return UpstreamAnswer{StatusCode: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// MeshClient is GatewayMTLSClient with a certificate of the caller's choosing (none,
// or one Consul did not issue).
func MeshClient(client *consulapi.Client, cert tls.Certificate, server string) (*http.Client, error) {
	roots, _, err := client.Agent().ConnectCARoots(nil)
	if err != nil {
		return nil, fmt.Errorf("read Consul's CA roots: %w", err)
	}
	pool := x509.NewCertPool()
	for _, r := range roots.Roots {
		pool.AppendCertsFromPEM([]byte(r.RootCertPEM))
	}
	wantServer := fmt.Sprintf("spiffe://%s/ns/default/dc/dc1/svc/%s", roots.TrustDomain, server)
	return &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			// Envoy checks a mesh server by its SPIFFE ID, not by a host name: so
			// does this client, in VerifyPeerCertificate.
			InsecureSkipVerify: true,
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				return verifyMeshServer(raw, pool, wantServer)
			},
		}},
	}, nil
}

// verifyMeshServer checks a server's chain against Consul's roots and its SPIFFE ID.
func verifyMeshServer(raw [][]byte, roots *x509.CertPool, want string) error {
	if len(raw) == 0 {
		return fmt.Errorf("no server certificate")
	}
	leaf, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return err
	}
	intermediates := x509.NewCertPool()
	for _, der := range raw[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates}); err != nil {
		return fmt.Errorf("server certificate: %w", err)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != want {
		return fmt.Errorf("server is %v, want %s", leaf.URIs, want)
	}
	return nil
}
