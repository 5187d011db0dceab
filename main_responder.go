package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/responder"
)

// defaultResponderService is the responder's Consul service name unless --service
// says otherwise; the controller's --responder-service must name the same.
const defaultResponderService = "consul-gateway-controller-responder"

// responderFlags are the responder command's settings.
type responderFlags struct {
	consul    options.ConsulConnection
	service   string
	namespace string
	partition string
	addrs     responder.Addresses
	// serviceID, advertiseAddress and advertisePort are the instance's catalog entry;
	// an empty serviceID registers nothing.
	serviceID        string
	advertiseAddress string
	advertisePort    int
}

// runResponder runs `consul-gateway-controller responder`: the Consul-native service
// that answers the requests Consul's http-route cannot (internal/responder).
func runResponder(args []string, stderr io.Writer) int {
	f, code := parseResponderFlags(args, stderr)
	if f == nil {
		return code
	}
	client, err := f.consul.Client()
	if err != nil {
		fmt.Fprintf(stderr, "consul-gateway-controller responder: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName("responder"))
	s := responder.New(responder.Config{Client: client, Service: f.service, Namespace: f.namespace, Partition: f.partition})
	reg := responder.Registration{ID: f.serviceID, Address: f.advertiseAddress, Port: f.advertisePort}
	if err := s.Run(ctx, f.addrs, reg); err != nil {
		klog.ErrorS(err, "Responder exiting")
		klog.Flush()
		return 1
	}
	klog.Flush()
	return 0
}

// parseResponderFlags returns the responder's settings from args, or nil and the
// code to exit with.
func parseResponderFlags(args []string, stderr io.Writer) (*responderFlags, int) {
	f := &responderFlags{
		service:          defaultResponderService,
		addrs:            responder.Addresses{Serve: ":20000", Health: ":8081"},
		serviceID:        os.Getenv("HOSTNAME"),
		advertiseAddress: os.Getenv("POD_IP"),
	}
	fs := pflag.NewFlagSet("consul-gateway-controller responder", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.consul.HTTPAddr, "consul-http-addr", "", "Consul HTTP API address (scheme://host:port); overrides CONSUL_HTTP_ADDR")
	fs.StringVar(&f.consul.TokenFile, "consul-token-file", "", "file holding a Consul ACL token with service:write on the responder's service; overrides CONSUL_HTTP_TOKEN_FILE and CONSUL_HTTP_TOKEN")
	fs.StringVar(&f.consul.CACert, "consul-cacert", "", "CA certificate to verify Consul's TLS certificate; overrides CONSUL_CACERT")
	fs.StringVar(&f.consul.TLSServerName, "consul-tls-server-name", "", "name to verify Consul's TLS certificate against (and send as SNI) instead of the address's host; overrides CONSUL_TLS_SERVER_NAME")
	fs.BoolVar(&f.consul.AllowPlaintext, "consul-allow-plaintext", false, "allow talking to Consul without TLS when it is not on loopback")
	fs.StringVar(&f.service, "service", f.service, "the responder's Consul service name; the controller's --responder-service names the same")
	fs.StringVar(&f.namespace, "consul-namespace", "", "the Consul namespace of the service (Consul Enterprise)")
	fs.StringVar(&f.partition, "consul-partition", "", "the Consul admin partition of the service (Consul Enterprise)")
	fs.StringVar(&f.addrs.Serve, "listen-address", f.addrs.Serve, "address gateways connect to with mTLS")
	fs.StringVar(&f.addrs.Health, "health-address", f.addrs.Health, "address of the plain-HTTP /healthz and /readyz probes")
	fs.StringVar(&f.serviceID, "service-id", f.serviceID, "the instance's Consul service ID (default $HOSTNAME, the pod's name); empty registers nothing")
	fs.StringVar(&f.advertiseAddress, "advertise-address", f.advertiseAddress, "the address gateways reach this instance at (default $POD_IP)")
	fs.IntVar(&f.advertisePort, "advertise-port", 0, "the port gateways reach this instance at (default the --listen-address port)")
	var klogFlags flag.FlagSet
	klog.InitFlags(&klogFlags)
	fs.AddGoFlagSet(&klogFlags)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, 0
		}
		fmt.Fprintf(stderr, "consul-gateway-controller responder: %v\n", err)
		return nil, 2
	}
	if err := f.complete(); err != nil {
		fmt.Fprintf(stderr, "consul-gateway-controller responder: invalid flags: %v\n", err)
		return nil, 2
	}
	return f, 0
}

// complete fills the advertised port from the listen address, and checks what must
// be set.
func (f *responderFlags) complete() error {
	if f.service == "" {
		return errors.New("--service must name the responder's Consul service")
	}
	if f.advertisePort == 0 {
		_, port, err := net.SplitHostPort(f.addrs.Serve)
		if err != nil {
			return fmt.Errorf("--listen-address: %w", err)
		}
		if f.advertisePort, err = strconv.Atoi(port); err != nil || f.advertisePort == 0 {
			return fmt.Errorf("--listen-address %q has no fixed port; set --advertise-port", f.addrs.Serve)
		}
	}
	if f.serviceID != "" && f.advertiseAddress == "" {
		return errors.New("--advertise-address (or $POD_IP) must be set to register the instance; --service-id= registers nothing")
	}
	return f.consul.Validate()
}
