package translate

import (
	"cmp"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

var update = flag.Bool("update", false, "rewrite the translation golden files in testdata")

type translationCase struct {
	name    string
	naming  Naming
	opts    Options
	objects []any
}

func translationCases() []translationCase {
	return []translationCase{
		{
			// http, https (two certificates, one shared from another namespace) and tcp
			// are written; the UDP listener and the second listener on port 80 are not
			// valid per status and are left out without a problem.
			name: "gateway_listeners",
			objects: []any{
				confirmedGateway("infra", "gw", true,
					validListener(httpListener("http", 80, "*.example.com")),
					validListener(httpsListener("https", 443, "secure.example.com", certRef("", "tls-a"), certRef("certs", "tls-shared"))),
					validListener(gatewayv1.Listener{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType, Hostname: new(gatewayv1.Hostname("db.example.com"))}),
					invalidListener(gatewayv1.Listener{Name: "dns", Port: 53, Protocol: gatewayv1.UDPProtocolType}),
					invalidListener(httpListener("http-other", 80, "other.example.com")),
				),
				tlsSecret("infra", "tls-a"),
				tlsSecret("certs", "tls-shared"),
			},
		},
		{
			// Not accepted: nothing is written. A route accepted nowhere has no
			// attachments and no problem either.
			name: "gateway_not_accepted",
			objects: []any{
				confirmedGateway("infra", "gw", false, validListener(httpListener("http", 80, ""))),
				newConfirmedHTTPRoute("apps", "orphan", nil, gwsync.RouteDecision{},
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}}),
				backendService("apps", "web", 8080),
			},
		},
		{
			// Attached to two listeners of one Gateway; rule 1 was dropped by the status
			// pipeline: its requests go to the blackhole.
			name: "route_two_listeners_dropped_rule",
			objects: []any{
				confirmedGateway("infra", "gw", true,
					validListener(httpListener("http", 80, "")),
					validListener(httpsListener("https", 443, "app.example.com", certRef("", "tls")))),
				tlsSecret("infra", "tls"),
				backendService("apps", "api", 8080),
				backendService("apps", "web", 8080),
				backendService("apps", "mirror", 8080),
				newConfirmedHTTPRoute("apps", "app", []string{"app.example.com"},
					gwsync.RouteDecision{Attachments: []gwsync.Attachment{attachment("infra", "gw", "http", "https")}, DroppedRules: []int{1}},
					gatewayv1.HTTPRouteRule{
						Matches:     []gatewayv1.HTTPRouteMatch{prefixMatch("/api")},
						BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "api", 8080, nil)},
					},
					gatewayv1.HTTPRouteRule{
						Matches: []gatewayv1.HTTPRouteMatch{prefixMatch("/mirror")},
						Filters: []gatewayv1.HTTPRouteFilter{{
							Type:          gatewayv1.HTTPRouteFilterRequestMirror,
							RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: backendRef("", "mirror", 8080, nil).BackendObjectReference},
						}},
						BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)},
					},
					gatewayv1.HTTPRouteRule{
						BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)},
					},
				),
			},
		},
		{
			name: "http_matches_filters",
			objects: []any{
				confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, ""))),
				backendService("apps", "web", 8080),
				backendService("apps", "legacy", 8080),
				backendService("apps", "v2", 8080),
				newConfirmedHTTPRoute("apps", "matches", nil, attachedTo(attachment("apps", "gw", "http")),
					// Every match kind, and request header modification on the rule.
					gatewayv1.HTTPRouteRule{
						Matches: []gatewayv1.HTTPRouteMatch{
							{
								Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchExact), Value: new("/exact")},
								Headers: []gatewayv1.HTTPHeaderMatch{
									{Name: "x-exact-default", Value: "a"},
									{Type: new(gatewayv1.HeaderMatchExact), Name: "x-exact", Value: "b"},
									{Type: new(gatewayv1.HeaderMatchRegularExpression), Name: "x-regex", Value: "^v[0-9]+$"},
								},
								QueryParams: []gatewayv1.HTTPQueryParamMatch{
									{Name: "exact-default", Value: "1"},
									{Type: new(gatewayv1.QueryParamMatchExact), Name: "exact", Value: "2"},
									{Type: new(gatewayv1.QueryParamMatchRegularExpression), Name: "regex", Value: "[a-z]+"},
								},
								Method: new(gatewayv1.HTTPMethodGet),
							},
							{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new("/prefix")}, Method: new(gatewayv1.HTTPMethodPost)},
							{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchRegularExpression), Value: new("^/re/[0-9]+$")}},
							// No path: the CRD default, PathPrefix "/".
							{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-only-header", Value: "yes"}}},
						},
						Filters: []gatewayv1.HTTPRouteFilter{{
							Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
							RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{
								Set:    []gatewayv1.HTTPHeader{{Name: "x-set", Value: "s"}, {Name: "x-set-2", Value: "s2"}},
								Add:    []gatewayv1.HTTPHeader{{Name: "x-add", Value: "a"}},
								Remove: []string{"x-remove", "x-remove-2"},
							},
						}},
						BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)},
					},
					// Rule-level prefix rewrite; header modification on the backend.
					gatewayv1.HTTPRouteRule{
						Matches: []gatewayv1.HTTPRouteMatch{prefixMatch("/old")},
						Filters: []gatewayv1.HTTPRouteFilter{{
							Type:       gatewayv1.HTTPRouteFilterURLRewrite,
							URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: new("/new")}},
						}},
						BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "legacy", 8080, nil, gatewayv1.HTTPRouteFilter{
							Type:                  gatewayv1.HTTPRouteFilterRequestHeaderModifier,
							RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "x-backend", Value: "legacy"}}},
						})},
					},
					// No matches (every request); backend-level rewrite and headers.
					gatewayv1.HTTPRouteRule{
						BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "v2", 8080, nil,
							gatewayv1.HTTPRouteFilter{
								Type:       gatewayv1.HTTPRouteFilterURLRewrite,
								URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: new("/v2")}},
							},
							gatewayv1.HTTPRouteFilter{
								Type:                  gatewayv1.HTTPRouteFilterRequestHeaderModifier,
								RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Add: []gatewayv1.HTTPHeader{{Name: "x-version", Value: "2"}}, Remove: []string{"x-debug"}},
							},
						)},
					},
				),
			},
		},
		{
			// Weights pass through; the weight-0 backend is left out (Consul would make
			// it 1), an unset weight is 1.
			name: "weighted_backends",
			objects: []any{
				confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, ""))),
				backendService("apps", "stable", 8080),
				backendService("apps", "canary", 8080),
				backendService("apps", "drained", 8080),
				backendService("apps", "default-weight", 8080),
				newConfirmedHTTPRoute("apps", "split", nil, attachedTo(attachment("apps", "gw", "http")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{
						httpBackend("", "stable", 8080, new(int32(90))),
						httpBackend("", "canary", 8080, new(int32(10))),
						httpBackend("", "drained", 8080, new(int32(0))),
						httpBackend("", "default-weight", 8080, nil),
					}},
				),
			},
		},
		{
			// Backends that cannot receive traffic, as the decision and the snapshot
			// say. Rule 0 keeps its valid backend and sends the missing one's share to
			// the blackhole. Rules 1, 2 and 3 have no backend left: their requests go
			// to the blackhole. Rule 3 shows each kind of unusable ref.
			name: "invalid_backends",
			objects: []any{
				confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, ""))),
				backendService("apps", "web", 8080),
				&corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "external", UID: "uid-service-apps-external"},
					Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.org", Ports: []corev1.ServicePort{{Port: 80}}},
				},
				func() confirmedHTTPRoute {
					c := newConfirmedHTTPRoute("apps", "broken", nil, attachedTo(attachment("apps", "gw", "http")),
						gatewayv1.HTTPRouteRule{
							Matches: []gatewayv1.HTTPRouteMatch{prefixMatch("/partial")},
							BackendRefs: []gatewayv1.HTTPBackendRef{
								httpBackend("", "web", 8080, new(int32(1))),
								httpBackend("", "missing", 8080, new(int32(1))),
							},
						},
						gatewayv1.HTTPRouteRule{
							Matches:     []gatewayv1.HTTPRouteMatch{prefixMatch("/none")},
							BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "missing", 8080, nil)},
						},
						gatewayv1.HTTPRouteRule{
							// No backendRefs at all: Gateway API answers 500.
							Matches: []gatewayv1.HTTPRouteMatch{prefixMatch("/empty")},
							Filters: []gatewayv1.HTTPRouteFilter{{
								Type:                  gatewayv1.HTTPRouteFilterRequestHeaderModifier,
								RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Remove: []string{"x"}},
							}},
						},
						gatewayv1.HTTPRouteRule{
							Matches: []gatewayv1.HTTPRouteMatch{prefixMatch("/kinds")},
							BackendRefs: []gatewayv1.HTTPBackendRef{
								{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
									Group: new(gatewayv1.Group("example.com")), Kind: new(gatewayv1.Kind("Bucket")), Name: "bucket",
								}}},
								httpBackend("", "external", 80, nil),
								httpBackend("", "web", 9999, nil),
								httpBackend("", "web", 8080, new(int32(0))),
							},
						},
					)
					c.Route.Status.Parents = ourRouteStatus(false)
					c.Decision.UnresolvedBackends = []gwsync.BackendRefIndex{{Rule: 0, Ref: 1}, {Rule: 1, Ref: 0}, {Rule: 3, Ref: 0}, {Rule: 3, Ref: 1}, {Rule: 3, Ref: 2}}
					return c
				}(),
				// A Service the snapshot holds but the decision did not resolve: the
				// decision is newer than the snapshot's Services, or the other way round;
				// either way no traffic.
				func() confirmedHTTPRoute {
					c := newConfirmedHTTPRoute("apps", "undecided", []string{"undecided.example.com"}, attachedTo(attachment("apps", "gw", "http")),
						gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}})
					c.Route.Status.Parents = ourRouteStatus(false)
					c.Decision.UnresolvedBackends = []gwsync.BackendRefIndex{{Rule: 0, Ref: 0}}
					return c
				}(),
			},
		},
		{
			// A Service in another namespace is written where the decision says its
			// backendRef resolved (a ReferenceGrant allows it), even when another
			// backendRef of the route did not (ResolvedRefs False); one the decision
			// did not resolve gets the blackhole.
			name: "cross_namespace_backend",
			objects: []any{
				confirmedGateway("infra", "gw", true, validListener(func() gatewayv1.Listener {
					l := httpListener("http", 80, "")
					l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: new(gatewayv1.NamespacesFromAll)}}
					return l
				}())),
				backendService("backends", "api", 8080),
				backendService("backends", "secret", 8080),
				backendService("apps", "web", 8080),
				newConfirmedHTTPRoute("apps", "granted", nil, attachedTo(attachment("infra", "gw", "http")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("backends", "api", 8080, nil)}}),
				func() confirmedHTTPRoute {
					c := newConfirmedHTTPRoute("apps", "unresolved", nil, attachedTo(attachment("infra", "gw", "http")),
						gatewayv1.HTTPRouteRule{
							Matches:     []gatewayv1.HTTPRouteMatch{prefixMatch("/api")},
							BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("backends", "api", 8080, nil)},
						},
						gatewayv1.HTTPRouteRule{
							Matches:     []gatewayv1.HTTPRouteMatch{prefixMatch("/secret")},
							BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("backends", "secret", 8080, nil)},
						},
						gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil), httpBackend("", "gone", 8080, nil)}},
					)
					c.Route.Status.Parents = ourRouteStatus(false)
					c.Decision.UnresolvedBackends = []gwsync.BackendRefIndex{{Rule: 1, Ref: 0}, {Rule: 2, Ref: 1}}
					return c
				}(),
			},
		},
		{
			// The weight-0 backendRef of "db" receives no connections and is not
			// counted; "broken" names a missing Service and is left out.
			name: "tcp_route",
			objects: []any{
				confirmedGateway("infra", "gw", true, validListener(tcpListener("postgres", 5432)), validListener(tcpListener("redis", 6379))),
				backendService("data", "postgres", 5432),
				backendService("data", "postgres-old", 5432),
				newConfirmedTCPRoute("data", "db", attachedTo(attachment("infra", "gw", "postgres")),
					backendRef("", "postgres-old", 5432, new(int32(0))),
					backendRef("", "postgres", 5432, nil)),
				func() confirmedTCPRoute {
					c := newConfirmedTCPRoute("data", "broken", attachedTo(attachment("infra", "gw", "redis")), backendRef("", "redis", 6379, nil))
					c.Route.Status.Parents = ourRouteStatus(false)
					return c
				}(),
			},
		},
		{
			// Consul Enterprise: entries in the mirrored namespace (with prefix) of their
			// object, certificates in their Secret's, everything in the partition.
			name:   "enterprise_mirroring",
			naming: Naming{Prefix: "k8s-", Partition: "team-a", MirrorNamespaces: true, MirrorPrefix: "kube-"},
			opts:   Options{ManageServiceDefaults: true},
			objects: []any{
				confirmedGateway("infra", "gw", true,
					validListener(httpsListener("https", 443, "", certRef("certs", "wildcard"))),
					validListener(tcpListener("tcp", 9000))),
				tlsSecret("certs", "wildcard"),
				backendService("backends", "api", 8080),
				backendService("apps", "queue", 9000),
				newConfirmedHTTPRoute("apps", "web", []string{"www.example.com"}, attachedTo(attachment("infra", "gw", "https")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("backends", "api", 8080, nil)}}),
				newConfirmedTCPRoute("apps", "queue", attachedTo(attachment("infra", "gw", "tcp")), backendRef("", "queue", 9000, nil)),
			},
		},
		{
			// One service-defaults per backend Service that an http-route sends traffic
			// to: not for the weight-0 one or a tcp-route's.
			name: "service_defaults",
			opts: Options{ManageServiceDefaults: true},
			objects: []any{
				confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, "")), validListener(tcpListener("tcp", 9000))),
				backendService("apps", "web", 8080),
				backendService("apps", "api", 8080),
				backendService("apps", "drained", 8080),
				backendService("apps", "queue", 9000),
				newConfirmedHTTPRoute("apps", "one", nil, attachedTo(attachment("apps", "gw", "http")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil), httpBackend("", "drained", 8080, new(int32(0)))}}),
				newConfirmedHTTPRoute("apps", "two", []string{"two.example.com"}, attachedTo(attachment("apps", "gw", "http")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil), httpBackend("", "api", 8080, nil)}}),
				newConfirmedTCPRoute("apps", "queue", attachedTo(attachment("apps", "gw", "tcp")), backendRef("", "queue", 9000, nil)),
				// web is http now: Consul 1.15 refuses a tcp-route to it.
				newConfirmedTCPRoute("apps", "web-tcp", attachedTo(attachment("apps", "gw", "tcp")), backendRef("", "web", 8080, nil)),
			},
		},
		{
			// The status said the Secrets resolved, but the cache no longer has them:
			// "partial" keeps its http listener, "tls-only" has none left. The route on
			// the missing listener has nowhere to go.
			name: "missing_secret",
			objects: []any{
				confirmedGateway("infra", "partial", true,
					validListener(httpListener("http", 80, "")),
					validListener(httpsListener("https", 443, "", certRef("", "present"), certRef("", "gone")))),
				confirmedGateway("infra", "tls-only", true, validListener(httpsListener("https", 443, "", certRef("", "gone")))),
				tlsSecret("infra", "present"),
				backendService("infra", "web", 8080),
				newConfirmedHTTPRoute("infra", "secure", nil, attachedTo(attachment("infra", "tls-only", "https")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}}),
				newConfirmedHTTPRoute("infra", "both", nil, attachedTo(attachment("infra", "partial", "http", "https")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}}),
			},
		},
		{
			// Consul 1.15 takes no wildcard route hostnames. See routeHostnames.
			name: "wildcard_hostnames",
			objects: []any{
				confirmedGateway("infra", "gw", true,
					validListener(httpListener("wild", 8080, "*.example.com")),
					validListener(httpListener("foo", 8081, "foo.example.com")),
					validListener(httpListener("any", 8082, "")),
					validListener(httpListener("shop", 8083, "shop.other.com"))),
				backendService("apps", "web", 8080),
				// Same wildcard as the listener: the entry has no hostnames, Consul serves
				// the listener's "*.example.com".
				webRoute("same-wildcard", []string{"*.example.com"}, attachment("infra", "gw", "wild")),
				// A wildcard on a more specific listener: that listener's hostname.
				webRoute("narrowed", []string{"*.example.com"}, attachment("infra", "gw", "foo")),
				// A wildcard on a listener for any hostname: Consul cannot express it.
				webRoute("unexpressible", []string{"*.example.com"}, attachment("infra", "gw", "any")),
				// "example.com" does not intersect "*.example.com" and is left out; Consul's
				// suffix filter would serve it.
				webRoute("concrete", []string{"a.example.com", "example.com"}, attachment("infra", "gw", "wild")),
				// Wildcard plus a concrete hostname, each matching one listener exactly.
				webRoute("mixed", []string{"*.example.com", "shop.other.com"}, attachment("infra", "gw", "wild", "shop")),
				// Served on "wild" as the listener's own wildcard; not expressible on "any".
				webRoute("partly", []string{"*.example.com"}, attachment("infra", "gw", "wild", "any")),
			},
		},
	}
}

// goldenForm is the golden form of a translation: entries sorted by kind, partition,
// namespace and name, then the problems.
func goldenForm(t *testing.T, d Desired) []byte {
	t.Helper()
	type entry struct {
		Kind, Partition, Namespace, Name string
		Entry                            consulapi.ConfigEntry
	}
	out := struct {
		Entries  []entry
		Problems []Problem
	}{Entries: []entry{}, Problems: d.Problems}
	if out.Problems == nil {
		out.Problems = []Problem{}
	}
	for k, e := range d.Entries {
		out.Entries = append(out.Entries, entry{k.Kind, k.Partition, k.Namespace, k.Name, e})
	}
	slices.SortFunc(out.Entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestTranslateGolden(t *testing.T) {
	for _, tc := range translationCases() {
		t.Run(tc.name, func(t *testing.T) {
			d := Translate(snapshotOf(tc.objects...), tc.naming, testOwnership, tc.opts)
			checkConsul115Validation(t, d)
			got := goldenForm(t, d)
			path := filepath.Join("testdata", tc.name+".golden.json")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./consul -run TestTranslateGolden -update to create it)", err)
			}
			if diff := gocmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("translation differs from %s (-want +got):\n%s", path, diff)
			}
		})
	}
}
