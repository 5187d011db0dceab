package responder_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/directive"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/responder"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

const responderService = "responder"

// startResponder runs a responder of responderService on loopback against Consul
// until the test ends, registered as instance id, and returns its address once it has
// its identity.
func startResponder(t *testing.T, client *consulapi.Client, id string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := responder.New(responder.Config{Client: client, Service: responderService})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	registered := make(chan struct{})
	identity := make(chan struct{})
	go func() {
		defer close(identity)
		s.FollowIdentity(ctx)
	}()
	go func() {
		defer close(registered)
		s.KeepRegistered(ctx, responder.Registration{ID: id, Address: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port})
	}()
	go func() { served <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("responder: %v", err)
		}
		<-registered
		<-identity
	})
	testenv.Eventually(t, 30*time.Second, "the responder has its leaf and roots", func(context.Context) error { return s.Ready() })
	return l.Addr().String()
}

// startConsul starts a Consul agent with ACLs on, default deny, whose agent token is
// its management token: an agent deregisters a service from the catalog with its
// agent token (without one, the deregistration is blocked, and the instance stays),
// and every agent of a Consul with ACLs has one.
func startConsul(t *testing.T) (*testenv.ConsulAgent, *consulapi.Client) {
	t.Helper()
	agent, admin := testenv.StartConsulFor(t, t.TempDir(), testenv.ConsulOptions{ACL: true})
	if _, err := admin.Agent().UpdateAgentACLToken(agent.ManagementToken(), nil); err != nil {
		t.Fatalf("set the agent token: %v", err)
	}
	return agent, admin
}

// allowIntentions lets gw-allowed reach the responder and denies gw-denied; any other
// caller gets the default, deny with ACLs on.
func allowIntentions(t *testing.T, admin *consulapi.Client) {
	t.Helper()
	if _, _, err := admin.ConfigEntries().Set(&consulapi.ServiceIntentionsConfigEntry{
		Kind: consulapi.ServiceIntentions,
		Name: responderService,
		Sources: []*consulapi.SourceIntention{
			{Name: "gw-allowed", Action: consulapi.IntentionActionAllow},
			{Name: "gw-denied", Action: consulapi.IntentionActionDeny},
		},
	}, nil); err != nil {
		t.Fatalf("write intentions: %v", err)
	}
}

func gatewayClient(t *testing.T, admin *consulapi.Client, gateway string) *http.Client {
	t.Helper()
	c, err := testenv.GatewayMTLSClient(admin, gateway, responderService)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get sends GET url with Host host and, unless "", the directive header, and returns
// the status and Location of the answer.
func get(t *testing.T, c *http.Client, url, host, header string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if header != "" {
		req.Header.Set(directive.Header, header)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("an allowed gateway was refused: %v", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Location")
}

var redirect = directive.Directive{Redirect: &directive.Redirect{
	Scheme: "https", Hostname: "example.org", StatusCode: 301,
	Path: &directive.PathModifier{Type: directive.ReplacePrefixMatch, Prefix: "/old", Value: "/new"},
}}

// The responder takes its identity from a real Consul agent (ACLs on, intentions
// deny by default), answers a gateway the intentions allow with what the rule's
// directive says, refuses one they do not allow, an explicit deny, a certificate
// Consul did not issue and a caller without a certificate, and is in the catalog as a
// connect-native instance whose check passes.
func TestResponderServesAllowedGatewaysOverMTLS(t *testing.T) {
	_, admin := startConsul(t)
	allowIntentions(t, admin)
	addr := startResponder(t, admin, "responder-1")
	url := "https://" + addr + "/old/path?q=1"

	allowed := gatewayClient(t, admin, "gw-allowed")
	for _, tt := range []struct {
		name         string
		header       string
		wantStatus   int
		wantLocation string
	}{
		{"redirect", directive.Encode(redirect), 301, "https://example.org/new/path?q=1"},
		{"no directive: 500", "", 500, ""},
		{"unreadable directive: 500", `{"redirect":{"scheme":"ftp"}}`, 500, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, location := get(t, allowed, url, "a.example.com", tt.header)
			if status != tt.wantStatus || location != tt.wantLocation {
				t.Errorf("answer %d Location %q, want %d Location %q", status, location, tt.wantStatus, tt.wantLocation)
			}
		})
	}

	foreignCA, err := testcerts.NewCA("not consul")
	if err != nil {
		t.Fatal(err)
	}
	foreignPEM, foreignKey, err := foreignCA.Issue("gw-allowed")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := tls.X509KeyPair(foreignPEM, foreignKey)
	if err != nil {
		t.Fatal(err)
	}
	meshClient := func(cert tls.Certificate) *http.Client {
		c, err := testenv.MeshClient(admin, cert, responderService)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for name, c := range map[string]*http.Client{
		"no intention (default deny)": gatewayClient(t, admin, "gw-other"),
		"explicit deny":               gatewayClient(t, admin, "gw-denied"),
		"certificate of another CA":   meshClient(foreign),
		"no client certificate":       meshClient(tls.Certificate{}),
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := c.Get(url)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("answered %d, want the connection refused", resp.StatusCode)
			}
			// The responder's refusal reaches the client as a TLS alert.
			if !strings.Contains(err.Error(), "remote error: tls:") {
				t.Errorf("refused with %v, want a TLS alert from the responder", err)
			}
		})
	}

	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	awaitPassingInstance(t, admin, "responder-1", port)
}

