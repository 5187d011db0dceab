package options

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/spf13/pflag"
)

// ConsulConnection is where and with what a process reaches Consul's HTTP API. The
// controller and its read-only commands (status, explain) build their clients from it
// alike, so the commands make the controller's plaintext check too: their read token
// must not cross the network in clear either.
type ConsulConnection struct {
	// HTTPAddr, TokenFile and CACert override consul/api's environment conventions
	// (CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN_FILE, CONSUL_CACERT, ...) when set.
	HTTPAddr  string
	TokenFile string
	CACert    string
	// TLSServerName is the name Consul's certificate must carry when it differs from
	// the address's host (consul-k8s's server certificate names server.<dc>.<domain>,
	// not an IP or a Service alias); overrides CONSUL_TLS_SERVER_NAME.
	TLSServerName string
	// AllowPlaintext lets the process talk to a Consul that is not on loopback
	// without TLS.
	AllowPlaintext bool
}

// AddReaderFlags adds the connection's flags for a read-only command, named as the
// controller's.
func (c *ConsulConnection) AddReaderFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.HTTPAddr, "consul-http-addr", c.HTTPAddr, "Consul HTTP API address (scheme://host:port); overrides CONSUL_HTTP_ADDR")
	fs.StringVar(&c.TokenFile, "consul-token-file", c.TokenFile, "file holding a Consul ACL token that may read (docs/cli.md); overrides CONSUL_HTTP_TOKEN_FILE and CONSUL_HTTP_TOKEN")
	fs.StringVar(&c.CACert, "consul-cacert", c.CACert, "CA certificate to verify Consul's TLS certificate; overrides CONSUL_CACERT")
	fs.StringVar(&c.TLSServerName, "consul-tls-server-name", c.TLSServerName, "name to verify Consul's TLS certificate against (and send as SNI) instead of the address's host; overrides CONSUL_TLS_SERVER_NAME")
	fs.BoolVar(&c.AllowPlaintext, "consul-allow-plaintext", c.AllowPlaintext, "allow talking to Consul without TLS when it is not on loopback; the Consul token then crosses the network in clear. Without it such an address is refused before anything is sent")
}

// Config is consul/api's configuration from the environment, with the settings that
// were given on top.
func (c ConsulConnection) Config() *consulapi.Config {
	cfg := consulapi.DefaultConfig()
	if c.HTTPAddr != "" {
		cfg.Address = c.HTTPAddr // consul/api takes a scheme:// prefix off itself
	}
	if c.TokenFile != "" {
		cfg.Token, cfg.TokenFile = "", c.TokenFile
	}
	if c.CACert != "" {
		cfg.TLSConfig.CAFile = c.CACert
	}
	if c.TLSServerName != "" {
		// consul/api verifies the server's certificate against TLSConfig.Address and
		// sends it as SNI; CONSUL_TLS_SERVER_NAME sets the same field.
		cfg.TLSConfig.Address = c.TLSServerName
	}
	return cfg
}

// Validate refuses a Consul reached over the network without TLS, unless
// AllowPlaintext.
func (c ConsulConnection) Validate() error {
	if host, plaintext := plaintextConsul(c.Config()); plaintext && !c.AllowPlaintext {
		return fmt.Errorf("consul at %s is plaintext: use https (with --consul-cacert), or accept the risk with --consul-allow-plaintext", host)
	}
	return nil
}

// Client is a Consul client of Config, made only once Validate passes: nothing is
// sent to a Consul the check refuses. Each wrap wraps the client's transport, in
// order; a unix:// address gets consul/api's own transport, unwrapped.
func (c ConsulConnection) Client(wrap ...func(http.RoundTripper) http.RoundTripper) (*consulapi.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cfg := c.Config()
	if len(wrap) > 0 {
		httpClient, err := consulapi.NewHttpClient(cfg.Transport, cfg.TLSConfig)
		if err != nil {
			return nil, fmt.Errorf("create consul client: %w", err)
		}
		for _, w := range wrap {
			httpClient.Transport = w(httpClient.Transport)
		}
		cfg.HttpClient = httpClient
	}
	client, err := consulapi.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("create consul client: %w", err)
	}
	return client, nil
}

// Host is the host of the Consul HTTP address Config names.
func (c ConsulConnection) Host() string { return consulHost(c.Config().Address) }

// TLS reports whether Config speaks https to Consul.
func (c ConsulConnection) TLS() bool { return consulScheme(c.Config()) == "https" }

// consulScheme is the scheme consul/api uses for cfg: the address's own prefix, else
// cfg.Scheme (from CONSUL_HTTP_SSL and the like).
func consulScheme(cfg *consulapi.Config) string {
	if scheme, _, ok := strings.Cut(cfg.Address, "://"); ok {
		return scheme
	}
	return cfg.Scheme
}

// plaintextConsul reports whether cfg talks to Consul over the network without TLS:
// neither https nor a unix socket, and not on loopback. host is the address's host.
func plaintextConsul(cfg *consulapi.Config) (host string, plaintext bool) {
	host = consulHost(cfg.Address)
	if scheme := consulScheme(cfg); scheme == "https" || scheme == "unix" {
		return host, false
	}
	return host, !isLoopback(host)
}

// consulHost is the host of a Consul HTTP address (scheme://host:port or host:port).
func consulHost(address string) string {
	if _, rest, ok := strings.Cut(address, "://"); ok {
		address = rest
	}
	if host, _, err := net.SplitHostPort(address); err == nil {
		return host
	}
	return address
}
