package xds

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

var update = flag.Bool("update", false, "rewrite the golden files from what Consul serves")

// A scenario is a set of Gateway API objects (testdata/<name>.yaml) and what they mean
// at the Envoy level, written from the Gateway API spec, not from what Consul does.
type scenario struct {
	name      string
	file      string
	namespace string
	// backendNamespaces are other namespaces whose Services are backends.
	backendNamespaces []string
	// outside are Consul services registered outside Kubernetes, as on VMs, which
	// MeshServices name.
	outside []string
	// declaredHTTP are Consul services that several namespaces register, which their
	// owners declare http (the controller does not write a shared name's protocol).
	declaredHTTP []string
	// ports are the Gateway's listener ports: one Envoy listener each, and no other.
	ports []uint32
	// requests say where each request must go (nil want: nowhere, Envoy's 404).
	requests []routeCase
	// tcp maps a TCP listener port to the backend Service it must proxy to.
	tcp map[uint32]string
	// certificateSecret names the Secret whose certificate each TLS listener serves.
	certificateSecret string
	// removedRoute is an HTTPRoute deleted after the golden comparison; then the
	// requests of afterRemoval must be routed as they say.
	removedRoute string
	afterRemoval []routeCase
	// routed are the RoutedAsSpecified conditions the routes must have once
	// programmed, and routedAfterRemoval once removedRoute is gone.
	routed             []routedCase
	routedAfterRemoval []routedCase
	// conditions are other conditions the routes must have once programmed.
	conditions []conditionCase
	// refusedRoutes are routes refused on their one parent (Accepted=False): Consul
	// never hears of them.
	refusedRoutes []string
}

// conditionCase is a condition of an HTTPRoute on its one parent: its "Status/Reason",
// and strings its message must hold.
type conditionCase struct {
	route, condType, statusReason string
	mentions                      []string
}

// routedCase is an HTTPRoute's RoutedAsSpecified condition on its one parent: its
// "Status/Reason", and strings its message must hold (the other route, the example
// request).
type routedCase struct {
	route    string
	reason   string
	mentions []string
}

type routeCase struct {
	port uint32
	req  envoy.Request
	want *want
}

type want struct {
	// backends maps each backend Service to its share; one backend has share 1.
	backends map[string]uint32
	// path is the path the backend receives; "" means the request's, unchanged.
	path string
	// headers the backend receives; "" means absent.
	headers map[string]string
	// backendHeaders are more headers, by the backend that receives them: a
	// backendRef's own filters apply to its share of the requests only.
	backendHeaders map[string]map[string]string
}

func to(backend string) *want { return &want{backends: map[string]uint32{backend: 1}} }

func rewritten(backend, path string) *want {
	return &want{backends: map[string]uint32{backend: 1}, path: path}
}

// blackhole is the service the controller routes requests to that Gateway API answers
// with an error; it must have no endpoints, so Envoy answers 503.
var blackhole = translate.Naming{}.BlackholeService()

