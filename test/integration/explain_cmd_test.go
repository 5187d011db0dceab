package integration

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/cli"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestExplainCommands runs the binary's explain request and explain gateway against
// the objects and entries of a running controller (the binary, with ACLs on and
// default deny in Consul, so it keeps intentions): explain request picks the Exact
// path rule over the PathPrefix rule that covers it, and the header match rule over
// the catch-all, in Gateway API's precedence and Consul's alike; explain gateway
// shows the HTTPS listener's certificate as Consul holds it (subject, SANs, expiry)
// and, once the intention of one backend is removed behind the stopped controller's
// back, says that backend is denied and why.
func TestExplainCommands(t *testing.T) {
	agent, admin, rules := aclConsul(t)
	s := newConsulStack(t, "explain-"+utilrand.String(5))
	beta := s.Namespace + "-beta"
	env.Create(t, testenv.Service(s.Namespace, beta, testenv.BackendPort))
	env.Create(t, explainRoute(s, beta))
	certPEM, _ := s.secureGateway(t)
	clusterID := s.Namespace
	token := testenv.ACLToken(t, admin, "explain-controller", rules)
	controller := env.RunController(t, testenv.ControllerOptions{Name: "explain", ConsulAddr: agent.HTTPAddr(), ConsulToken: token,
		Args: []string{"--controller-name=" + string(s.Controller), "--cluster-id=" + clusterID, "--leader-elect=false",
			"--deploy-gateways=false", "--manage-service-defaults"}})
	gatewayService := s.naming.EntryName(s.Namespace, s.GatewayName)
	testenv.Eventually(t, 60*time.Second, "both Gateways programmed and the gateway let through to both backends", func(ctx context.Context) error {
		for _, name := range []string{s.GatewayName, "secure"} {
			g, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(g.Status.Conditions, "Programmed") {
				return fmt.Errorf("Gateway %s conditions %+v", name, g.Status.Conditions)
			}
		}
		for _, backend := range []string{s.Backend, beta} {
			ok, _, err := admin.Connect().IntentionCheck(&consulapi.IntentionCheck{Source: gatewayService, Destination: backend, SourceType: consulapi.IntentionSourceConsul},
				(&consulapi.QueryOptions{}).WithContext(ctx))
			if err != nil {
				return fmt.Errorf("intention check %s -> %s: %w", gatewayService, backend, err)
			}
			if !ok {
				return fmt.Errorf("intention %s -> %s: not allowed yet", gatewayService, backend)
			}
		}
		return nil
	})
	if err := controller.Kill(); err != nil {
		t.Fatal(err)
	}
	// The intention of one backend goes while nothing would put it back.
	if _, err := admin.ConfigEntries().Delete(consulapi.ServiceIntentions, beta, nil); err != nil {
		t.Fatal(err)
	}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kube.WriteKubeconfig(kubeconfig, testenv.AdminUser); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(agent.ManagementToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	consulAddr := agent.HTTPAddr()
	// explainExiting runs explain and wants it to exit with code.
	explainExiting := func(code int, args ...string) string {
		t.Helper()
		cmd := exec.Command(testenv.ControllerBinary(t), append([]string{"explain", "--kubeconfig=" + kubeconfig,
			"--consul-http-addr=" + consulAddr, "--consul-token-file=" + tokenFile,
			"--controller-name=" + string(s.Controller), "--cluster-id=" + clusterID}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if got := cmd.ProcessState.ExitCode(); got != code {
			t.Fatalf("explain %v: exit %d (%v), want %d\n%s", args, got, err, code, stderr.String())
		}
		return stdout.String()
	}
	explain := func(args ...string) string {
		t.Helper()
		return explainExiting(0, args...)
	}
	route := s.Namespace + "/api"
	for _, tc := range []struct {
		name    string
		args    []string
		rule    int
		backend string
	}{
		{"exact path over prefix", []string{"request", "GET", "http://127.0.0.1:18080/api"}, 1, beta},
		{"prefix", []string{"request", "GET", "http://127.0.0.1:18080/api/v2/items", "--gateway", s.Namespace + "/" + s.GatewayName}, 0, s.Backend},
		{"header match", []string{"request", "GET", "http://127.0.0.1:18080/other", "-H", "X-Beta: 1"}, 2, beta},
		{"no header: catch-all", []string{"request", "GET", "http://127.0.0.1:18080/other"}, 3, s.Backend},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rep cli.RequestReport
			if err := json.Unmarshal([]byte(explain(append(tc.args, "-o", "json")...)), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Gateway != s.Namespace+"/"+s.GatewayName || rep.Listener != "http" {
				t.Fatalf("gateway %q listener %q (%s), want %s/%s listener http", rep.Gateway, rep.Listener, rep.NoListener, s.Namespace, s.GatewayName)
			}
			if rep.Spec == nil || rep.Spec.Route != route || rep.Spec.Rule != tc.rule {
				t.Errorf("Gateway API precedence: %+v, want %s rule %d", rep.Spec, route, tc.rule)
			} else if len(rep.Spec.Backends) != 1 || rep.Spec.Backends[0].ConsulService != tc.backend {
				t.Errorf("backends %+v, want the Consul service %s", rep.Spec.Backends, tc.backend)
			}
			if len(rep.Consul) != 1 || rep.Consul[0].Route != route || rep.Consul[0].Rule != tc.rule {
				t.Errorf("Consul 1.15: %+v, want %s rule %d", rep.Consul, route, tc.rule)
			}
			if !strings.HasPrefix(rep.Agreement, "agree") {
				t.Errorf("agreement %q", rep.Agreement)
			}
			if want := "Accepted=True, Bound=True on api-gateway " + gatewayService + "/http"; rep.Spec != nil && !strings.Contains(rep.Spec.Entry, want) {
				t.Errorf("the route's entry as Consul holds it: %q, want %q", rep.Spec.Entry, want)
			}
		})
	}
	t.Logf("explain request:\n%s", explain("request", "GET", "http://127.0.0.1:18080/api"))
	t.Logf("explain request:\n%s", explain("request", "GET", "http://127.0.0.1:18080/other", "-H", "X-Beta: 1"))

	// explain gateway: the certificate as Consul holds it.
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	secure := explain("gateway", s.Namespace+"/secure")
	for _, want := range []string{
		"certificate from Secret " + s.Namespace + "/tls: expiring soon",
		`subject "CN=secure.example.com"`,
		"SANs: secure.example.com",
		"to " + cert.NotAfter.UTC().Format(time.RFC3339),
	} {
		if !strings.Contains(secure, want) {
			t.Errorf("explain gateway does not say %q:\n%s", want, secure)
		}
	}
	if strings.Contains(secure, "PRIVATE KEY") {
		t.Errorf("explain gateway prints key material:\n%s", secure)
	}
	t.Logf("explain gateway secure:\n%s", secure)

	// The identity's policy and role, as the identity keeper names them (it keeps them
	// only for Gateways whose pods log in, which this controller does not deploy).
	aclName := identity.Namer{Ownership: translate.Ownership{Controller: string(s.Controller), ClusterID: clusterID}}.Name(cache.ObjectName{Namespace: s.Namespace, Name: s.GatewayName})
	policy, _, err := admin.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: aclName, Rules: `mesh = "read"`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.ACL().RoleCreate(&consulapi.ACLRole{Name: aclName, Policies: []*consulapi.ACLRolePolicyLink{{ID: policy.ID}}}, nil); err != nil {
		t.Fatal(err)
	}

	// explain gateway: the backend whose intention went is denied, the other allowed.
	edge := explain("gateway", s.Namespace+"/"+s.GatewayName)
	for _, want := range []string{
		"policy: " + aclName + "\n",
		"role: " + aclName + "\n",
		"route: HTTPRoute " + route,
		s.Backend + ": allowed: source \"" + gatewayService + "\"",
		beta + ": DENIED: missing: no service-intentions source names the gateway",
		"HTTP 403",
	} {
		if !strings.Contains(edge, want) {
			t.Errorf("explain gateway does not say %q:\n%s", want, edge)
		}
	}
	t.Logf("explain gateway edge:\n%s", edge)

	// With read access to the Gateway API kinds, Namespaces and Services alone, both
	// answer, and say what they could not read.
	kubeconfig = readOnlyKubeconfig(t)
	if out := explain("request", "GET", "http://127.0.0.1:18080/api"); !strings.Contains(out, "rule 1 (Exact /api)") ||
		!strings.Contains(out, "note: TLS Secrets may not be listed") || !strings.Contains(out, "note: GatewayConfigs not listed") {
		t.Errorf("explain request with read-only access:\n%s", out)
	}
	if out := explain("gateway", s.Namespace+"/"+s.GatewayName); !strings.Contains(out, "note: pods may not be listed") || !strings.Contains(out, beta+": DENIED") {
		t.Errorf("explain gateway with read-only access:\n%s", out)
	}

	// With Consul down, both print the Kubernetes half and say Consul was not read.
	consulAddr = "http://127.0.0.1:1"
	if out := explainExiting(cli.ExitConsulNotRead, "request", "GET", "http://127.0.0.1:18080/api"); !strings.Contains(out, "rule 1 (Exact /api)") || !strings.Contains(out, "Consul: not reached") {
		t.Errorf("explain request with Consul down:\n%s", out)
	}
	if out := explainExiting(cli.ExitConsulNotRead, "gateway", s.Namespace+"/"+s.GatewayName); !strings.Contains(out, "route: HTTPRoute "+route) || !strings.Contains(out, "note: Consul not read") {
		t.Errorf("explain gateway with Consul down:\n%s", out)
	}
}

// explainRoute is the route explain request is asked about: a PathPrefix to the
// stack's backend, then an Exact match of the same path to beta (which only the Exact
// match's precedence, not the rules' order, lets win), a header match to beta and a
// catch-all to the backend.
func explainRoute(s consulStack, beta string) *gatewayv1.HTTPRoute {
	backend := func(name string) []gatewayv1.HTTPBackendRef {
		return []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: testenv.Backend(name, testenv.BackendPort)}}}
	}
	path := func(t gatewayv1.PathMatchType, v string) *gatewayv1.HTTPPathMatch {
		return &gatewayv1.HTTPPathMatch{Type: &t, Value: &v}
	}
	r := testenv.HTTPRoute(s.Namespace, "api", []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(s.GatewayName)}})
	r.Spec.Rules = []gatewayv1.HTTPRouteRule{
		{Matches: []gatewayv1.HTTPRouteMatch{{Path: path(gatewayv1.PathMatchPathPrefix, "/api")}}, BackendRefs: backend(s.Backend)},
		{Matches: []gatewayv1.HTTPRouteMatch{{Path: path(gatewayv1.PathMatchExact, "/api")}}, BackendRefs: backend(beta)},
		{Matches: []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-beta", Value: "1"}}}}, BackendRefs: backend(beta)},
		{BackendRefs: backend(s.Backend)},
	}
	return r
}
