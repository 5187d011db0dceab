package testenv

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	consulapi "github.com/hashicorp/consul/api"
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
}

// StartConsul starts another Consul dev agent, for tests that need one besides the
// Env's (for example with ACLs on). Its log goes to logDir/consul-<port>.log; the caller
// stops it.
func StartConsul(logDir string, aclEnabled bool) (*ConsulAgent, error) {
	return startConsul(logDir, aclEnabled, "")
}

func startConsul(logDir string, aclEnabled bool, dataDir string) (*ConsulAgent, error) {
	consulBin, err := binary("consul")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	c := &ConsulAgent{
		httpAddr:   fmt.Sprintf("127.0.0.1:%d", ports[0]),
		grpcAddr:   fmt.Sprintf("127.0.0.1:%d", ports[4]),
		aclEnabled: aclEnabled,
		dataDir:    dataDir,
	}
	// The plaintext gRPC port is where a gateway's Envoy (or consul-dataplane) asks for
	// its xDS configuration.
	config := fmt.Sprintf(`ports {
  http = %d
  serf_lan = %d
  serf_wan = %d
  server = %d
  grpc = %d
  dns = -1
  grpc_tls = -1
}`, ports[0], ports[1], ports[2], ports[3], ports[4])
	if aclEnabled {
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
		name:    "consul",
		path:    consulBin,
		logPath: filepath.Join(logDir, consulLogName(aclEnabled, ports[0])),
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
		// never interleaves a map write with that iteration. docs/consul.md tells
		// users of the bug.
		env: []string{"CONSUL_HTTP_TOKEN=", "CONSUL_HTTP_ADDR=", "GOMAXPROCS=1"},
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// Start starts the agent (again) and waits until it has a leader and, with ACLs, until
// the management token is accepted.
func (c *ConsulAgent) Start() error {
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

// HTTPAddr is host:port of the agent's HTTP API.
func (c *ConsulAgent) HTTPAddr() string { return c.httpAddr }

// GRPCAddr is host:port of the agent's plaintext gRPC port, which serves xDS.
func (c *ConsulAgent) GRPCAddr() string { return c.grpcAddr }

// ManagementToken is the bootstrap token when ACLs are on, and "" otherwise.
func (c *ConsulAgent) ManagementToken() string { return c.token }

// Client returns a consul/api client with the management token (if any).
func (c *ConsulAgent) Client() (*consulapi.Client, error) {
	return c.ClientWithToken(c.token)
}

// ClientWithToken returns a consul/api client that authenticates with token.
func (c *ConsulAgent) ClientWithToken(token string) (*consulapi.Client, error) {
	cfg := consulapi.DefaultNonPooledConfig()
	cfg.Address = c.httpAddr
	cfg.Scheme = "http"
	cfg.Token = token
	cfg.TokenFile = ""
	cfg.TLSConfig = consulapi.TLSConfig{}
	cfg.HttpAuth = nil
	return consulapi.NewClient(cfg)
}

func randomUUID() (string, error) {
	hex, err := randomToken()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%s-%s-%s-%s", hex[0:8], hex[8:12], hex[12:16], hex[16:20], hex[20:32]), nil
}

func consulLogName(acl bool, port int) string {
	if acl {
		return fmt.Sprintf("consul-acl-%d.log", port)
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