var scenarios = []scenario{
	{
		name: "example", file: filepath.Join("..", "..", "examples", "gateway.yaml"), namespace: "demo",
		ports: []uint32{8080},
		requests: []routeCase{
			{8080, envoy.Request{Host: "demo.example.com", Target: "/echo"}, to("echo")},
			{8080, envoy.Request{Host: "any", Target: "/echo/x?y=1"}, to("echo")},
			{8080, envoy.Request{Host: "demo.example.com", Target: "/echoes"}, nil},
			{8080, envoy.Request{Host: "demo.example.com", Target: "/"}, nil},
		},
	},
	{
		name: "http", namespace: "xds-http", ports: []uint32{80},
		requests: []routeCase{
			{80, envoy.Request{Host: "shop.example.com", Target: "/"}, to("web")},
			{80, envoy.Request{Host: "shop.example.com:80", Target: "/api"}, to("api")},
			{80, envoy.Request{Host: "www.shop.example.com", Target: "/api/users"}, to("api")},
			// PathPrefix matches whole path elements.
			{80, envoy.Request{Host: "shop.example.com", Target: "/apix"}, to("web")},
			// Same path: more header matches win.
			{80, envoy.Request{Host: "shop.example.com", Target: "/api/users", Headers: map[string]string{"x-version": "v2"}}, to("api-v2")},
			{80, envoy.Request{Host: "shop.example.com", Target: "/api", Headers: map[string]string{"x-version": "v2"}}, to("api-v2")},
			{80, envoy.Request{Host: "shop.example.com", Target: "/api/users", Headers: map[string]string{"x-version": "v3"}}, to("api")},
			// An Exact path wins over any PathPrefix, whatever the headers.
			{80, envoy.Request{Host: "shop.example.com", Target: "/api/health"}, to("health")},
			{80, envoy.Request{Host: "shop.example.com", Target: "/api/health", Headers: map[string]string{"x-version": "v2"}}, to("health")},
			{80, envoy.Request{Host: "shop.example.com", Target: "/api/health/deep"}, to("api")},
			{80, envoy.Request{Host: "shop.example.com", Target: "/items/42"}, to("items")},
			{80, envoy.Request{Host: "shop.example.com", Target: "/items/x42"}, to("web")},
			// Method and query parameter must both match.
			{80, envoy.Request{Method: "POST", Host: "shop.example.com", Target: "/orders?debug=1"}, to("orders")},
			{80, envoy.Request{Method: "POST", Host: "shop.example.com", Target: "/orders/7?debug=1"}, to("orders")},
			{80, envoy.Request{Method: "GET", Host: "shop.example.com", Target: "/orders?debug=1"}, to("web")},
			{80, envoy.Request{Method: "POST", Host: "shop.example.com", Target: "/orders"}, to("web")},
			{80, envoy.Request{Host: "blog.example.com", Target: "/2026/12/hello"}, to("blog")},
			// An Exact path wins over a PathPrefix of the same path listed before it
			// in the route: the exact "/foo" and the prefix "/bar/" that PathPrefix
			// "/foo" and "/bar" become tie in Consul's order with the Exact matches.
			{80, envoy.Request{Host: "exact.example.com", Target: "/foo"}, to("api")},
			{80, envoy.Request{Host: "exact.example.com", Target: "/foo/"}, to("web")},
			{80, envoy.Request{Host: "exact.example.com", Target: "/foo/x"}, to("web")},
			{80, envoy.Request{Host: "exact.example.com", Target: "/foox"}, nil},
			{80, envoy.Request{Host: "exact.example.com", Target: "/bar/"}, to("api")},
			{80, envoy.Request{Host: "exact.example.com", Target: "/bar"}, to("web")},
			{80, envoy.Request{Host: "exact.example.com", Target: "/bar/x"}, to("web")},
			// Hostnames no route claims reach nothing.
			{80, envoy.Request{Host: "other.example.com", Target: "/"}, nil},
			{80, envoy.Request{Host: "example.com", Target: "/api"}, nil},
		},
		removedRoute: "blog",
		afterRemoval: []routeCase{
			{80, envoy.Request{Host: "blog.example.com", Target: "/2026/12/hello"}, nil},
			{80, envoy.Request{Host: "shop.example.com", Target: "/api"}, to("api")},
		},
	},
	{
		name: "traffic", namespace: "xds-traffic", ports: []uint32{8080},
		requests: []routeCase{
			{8080, envoy.Request{Host: "app.example.net", Target: "/"}, &want{backends: map[string]uint32{"canary-a": 80, "canary-b": 20}}},
			{8080, envoy.Request{Host: "app.example.net", Target: "/headers", Headers: map[string]string{"x-env": "dev", "x-trace": "0", "x-debug": "on"}},
				&want{backends: map[string]uint32{"headers-echo": 1}, headers: map[string]string{"x-env": "prod", "x-trace": "0,1", "x-debug": ""}}},
			{8080, envoy.Request{Host: "app.example.net", Target: "/headers/x"},
				&want{backends: map[string]uint32{"headers-echo": 1}, headers: map[string]string{"x-env": "prod", "x-trace": "1"}}},
			{8080, envoy.Request{Host: "app.example.net", Target: "/old/page?q=1"}, &want{backends: map[string]uint32{"rewrite-echo": 1}, path: "/new/page"}},
			{8080, envoy.Request{Host: "app.example.net", Target: "/old"}, &want{backends: map[string]uint32{"rewrite-echo": 1}, path: "/new"}},
			// The route without hostnames takes the listener's wildcard, less the
			// hostname the other route claims.
			{8080, envoy.Request{Host: "other.example.net", Target: "/old/page"}, to("fallback")},
			{8080, envoy.Request{Host: "example.net", Target: "/"}, nil},
			{8080, envoy.Request{Host: "app.example.com", Target: "/"}, nil},
		},
	},
	{
		name: "refused", namespace: "xds-refused", backendNamespaces: []string{"xds-refused-backends"}, ports: []uint32{80},
		requests: []routeCase{
			// A rule with a filter Consul cannot apply: its requests get the blackhole's
			// error, not the "/" rule's backend nor the rule's own.
			{80, envoy.Request{Host: "refused.example.com", Target: "/admin"}, to(blackhole)},
			{80, envoy.Request{Host: "refused.example.com", Target: "/admin/users"}, to(blackhole)},
			{80, envoy.Request{Host: "refused.example.com", Target: "/administrator"}, to("refused-web")},
			{80, envoy.Request{Host: "refused.example.com", Target: "/moved/x"}, to(blackhole)},
			{80, envoy.Request{Host: "refused.example.com", Target: "/tagged"}, to(blackhole)},
			// Every backend invalid: the error, not the "/" rule's backend.
			{80, envoy.Request{Host: "refused.example.com", Target: "/missing"}, to(blackhole)},
			// An invalid backend's share gets the error; the valid one keeps its own.
			{80, envoy.Request{Host: "refused.example.com", Target: "/split/x"}, &want{backends: map[string]uint32{"refused-canary": 3, blackhole: 1}}},
			{80, envoy.Request{Host: "refused.example.com", Target: "/"}, to("refused-web")},
			// A backend without a ReferenceGrant gets the error; its granted sibling
			// in the same namespace serves.
			{80, envoy.Request{Host: "cross.example.com", Target: "/v2"}, to(blackhole)},
			{80, envoy.Request{Host: "cross.example.com", Target: "/"}, to("shop")},
		},
	},
	{
		// Values Envoy refuses: each rule holding one is dropped and answered with
		// the blackhole's 503, the route's other rules and the port's other routes
		// are served, and the conditions say which rule and why.
		name: "envoyrefused", namespace: "xds-envoyrefused", ports: []uint32{80},
		requests: []routeCase{
			{80, envoy.Request{Host: "good.example.com", Target: "/rate"},
				&want{backends: map[string]uint32{"er-web": 1}, headers: map[string]string{"x-rate": "100% of %START_TIME%"}}},
			{80, envoy.Request{Host: "good.example.com", Target: "/"}, to("er-web")},
			{80, envoy.Request{Host: "mixed.example.com", Target: "/fine"}, to("er-web")},
			{80, envoy.Request{Host: "mixed.example.com", Target: "/set-host"}, to(blackhole)},
			{80, envoy.Request{Host: "mixed.example.com", Target: "/remove-authority/x"}, to(blackhole)},
			{80, envoy.Request{Host: "mixed.example.com", Target: "/crlf"}, to(blackhole)},
			{80, envoy.Request{Host: "mixed.example.com", Target: "/remove-empty"}, to(blackhole)},
			{80, envoy.Request{Host: "mixed.example.com", Target: "/rewrite/x"}, to(blackhole)},
			// A rule whose match Envoy refuses is left out: it selects nothing.
			{80, envoy.Request{Host: "mixed.example.com", Target: "/items/7"}, nil},
			// A route with no rule left is not served at all.
			{80, envoy.Request{Host: "refused.example.com", Target: "/"}, nil},
		},
		refusedRoutes: []string{"all-refused"},
		conditions: []conditionCase{
			{"good", "Accepted", "True/Accepted", nil},
			{"mixed", "Accepted", "True/Accepted", nil},
			{"mixed", "PartiallyInvalid", "True/UnsupportedValue", []string{
				"rule 1: filter RequestHeaderModifier set has header \"Host\"",
				"rule 2: filter RequestHeaderModifier remove has header \":authority\"",
				"rule 3: backendRef 0 filter RequestHeaderModifier add has header X-Note value \"a\\r\\nX-Injected: 1\" with a NUL, CR or LF character",
				"rule 4: filter RequestHeaderModifier remove has an empty header name",
				"rule 5: filter URLRewrite ReplacePrefixMatch has replacement \"/new\\nline\"",
				"rule 6: match 0 path regex \"/items/(?<id>[0-9]+)\" names a group as (?<name>...)",
				consullimits.EnvoyRefuses,
			}},
			{"all-refused", "Accepted", "False/UnsupportedValue", []string{"rule 0: filter RequestHeaderModifier remove has header \"host\""}},
		},
	},
	{
		name: "rewrite", namespace: "xds-rewrite", ports: []uint32{8080},
		requests: []routeCase{
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/foo/bar"}, rewritten("prefix-echo", "/xyz/bar")},
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/foo"}, rewritten("prefix-echo", "/xyz")},
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/foo/"}, rewritten("prefix-echo", "/xyz/")},
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/foobar"}, to("prefix-web")},
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/slash/bar?q=1"}, rewritten("prefix-echo", "/xyz/bar")},
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/slash"}, rewritten("prefix-echo", "/xyz")},
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/strip/bar"}, rewritten("prefix-echo", "/bar")},
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/strip/"}, rewritten("prefix-echo", "/")},
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/strip"}, rewritten("prefix-echo", "/")},
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/empty/bar"}, rewritten("prefix-echo", "/bar")},
			{8080, envoy.Request{Host: "rewrite.example.com", Target: "/empty"}, rewritten("prefix-echo", "/")},
			{8080, envoy.Request{Host: "root.example.com", Target: "/bar"}, rewritten("prefix-echo", "/base/bar")},
			{8080, envoy.Request{Host: "root.example.com", Target: "/"}, rewritten("prefix-echo", "/base")},
		},
	},
	{
		// Consul 1.15 routes these against the spec, and nothing the controller writes
		// changes it: the requests say what Consul does (the deviation), the routes'
		// RoutedAsSpecified conditions that it does and what the spec says.
		name: "precedence", namespace: "xds-precedence", ports: []uint32{8080, 8081},
		requests: []routeCase{
			{8080, envoy.Request{Host: "foo.example.org", Target: "/a"}, to("foo")},
			{8080, envoy.Request{Host: "bar.example.org", Target: "/b/x"}, to("catch-all")},
			// Deviation: the spec sends it to catch-all, whose rules apply after
			// foo-only's; Consul matches foo.example.org against foo-only's alone.
			{8080, envoy.Request{Host: "foo.example.org", Target: "/b"}, nil},
			{8081, envoy.Request{Host: "any", Target: "/p"}, to("exact")},
			// Deviation: the spec sends it to exact (an Exact path before any
			// PathPrefix); Consul ranks prefix-header's exact "/p" with a header first.
			{8081, envoy.Request{Host: "any", Target: "/p", Headers: map[string]string{"x-canary": "1"}}, to("prefix")},
			{8081, envoy.Request{Host: "any", Target: "/p/x", Headers: map[string]string{"x-canary": "1"}}, to("prefix")},
			{8081, envoy.Request{Host: "any", Target: "/p/x"}, nil},
		},
		routed: []routedCase{
			{"catch-all", "False/HiddenByHostname", []string{"HTTPRoute xds-precedence/foo-only", "GET foo.example.org/b"}},
			{"foo-only", "True/RoutedAsSpecified", nil},
			{"exact", "False/PrecedenceDiffers", []string{"HTTPRoute xds-precedence/prefix-header", "GET any-host.example/p (x-canary: 1)"}},
			{"prefix-header", "True/RoutedAsSpecified", nil},
		},
		removedRoute: "foo-only",
		afterRemoval: []routeCase{
			{8080, envoy.Request{Host: "foo.example.org", Target: "/b"}, to("catch-all")},
		},
		// catch-all keeps no condition naming the route that went.
		routedAfterRemoval: []routedCase{
			{"catch-all", "True/RoutedAsSpecified", nil},
			{"exact", "False/PrecedenceDiffers", []string{"HTTPRoute xds-precedence/prefix-header"}},
		},
	},
	{
		name: "backends", namespace: "xds-backends", ports: []uint32{8080, 8081},
		requests: []routeCase{
			// Each weighted backendRef sets its own header on its own share.
			{8081, envoy.Request{Host: "any", Target: "/tagged"}, &want{
				backends:       map[string]uint32{"tag-a": 1, "tag-b": 1},
				backendHeaders: map[string]map[string]string{"tag-a": {"x-backend": "tag-a"}, "tag-b": {"x-backend": "tag-b"}},
			}},
			// A single backendRef's filter applies after the rule's.
			{8081, envoy.Request{Host: "any", Target: "/single/x", Headers: map[string]string{"x-debug": "on", "x-trace": "0"}}, &want{
				backends: map[string]uint32{"single-echo": 1},
				headers:  map[string]string{"x-rule": "single", "x-backend": "single-echo", "x-trace": "0,backend", "x-debug": ""},
			}},
			// A parentRef port attaches the route to that port's listener only.
			{8080, envoy.Request{Host: "any", Target: "/tagged"}, nil},
			{8080, envoy.Request{Host: "any", Target: "/front"}, to("front-echo")},
			{8081, envoy.Request{Host: "any", Target: "/front"}, nil},
		},
	},
	{
		name: "listeners", namespace: "xds-listeners", ports: []uint32{443, 5432}, certificateSecret: "tls",
		requests: []routeCase{
			{443, envoy.Request{Host: "secure.example.com", Target: "/login"}, to("secure-web")},
			{443, envoy.Request{Host: "insecure.example.com", Target: "/login"}, nil},
		},
		tcp: map[uint32]string{5432: "postgres"},
	},
	{
		// The Consul services are those the pods register as, not the Services.
		name: "renamed", namespace: "xds-renamed", ports: []uint32{8080, 9000},
		backendNamespaces: []string{"xds-renamed-other"},
		outside:           []string{"legacy-billing"},
		declaredHTTP:      []string{"common"},
		requests: []routeCase{
			{8080, envoy.Request{Host: "billing.example.net", Target: "/"}, to("billing-v2")},
			{8080, envoy.Request{Host: "vm.example.net", Target: "/"}, to("legacy-billing")},
			// Pods that disagree on their name, and a pod on another port: refused.
			{8080, envoy.Request{Host: "split.example.net", Target: "/"}, to(blackhole)},
			{8080, envoy.Request{Host: "ported.example.net", Target: "/"}, to(blackhole)},
			// A Consul name another namespace's Service shares: only this namespace's
			// instance of it.
			{8080, envoy.Request{Host: "shared.example.net", Target: "/"}, to("common")},
		},
		tcp: map[uint32]string{9000: "ledger-primary"},
	},
}