// awaitPassingInstance waits until id is the one passing connect-native instance of
// the responder, at port.
func awaitPassingInstance(t *testing.T, admin *consulapi.Client, id, port string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the responder is a passing connect-native instance", func(context.Context) error {
		entries, _, err := admin.Health().Connect(responderService, "", true, nil)
		if err != nil {
			return err
		}
		if len(entries) != 1 {
			return fmt.Errorf("%d passing connect instances, want 1", len(entries))
		}
		svc := entries[0].Service
		if svc.Connect == nil || !svc.Connect.Native || svc.ID != id || strconv.Itoa(svc.Port) != port {
			return fmt.Errorf("instance %s port %d connect %+v, want %s port %s connect-native", svc.ID, svc.Port, svc.Connect, id, port)
		}
		return nil
	})
}

// The built binary's responder command does the same as a process of its own, with
// the least-privilege token of deploy/consul-acl-policy-responder.hcl: it registers,
// answers an allowed gateway (authorizing it with that token), and deregisters when it
// stops.
func TestResponderCommand(t *testing.T) {
	agent, admin := startConsul(t)
	allowIntentions(t, admin)
	binary, err := testenv.BuildController(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The token deploy/ tells operators to make, with the policy of
	// consul-acl-policy-responder.hcl, naming this test's service.
	rules, err := testenv.DeployPolicies("consul-acl-policy-responder.hcl")
	if err != nil {
		t.Fatal(err)
	}
	rules = strings.ReplaceAll(rules, `"consul-gateway-controller-responder"`, strconv.Quote(responderService))
	token := testenv.ACLToken(t, admin, "responder", rules)
	r := testenv.StartResponder(t, agent, testenv.ResponderOptions{
		Binary: binary, Service: responderService, ServiceID: "responder-cmd", LogDir: t.TempDir(), Token: token,
	})
	_, port, err := net.SplitHostPort(r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	awaitPassingInstance(t, admin, "responder-cmd", port)

	status, location := get(t, gatewayClient(t, admin, "gw-allowed"), "https://"+r.Addr+"/old", "a.example.com", directive.Encode(redirect))
	if status != 301 || location != "https://example.org/new" {
		t.Errorf("answer %d Location %q, want 301 https://example.org/new", status, location)
	}

	if err := r.Stop(); err != nil {
		t.Fatalf("stop: %v (log %s)", err, r.LogPath())
	}
	testenv.Eventually(t, 30*time.Second, "the stopped responder is out of the catalog", func(context.Context) error {
		instances, _, err := admin.Catalog().Service(responderService, "", nil)
		if err != nil {
			return err
		}
		if len(instances) != 0 {
			return fmt.Errorf("%d instances left, %s first", len(instances), instances[0].ServiceID)
		}
		return nil
	})
}
