package testenv

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
)

// ConsulAgent is a `consul agent -dev` on loopback ports. A dev agent keeps its state in
// memory, so a restart brings it back empty, as a Consul that lost its data would be.
// With a data dir it is a single server instead, whose restart keeps its state.
type ConsulAgent struct {
	proc       *process
	dataDir    string
	httpAddr   string
	grpcAddr   string
	aclEnabled bool
	token      string
	// With TLS: the HTTPS and gRPC TLS addresses, the CA of the server's certificate,
	// and the files of its tls block (written to tlsDir only while the agent starts);
	// the plaintext ports are off.
	httpsAddr   string
	grpcTLSAddr string
	caPEM       []byte
	tlsDir      string
	tlsFiles    map[string][]byte
}

// ConsulServerName is a DNS name the certificate of a Consul started with TLS is valid
// for, besides 127.0.0.1: the name Consul's own servers are known by in datacenter dc1.
const ConsulServerName = "server.dc1.consul"

// ConsulOptions say how StartConsulWith starts an agent.
type ConsulOptions struct {
	// ACL turns ACLs on, default deny, with a management token (ManagementToken).
	ACL bool
	// TLS serves the HTTP API only on an HTTPS port (HTTPSAddr) and gRPC, xDS
	// included, only on a TLS port (GRPCTLSAddr), with a certificate for 127.0.0.1 and
	// ConsulServerName issued by a CA made for this agent (CACertPEM). Clients are not
	// asked for certificates (verify_incoming is off), as with consul-dataplane and
	// the controller, which authenticate with tokens.
	TLS bool
}

// StartConsul starts another Consul dev agent, for tests that need one besides the
// Env's (for example with ACLs on). Its log goes to logDir/consul-<port>.log; the caller
// stops it.
func StartConsul(logDir string, aclEnabled bool) (*ConsulAgent, error) {
	return StartConsulWith(logDir, ConsulOptions{ACL: aclEnabled})
}

// StartConsulWith is StartConsul with options: ACLs, TLS or both.
func StartConsulWith(logDir string, opts ConsulOptions) (*ConsulAgent, error) {
	return startConsul(logDir, opts, "")
}

// startConsul starts an agent, on fresh ports again when another listener took one of
// its ports before it bound them.
func startConsul(logDir string, opts ConsulOptions, dataDir string) (*ConsulAgent, error) {
	for attempt := 1; ; attempt++ {
		c, err := startConsulOnce(logDir, opts, dataDir)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return c, err
		}
		if dataDir != "" {
			if err := os.RemoveAll(dataDir); err != nil {
				return nil, err
			}
		}
	}
}