// TestWhatEnvoyReceives applies each scenario to the real API server, lets the
// controller program Consul, acts as the Gateway's registered pod's Envoy, and checks
// the xDS Consul serves it against what the objects mean, then against the golden file.
func TestWhatEnvoyReceives(t *testing.T) {
	setup(t)
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.run(t)
		})
	}
}

func (s scenario) run(t *testing.T) {
	var certPEM []byte
	if s.file == "" {
		s.file = filepath.Join("testdata", s.name+".yaml")
	}
	if err := kubectlApply(s.file); err != nil {
		t.Fatal(err)
	}
	if s.certificateSecret != "" {
		certPEM = createCertificateSecret(t, s.namespace, s.certificateSecret)
	}
	backends := registerBackends(t, s.namespace, 0)
	for k, ns := range s.backendNamespaces {
		// A name both namespaces register is the scenario namespace's: a route of it
		// reaches only its namespace's instances (narrowed).
		for name, addr := range registerBackends(t, ns, 10+k) {
			if _, own := backends[name]; !own {
				backends[name] = addr
			}
		}
	}
	for _, name := range s.declaredHTTP {
		declareHTTP(t, name)
	}
	for i, name := range s.outside {
		backends[name] = outsideAddress(i)
		registerOutsideInstance(t, name, backends[name])
		declareHTTP(t, name)
	}
	awaitProgrammed(t, s.namespace, "edge", s.refusedRoutes...)
	proxy := gatewayProxy(t, s.namespace, "edge")

	cfg := s.fetchUntil(t, proxy, func(cfg *envoy.Config) error { return s.check(cfg, backends, certPEM) })
	awaitRouted(t, s.namespace, s.routed)
	awaitConditions(t, s.namespace, s.conditions)

	replace := map[string]string{proxy.ID: "GATEWAY-POD"}
	for _, ip := range podIPs(t, s.namespace) {
		replace[ip] = "GATEWAY-POD-IP"
	}
	golden := filepath.Join("testdata", s.name+".golden.json")
	compareGolden(t, golden, cfg, replace)

	if s.removedRoute == "" {
		return
	}
	routes := env.GatewayClient.GatewayV1().HTTPRoutes(s.namespace)
	removed, err := routes.Get(t.Context(), s.removedRoute, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := routes.Delete(t.Context(), s.removedRoute, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg = s.fetchUntil(t, proxy, func(cfg *envoy.Config) error {
		var errs []error
		for _, rc := range s.afterRemoval {
			errs = append(errs, checkRequest(cfg, rc))
		}
		return errors.Join(errs...)
	})
	awaitRouted(t, s.namespace, s.routedAfterRemoval)
	for _, rc := range cfg.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			for _, h := range removed.Spec.Hostnames {
				if slices.Contains(vh.GetDomains(), string(h)) {
					t.Errorf("virtual host %s still serves %s of the deleted route", vh.GetName(), h)
				}
			}
		}
	}
}

