package xds

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/directive"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// The responder's Consul service, and the entry prefix of the controller that sends to
// it: its gateway services and synthetic nodes are apart from the package's
// controller's.
const (
	responderService = "xds-responder"
	responderPrefix  = "r-"
)

// A gateway routes a RequestRedirect rule and a rule without a valid backend to the
// responder, and the responder answers them: the model picks the route, cluster and
// endpoint from the xDS Consul serves the gateway, and the request then makes the real
// hop, over mTLS with the gateway's leaf certificate, to the responder process the
// endpoint is. The answer is the responder's, not the model's. When the responder
// stops, only the requests sent to it fail.
func TestResponderAnswersThroughTheGateway(t *testing.T) {
	setup(t)
	binary := testenv.ControllerBinary(t)
	env.RunController(t, testenv.ControllerOptions{Binary: binary, Name: "responder", Args: []string{
		"--leader-elect=false", "--manage-service-defaults", "-v=4",
		"--controller-name=example.com/responder", "--consul-entry-prefix=" + responderPrefix,
		"--responder-service=" + responderService,
	}})
	r := testenv.StartResponder(t, env.Consul, testenv.ResponderOptions{Binary: binary, Service: responderService, ServiceID: "xds-responder-0", LogDir: env.LogDir()})
	if err := kubectlApply(filepath.Join("testdata", "responder.yaml")); err != nil {
		t.Fatal(err)
	}
	const ns = "xds-responder"
	registerBackends(t, ns, 0)
	awaitProgrammed(t, ns, "edge")
	gateway, proxy := prefixedGatewayProxy(t, ns, "edge")
	w := envoy.Watch(t.Context(), env.Consul.GRPCAddr(), proxy)
	t.Cleanup(w.Close)
	client, err := testenv.GatewayMTLSClient(env.ConsulClient, gateway, responderService)
	if err != nil {
		t.Fatal(err)
	}
	// A client that sends a directive of its own gets the rule's: the route sets the
	// header, replacing the client's.
	spoofed := map[string][]string{directive.Header: {`{"redirect":{"hostname":"evil.example.com"}}`}}
	for _, tt := range []struct {
		name         string
		target       string
		headers      map[string][]string
		wantStatus   int
		wantLocation string
	}{
		{"redirect", "/old/page?q=1", nil, 301, "https://secure.example.com/new/page?q=1"},
		{"no valid backend", "/missing", nil, 500, ""},
		{"no valid backend, client's directive", "/missing", spoofed, 500, ""},
		{"redirect, client's directive", "/old", spoofed, 301, "https://secure.example.com/new"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testenv.Eventually(t, 60*time.Second, "GET "+tt.target+" answered by the responder", func(ctx context.Context) error {
				status, location, err := throughGateway(ctx, w, client, r.Addr, envoy.HTTPRequest{Port: 80, Host: "app.example.com", Target: tt.target, Headers: tt.headers})
				if err != nil {
					return err
				}
				if status != tt.wantStatus || location != tt.wantLocation {
					return fmt.Errorf("answered %d Location %q, want %d Location %q", status, location, tt.wantStatus, tt.wantLocation)
				}
				return nil
			})
		})
	}

	// The responder stops (it deregisters): the requests its rules send to it fail, the
	// backend's rule is served as before.
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "without the responder, only its rules fail", func(context.Context) error {
		cfg := w.Current()
		if cfg == nil {
			return fmt.Errorf("no complete configuration yet")
		}
		rnd := rand.New(rand.NewPCG(1, 2))
		redirect, err := envoy.ServeHTTP(cfg, envoy.HTTPRequest{Port: 80, Host: "app.example.com", Target: "/old"}, rnd)
		if err != nil {
			return err
		}
		app, err := envoy.ServeHTTP(cfg, envoy.HTTPRequest{Port: 80, Host: "app.example.com", Target: "/"}, rnd)
		if err != nil {
			return err
		}
		if redirect.Status != http.StatusServiceUnavailable || app.Status != http.StatusOK || !strings.HasPrefix(app.Cluster, "responder-app.") {
			return fmt.Errorf("/old answered %d by %q, / answered %d by %s; want 503, and 200 by responder-app", redirect.Status, redirect.Endpoint, app.Status, app.Cluster)
		}
		return nil
	})
}

// throughGateway asks the model what the gateway does with in, requires it to send
// the request to the responder at responderAddr, and sends the request as the gateway
// would, returning the responder's status and Location.
func throughGateway(ctx context.Context, w *envoy.Watcher, client *http.Client, responderAddr string, in envoy.HTTPRequest) (int, string, error) {
	cfg := w.Current()
	if cfg == nil {
		return 0, "", fmt.Errorf("no complete configuration yet")
	}
	a, err := envoy.ServeHTTP(cfg, in, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		return 0, "", err
	}
	if !strings.HasPrefix(a.Cluster, responderService+".") || a.Endpoint != responderAddr {
		return 0, "", fmt.Errorf("the gateway sends it to cluster %s endpoint %q (status %d), want the responder at %s", a.Cluster, a.Endpoint, a.Status, responderAddr)
	}
	answer, err := testenv.SendUpstream(ctx, client, testenv.UpstreamRequest{Endpoint: a.Endpoint, Method: a.Method, Host: a.Host, Path: a.Path, Headers: a.Headers})
	if err != nil {
		return 0, "", fmt.Errorf("the responder: %w", err)
	}
	return answer.StatusCode, answer.Header.Get("Location"), nil
}

// prefixedGatewayProxy is gatewayProxy for the responder's controller, whose gateway
// services and synthetic nodes carry its entry prefix; it also returns the gateway's
// Consul service.
func prefixedGatewayProxy(t *testing.T, ns, gateway string) (string, envoy.Proxy) {
	t.Helper()
	service := translate.Naming{Prefix: responderPrefix}.EntryName(ns, gateway)
	return service, passingGatewayInstance(t, env.ConsulClient, service, anyNode)
}