func startConsulOnce(logDir string, opts ConsulOptions, dataDir string) (*ConsulAgent, error) {
	consulBin, err := binary("consul")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	c := &ConsulAgent{
		aclEnabled: opts.ACL,
		dataDir:    dataDir,
	}
	// The HTTP API, and gRPC, where a gateway's Envoy (or consul-dataplane) asks for its
	// xDS configuration: plaintext, or with TLS over TLS only. -1 turns a port off.
	httpPort, httpsPort, grpcPort, grpcTLSPort := ports[0], -1, ports[4], -1
	if opts.TLS {
		httpPort, httpsPort, grpcPort, grpcTLSPort = -1, ports[0], -1, ports[4]
		c.httpsAddr = fmt.Sprintf("127.0.0.1:%d", httpsPort)
		c.grpcTLSAddr = fmt.Sprintf("127.0.0.1:%d", grpcTLSPort)
	} else {
		c.httpAddr = fmt.Sprintf("127.0.0.1:%d", httpPort)
		c.grpcAddr = fmt.Sprintf("127.0.0.1:%d", grpcPort)
	}
	config := fmt.Sprintf(`ports {
  http = %d
  https = %d
  serf_lan = %d
  serf_wan = %d
  server = %d
  grpc = %d
  grpc_tls = %d
  dns = -1
}`, httpPort, httpsPort, ports[1], ports[2], ports[3], grpcPort, grpcTLSPort)
	if opts.TLS {
		tlsConfig, err := c.makeCertificates()
		if err != nil {
			return nil, err
		}
		config += tlsConfig
	}
	if opts.ACL {
		if c.token, err = randomUUID(); err != nil {
			return nil, err
		}
		config += fmt.Sprintf(`
acl {
  enabled = true
  default_policy = "deny"
  tokens { initial_management = %q }
}`, c.token)
	}
	mode := []string{"-dev"}
	if dataDir != "" {
		// What -dev turns on that the API gateway needs: Connect, and a server that
		// elects itself.
		config += `
connect { enabled = true }`
		mode = []string{"-server", "-bootstrap-expect=1", "-data-dir=" + dataDir}
	}
	c.proc = &process{
		watched: true,
		name:    "consul",
		path:    consulBin,
		logPath: filepath.Join(logDir, consulLogName(opts, ports[0])),
		// Trace: only at this level does Consul log its API gateway controller's
		// reconcile steps, which is what explains an entry it never judged.
		args: append(append([]string{"agent"}, mode...), "-log-level=trace", "-bind=127.0.0.1", "-client=127.0.0.1", "-hcl="+config),
		// The agent must not pick up a token or address from the developer's shell.
		//
		// One processor: Consul 1.15.4's API gateway controller hands a route's
		// memdb.WatchSet to a trigger goroutine that iterates it while the reconcile
		// goes on adding the route's next backends to it (hashicorp/consul#23522). On
		// two processors a route with several backends then crashes the server with
		// "concurrent map iteration and map write" now and then; on one, the runtime
		// never interleaves a map write with that iteration unless it preempts the
		// iterating goroutine, which asyncpreemptoff leaves to the rare synchronous
		// check (it still crashed once in a full run without it). docs/consul.md tells
		// users of the bug.
		env: []string{"CONSUL_HTTP_TOKEN=", "CONSUL_HTTP_ADDR=", "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1"},
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// makeCertificates makes a CA and the agent's certificate, and returns the agent's tls
// block that names their files. Start writes the files and removes them once the agent
// has read them, so no private key stays on disk.
func (c *ConsulAgent) makeCertificates() (string, error) {
	ca, err := testcerts.NewCA("consul test CA")
	if err != nil {
		return "", err
	}
	cert, key, err := ca.Issue(ConsulServerName, "localhost", "127.0.0.1")
	if err != nil {
		return "", err
	}
	if c.tlsDir, err = os.MkdirTemp("", "consul-tls-"); err != nil {
		return "", err
	}
	if err := os.Remove(c.tlsDir); err != nil {
		return "", err
	}
	c.caPEM = ca.CertPEM
	c.tlsFiles = map[string][]byte{"ca.pem": ca.CertPEM, "server.pem": cert, "server-key.pem": key}
	return fmt.Sprintf(`
tls {
  defaults {
    ca_file = %q
    cert_file = %q
    key_file = %q
    verify_incoming = false
  }
}`, filepath.Join(c.tlsDir, "ca.pem"), filepath.Join(c.tlsDir, "server.pem"), filepath.Join(c.tlsDir, "server-key.pem")), nil
}

// writeTLSFiles writes the files of the agent's tls block, and returns what removes
// them.
func (c *ConsulAgent) writeTLSFiles() (func(), error) {
	if c.tlsFiles == nil {
		return func() {}, nil
	}
	remove := func() { _ = os.RemoveAll(c.tlsDir) }
	if err := os.Mkdir(c.tlsDir, 0o700); err != nil {
		return nil, err
	}
	for name, data := range c.tlsFiles {
		if err := os.WriteFile(filepath.Join(c.tlsDir, name), data, 0o600); err != nil {
			remove()
			return nil, err
		}
	}
	return remove, nil
}

// Start starts the agent (again) and waits until it has a leader and, with ACLs, until
// the management token is accepted.
func (c *ConsulAgent) Start() error {
	removeTLSFiles, err := c.writeTLSFiles()
	if err != nil {
		return err
	}
	// Read at start: a ready agent holds its certificates in memory.
	defer removeTLSFiles()
	if err := c.proc.start(); err != nil {
		return err
	}
	client, err := c.Client()
	if err != nil {
		return err
	}
	return c.proc.waitFor(30*time.Second, func() error {
		leader, err := client.Status().Leader()
		if err != nil {
			return err
		}
		if leader == "" {
			return fmt.Errorf("no leader yet")
		}
		if !c.aclEnabled {
			return nil
		}
		_, _, err = client.ACL().TokenReadSelf(nil)
		return err
	})
}

// WipeData removes a stopped server's state, so that the next Start begins empty, as a
// Consul that lost its disk would. A dev agent always starts empty.
func (c *ConsulAgent) WipeData() error {
	if c.proc.running() {
		return fmt.Errorf("wipe consul data: the agent is running")
	}
	if c.dataDir == "" {
		return nil
	}
	return os.RemoveAll(c.dataDir)
}

// Stop stops the agent gracefully; Kill stops it as a crash would.
func (c *ConsulAgent) Stop() error { return c.proc.stop(10 * time.Second) }

// Kill stops the agent with SIGKILL.
func (c *ConsulAgent) Kill() error { return c.proc.kill() }

// HTTPAddr is host:port of the agent's plaintext HTTP API; "" with TLS, which turns it
// off (HTTPSAddr).
func (c *ConsulAgent) HTTPAddr() string { return c.httpAddr }

// GRPCAddr is host:port of the agent's plaintext gRPC port, which serves xDS; "" with
// TLS, which turns it off (GRPCTLSAddr).
func (c *ConsulAgent) GRPCAddr() string { return c.grpcAddr }

// HTTPSAddr is host:port of the agent's HTTPS API when it runs with TLS, and ""
// otherwise.
func (c *ConsulAgent) HTTPSAddr() string { return c.httpsAddr }

// GRPCTLSAddr is host:port of the agent's gRPC TLS port, which serves xDS, when it runs
// with TLS, and "" otherwise.
func (c *ConsulAgent) GRPCTLSAddr() string { return c.grpcTLSAddr }

// CACertPEM is the PEM certificate of the CA that issued the agent's certificate when
// it runs with TLS, and nil otherwise.
func (c *ConsulAgent) CACertPEM() []byte { return c.caPEM }

// URL is the agent's HTTP API as scheme://host:port, as --consul-http-addr and
// CONSUL_HTTP_ADDR take it: https:// with TLS.
func (c *ConsulAgent) URL() string {
	if c.httpsAddr != "" {
		return "https://" + c.httpsAddr
	}
	return "http://" + c.httpAddr
}

// ManagementToken is the bootstrap token when ACLs are on, and "" otherwise.
func (c *ConsulAgent) ManagementToken() string { return c.token }

// Client returns a consul/api client with the management token (if any).
func (c *ConsulAgent) Client() (*consulapi.Client, error) {
	return c.ClientWithToken(c.token)
}

// ClientWithToken returns a consul/api client that authenticates with token. With TLS it
// talks HTTPS and verifies the agent's certificate for 127.0.0.1 with the agent's CA.
func (c *ConsulAgent) ClientWithToken(token string) (*consulapi.Client, error) {
	cfg := consulapi.DefaultNonPooledConfig()
	cfg.Address = c.httpAddr
	cfg.Scheme = "http"
	cfg.Token = token
	cfg.TokenFile = ""
	cfg.TLSConfig = consulapi.TLSConfig{}
	cfg.HttpAuth = nil
	if c.httpsAddr != "" {
		cfg.Address = c.httpsAddr
		cfg.Scheme = "https"
		cfg.TLSConfig = consulapi.TLSConfig{CAPem: c.caPEM}
	}
	return consulapi.NewClient(cfg)
}

func randomUUID() (string, error) {
	hex, err := randomToken()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%s-%s-%s-%s", hex[0:8], hex[8:12], hex[12:16], hex[16:20], hex[20:32]), nil
}

func consulLogName(opts ConsulOptions, port int) string {
	switch {
	case opts.ACL && opts.TLS:
		return fmt.Sprintf("consul-acl-tls-%d.log", port)
	case opts.ACL:
		return fmt.Sprintf("consul-acl-%d.log", port)
	case opts.TLS:
		return fmt.Sprintf("consul-tls-%d.log", port)
	}
	return "consul.log"
}

// ConsulEntry reads the config entry kind/name with the Env's management client, and
// returns nil without an error when it does not exist.
func (e *Env) ConsulEntry(kind, name string) (consulapi.ConfigEntry, error) {
	entry, _, err := e.ConsulClient.ConfigEntries().Get(kind, name, nil)
	var status consulapi.StatusError
	if errors.As(err, &status) && status.Code == http.StatusNotFound {
		return nil, nil
	}
	return entry, err
}