// awaitRouted waits until each route's RoutedAsSpecified condition is as want says.
func awaitRouted(t *testing.T, ns string, want []routedCase) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	var texts []string
	testenv.Eventually(t, 60*time.Second, "the RoutedAsSpecified conditions of "+ns, func(ctx context.Context) error {
		var errs []error
		texts = texts[:0]
		for _, w := range want {
			route, err := env.GatewayClient.GatewayV1().HTTPRoutes(ns).Get(ctx, w.route, metav1.GetOptions{})
			if err != nil {
				return err
			}
			errs = append(errs, w.check(route.Status.Parents))
			for _, p := range route.Status.Parents {
				texts = append(texts, w.route+": "+testenv.ConditionText(p.Conditions, gwsync.RoutedAsSpecifiedCondition))
			}
		}
		return errors.Join(errs...)
	})
	for _, text := range texts {
		t.Log(text)
	}
}

// awaitConditions waits until each route's condition is as want says.
func awaitConditions(t *testing.T, ns string, want []conditionCase) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	testenv.Eventually(t, 60*time.Second, "the route conditions of "+ns, func(ctx context.Context) error {
		var errs []error
		for _, w := range want {
			route, err := env.GatewayClient.GatewayV1().HTTPRoutes(ns).Get(ctx, w.route, metav1.GetOptions{})
			if err != nil {
				return err
			}
			errs = append(errs, w.check(route.Status.Parents))
		}
		return errors.Join(errs...)
	})
}

