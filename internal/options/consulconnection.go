package options

import (
	"fmt"

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
	// AllowPlaintext lets the process talk to a Consul that is not on loopback
	// without TLS.
	AllowPlaintext bool
}

// ConsulConnection is the controller's connection to Consul.
func (o *Options) ConsulConnection() ConsulConnection {
	return ConsulConnection{
		HTTPAddr: o.ConsulHTTPAddr, TokenFile: o.ConsulTokenFile, CACert: o.ConsulCACert,
		AllowPlaintext: o.ConsulAllowPlaintext,
	}
}

// AddReaderFlags adds the connection's flags for a read-only command, named as the
// controller's.
func (c *ConsulConnection) AddReaderFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.HTTPAddr, "consul-http-addr", c.HTTPAddr, "Consul HTTP API address (scheme://host:port); overrides CONSUL_HTTP_ADDR")
	fs.StringVar(&c.TokenFile, "consul-token-file", c.TokenFile, "file holding a Consul ACL token that may read (docs/cli.md); overrides CONSUL_HTTP_TOKEN_FILE and CONSUL_HTTP_TOKEN")
	fs.StringVar(&c.CACert, "consul-cacert", c.CACert, "CA certificate to verify Consul's TLS certificate; overrides CONSUL_CACERT")
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
// sent to a Consul the check refuses.
func (c ConsulConnection) Client() (*consulapi.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	client, err := consulapi.NewClient(c.Config())
	if err != nil {
		return nil, fmt.Errorf("create consul client: %w", err)
	}
	return client, nil
}