func (w conditionCase) check(parents []gatewayv1.RouteParentStatus) error {
	if len(parents) != 1 {
		return fmt.Errorf("HTTPRoute %s: %d parents in status, want 1", w.route, len(parents))
	}
	conds := parents[0].Conditions
	text := testenv.ConditionText(conds, w.condType)
	if !strings.HasPrefix(text, w.statusReason+":") && text != w.statusReason {
		return fmt.Errorf("HTTPRoute %s: %s is %s, want %s", w.route, w.condType, text, w.statusReason)
	}
	for _, m := range w.mentions {
		if !strings.Contains(text, m) {
			return fmt.Errorf("HTTPRoute %s: %s is %s, which does not mention %q", w.route, w.condType, text, m)
		}
	}
	return nil
}

func (w routedCase) check(parents []gatewayv1.RouteParentStatus) error {
	if len(parents) != 1 {
		return fmt.Errorf("HTTPRoute %s: %d parents in status, want 1", w.route, len(parents))
	}
	conds := parents[0].Conditions
	text := testenv.ConditionText(conds, gwsync.RoutedAsSpecifiedCondition)
	if testenv.ConditionReason(conds, gwsync.RoutedAsSpecifiedCondition) != w.reason {
		return fmt.Errorf("HTTPRoute %s: %s is %s, want %s", w.route, gwsync.RoutedAsSpecifiedCondition, text, w.reason)
	}
	for _, m := range w.mentions {
		if !strings.Contains(text, m) {
			return fmt.Errorf("HTTPRoute %s: %s is %s, which does not mention %q", w.route, gwsync.RoutedAsSpecifiedCondition, text, m)
		}
	}
	return nil
}

// fetchUntil fetches the proxy's configuration until check accepts it: Consul derives
// xDS from the entries asynchronously, so a fetch right after the statuses say
// "accepted" may still see the previous state.
func (s scenario) fetchUntil(t *testing.T, proxy envoy.Proxy, check func(*envoy.Config) error) *envoy.Config {
	t.Helper()
	var cfg *envoy.Config
	testenv.Eventually(t, 90*time.Second, "the xDS of "+s.name+" means what its objects say", func(ctx context.Context) error {
		fetchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got, err := envoy.Fetch(fetchCtx, env.Consul.GRPCAddr(), proxy, time.Second)
		if err != nil {
			return err
		}
		if err := check(got); err != nil {
			return err
		}
		cfg = got
		return nil
	})
	return cfg
}

// check returns every way the configuration departs from the scenario's meaning.
func (s scenario) check(cfg *envoy.Config, backends map[string]string, certPEM []byte) error {
	var errs []error
	errs = append(errs, listenerPerPort(cfg, s.ports))
	for _, rc := range s.requests {
		errs = append(errs, checkRequest(cfg, rc))
	}
	for port, backend := range s.tcp {
		errs = append(errs, checkTCP(cfg, port, backend, backends[backend]))
	}
	if certPEM != nil {
		errs = append(errs, checkCertificates(cfg, certPEM))
	}
	errs = append(errs, checkEndpoints(cfg, backends))
	errs = append(errs, checkBlackholeEmpty(cfg))
	// Fetch already refuses what Check reports (a route or TCP proxy naming a cluster
	// CDS did not send, ...); a scenario says so in its own words too.
	errs = append(errs, cfg.Check())
	return errors.Join(errs...)
}

func createCertificateSecret(t *testing.T, ns, name string) []byte {
	t.Helper()
	cert, key := testenv.SelfSigned(t, "secure.example.com")
	env.Create(t, testenv.TLSSecret(ns, name, cert, key))
	return cert
}

func compareGolden(t *testing.T, path string, cfg *envoy.Config, replace map[string]string) {
	t.Helper()
	got, err := envoy.Normalize(cfg, replace)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs from what Consul serves (-golden +served); after checking the change, run with -update:\n%s", path, diff)
	}
}
