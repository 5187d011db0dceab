package translate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

var update = flag.Bool("update", false, "rewrite the translation golden files in testdata")

// ---- fixtures ----

const testController = "example.com/gateway-controller"

var testOwnership = Ownership{Controller: testController, ClusterID: "test-cluster"}

// Placeholders: the translation copies Secret data, it never parses it.
const (
	certPEM = "-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n"
	keyPEM  = "-----BEGIN PRIVATE KEY-----\nTEST\n-----END PRIVATE KEY-----\n"
)

func uidOf(kind, ns, name string) types.UID {
	return types.UID(fmt.Sprintf("uid-%s-%s-%s", strings.ToLower(kind), ns, name))
}

func cond(condType string, status bool, reason string) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: condType, Status: s, Reason: reason, ObservedGeneration: 1}
}

// judgedListener is a listener and whether its confirmed status says it is valid.
type judgedListener struct {
	l     gatewayv1.Listener
	valid bool
}

func validListener(l gatewayv1.Listener) judgedListener   { return judgedListener{l, true} }
func invalidListener(l gatewayv1.Listener) judgedListener { return judgedListener{l, false} }

func httpListener(name string, port int32, host string) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType}
	if host != "" {
		l.Hostname = new(gatewayv1.Hostname(host))
	}
	return l
}

func httpsListener(name string, port int32, host string, certs ...gatewayv1.SecretObjectReference) gatewayv1.Listener {
	l := httpListener(name, port, host)
	l.Protocol = gatewayv1.HTTPSProtocolType
	l.TLS = &gatewayv1.ListenerTLSConfig{Mode: new(gatewayv1.TLSModeTerminate), CertificateRefs: certs}
	return l
}

func tcpListener(name string, port int32) gatewayv1.Listener {
	return gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.TCPProtocolType}
}

func certRef(ns, name string) gatewayv1.SecretObjectReference {
	ref := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(name)}
	if ns != "" {
		ref.Namespace = new(gatewayv1.Namespace(ns))
	}
	return ref
}

// confirmedGateway is a confirmed Gateway: status as the status pipeline writes it.
func confirmedGateway(ns, name string, accepted bool, listeners ...judgedListener) *gatewayv1.Gateway {
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidOf("Gateway", ns, name), Generation: 1},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "consul"},
	}
	reason := "Accepted"
	if !accepted {
		reason = "ListenersNotValid"
	}
	gw.Status.Conditions = []metav1.Condition{cond("Accepted", accepted, reason), cond("Programmed", false, "Pending")}
	for _, tl := range listeners {
		gw.Spec.Listeners = append(gw.Spec.Listeners, tl.l)
		conds := []metav1.Condition{
			cond("Accepted", true, "Accepted"), cond("Programmed", false, "Pending"),
			cond("ResolvedRefs", true, "ResolvedRefs"), cond("Conflicted", false, "NoConflicts"),
		}
		if !tl.valid {
			conds = []metav1.Condition{
				cond("Accepted", false, "UnsupportedProtocol"), cond("Programmed", false, "Invalid"),
				cond("ResolvedRefs", true, "ResolvedRefs"), cond("Conflicted", false, "NoConflicts"),
			}
		}
		gw.Status.Listeners = append(gw.Status.Listeners, gatewayv1.ListenerStatus{Name: tl.l.Name, Conditions: conds})
	}
	return gw
}

func tlsSecret(ns, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidOf("Secret", ns, name)},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte(certPEM), corev1.TLSPrivateKeyKey: []byte(keyPEM)},
	}
}

func backendService(ns, name string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidOf("Service", ns, name)}}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: p})
	}
	return svc
}

// backendRef is a backendRef to a Service; ns "" means the route's namespace, weight nil
// means unset.
func backendRef(ns, name string, port int32, weight *int32) gatewayv1.BackendRef {
	ref := gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: new(port)},
		Weight:                 weight,
	}
	if ns != "" {
		ref.Namespace = new(gatewayv1.Namespace(ns))
	}
	return ref
}

func httpBackend(ns, name string, port int32, weight *int32, filters ...gatewayv1.HTTPRouteFilter) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: backendRef(ns, name, port, weight), Filters: filters}
}

func prefixMatch(path string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new(path)}}
}

func ourRouteStatus(resolved bool) []gatewayv1.RouteParentStatus {
	reason := "ResolvedRefs"
	if !resolved {
		reason = "BackendNotFound"
	}
	return []gatewayv1.RouteParentStatus{
		// Another controller's entry says nothing about ours.
		{ControllerName: "other.example.com/controller", Conditions: []metav1.Condition{cond("ResolvedRefs", true, "ResolvedRefs")}},
		{ControllerName: testController, Conditions: []metav1.Condition{cond("Accepted", true, "Accepted"), cond("ResolvedRefs", resolved, reason)}},
	}
}

// confirmedHTTPRoute and confirmedTCPRoute are route fixtures of their own type, so a
// case can edit the route; snapshotOf files them as ConfirmedRoutes.
type confirmedHTTPRoute struct {
	Route    *gatewayv1.HTTPRoute
	Decision gwsync.RouteDecision
}

type confirmedTCPRoute struct {
	Route    *gatewayv1.TCPRoute
	Decision gwsync.RouteDecision
}

// newConfirmedHTTPRoute is a confirmed HTTPRoute whose references all resolved.
func newConfirmedHTTPRoute(ns, name string, hostnames []string, decision gwsync.RouteDecision, rules ...gatewayv1.HTTPRouteRule) confirmedHTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidOf("HTTPRoute", ns, name), Generation: 1}}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	r.Spec.Rules = rules
	r.Status.Parents = ourRouteStatus(true)
	return confirmedHTTPRoute{Route: r, Decision: decision}
}

func newConfirmedTCPRoute(ns, name string, decision gwsync.RouteDecision, refs ...gatewayv1.BackendRef) confirmedTCPRoute {
	r := &gatewayv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidOf("TCPRoute", ns, name), Generation: 1}}
	r.Spec.Rules = []gatewayv1.TCPRouteRule{{BackendRefs: refs}}
	r.Status.Parents = ourRouteStatus(true)
	return confirmedTCPRoute{Route: r, Decision: decision}
}

func attachedTo(attachments ...gwsync.Attachment) gwsync.RouteDecision {
	return gwsync.RouteDecision{Attachments: attachments}
}

func attachment(gwNamespace, gwName string, listeners ...string) gwsync.Attachment {
	a := gwsync.Attachment{Gateway: cache.ObjectName{Namespace: gwNamespace, Name: gwName}}
	for _, l := range listeners {
		a.Listeners = append(a.Listeners, gatewayv1.SectionName(l))
	}
	return a
}

// snapshotOf files objects into a snapshot.
func snapshotOf(objs ...any) Snapshot {
	s := NewSnapshot()
	for _, obj := range objs {
		switch o := obj.(type) {
		case *gatewayv1.Gateway:
			s.Gateways[cache.MetaObjectToName(o)] = o
		case confirmedHTTPRoute:
			s.Routes["HTTPRoute"][cache.MetaObjectToName(o.Route)] = ConfirmedRoute{Route: o.Route, Decision: o.Decision}
		case confirmedTCPRoute:
			s.Routes["TCPRoute"][cache.MetaObjectToName(o.Route)] = ConfirmedRoute{Route: o.Route, Decision: o.Decision}
		case *gatewayv1.ListenerSet:
			s.ListenerSets[cache.MetaObjectToName(o)] = o
		case *corev1.Secret:
			s.Secrets[cache.MetaObjectToName(o)] = o
		case *corev1.Service:
			s.Services[cache.MetaObjectToName(o)] = o
		default:
			panic(fmt.Sprintf("unexpected fixture %T", obj))
		}
	}
	return s
}

// ---- golden cases ----

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

func webRoute(name string, hostnames []string, a gwsync.Attachment) confirmedHTTPRoute {
	return newConfirmedHTTPRoute("apps", name, hostnames, attachedTo(a),
		gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}})
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

// checkConsul115Validation checks every entry against the validation Consul 1.15 applies
// (agent/structs config_entry_gateways.go, config_entry_routes.go) and the
// normalization it does on write, which must leave our entries unchanged, and checks
// the invariants the translation promises.
func checkConsul115Validation(t *testing.T, d Desired) {
	t.Helper()
	for key, e := range d.Entries {
		if KeyOf(e) != key {
			t.Errorf("entry under %v has key %v", key, KeyOf(e))
		}
		// The blackhole's service-defaults has no Kubernetes owner (see blackhole.go).
		objectOwned := e.GetMeta()[metaKind] != blackholeOwnerKind
		if e.GetMeta()[metaController] != testOwnership.Controller || (objectOwned && e.GetMeta()[metaUID] == "") {
			t.Errorf("%v: meta %v does not name its owner", key, e.GetMeta())
		}
		switch e := e.(type) {
		case *consulapi.APIGatewayConfigEntry:
			if len(e.Listeners) == 0 {
				t.Errorf("%v: api-gateway without listeners", key)
			}
			byPort := map[int]consulapi.APIGatewayListener{}
			for i, l := range e.Listeners {
				// Consul refuses two listeners of one name (validateListenerNames).
				if slices.ContainsFunc(e.Listeners[:i], func(o consulapi.APIGatewayListener) bool { return o.Name == l.Name }) {
					t.Errorf("%v: two listeners named %s", key, l.Name)
				}
				if l.Protocol != "http" && l.Protocol != "tcp" {
					t.Errorf("%v: listener %s protocol %q", key, l.Name, l.Protocol)
				}
				if l.Protocol == "tcp" && l.Hostname != "" {
					t.Errorf("%v: tcp listener %s has hostname", key, l.Name)
				}
				if other, ok := byPort[l.Port]; ok && (other.Hostname != l.Hostname || other.Protocol != l.Protocol) {
					t.Errorf("%v: listeners %s and %s cannot be merged", key, other.Name, l.Name)
				}
				byPort[l.Port] = l
				for _, c := range l.TLS.Certificates {
					if c.Kind != consulapi.InlineCertificate || c.Name == "" {
						t.Errorf("%v: certificate ref %+v", key, c)
					}
					if _, ok := d.Entries[EntryKey{Kind: c.Kind, Name: c.Name, Namespace: c.Namespace, Partition: c.Partition}]; !ok {
						t.Errorf("%v: certificate %+v is not written", key, c)
					}
				}
			}
		case *consulapi.HTTPRouteConfigEntry:
			for _, h := range e.Hostnames {
				if strings.Contains(h, "*") {
					t.Errorf("%v: wildcard hostname %q", key, h)
				}
			}
			checkParents(t, d, key, e.Parents, "http")
			if len(e.Rules) == 0 {
				t.Errorf("%v: no rules", key)
			}
			for _, r := range e.Rules {
				if len(r.Matches) == 0 || len(r.Services) == 0 {
					t.Errorf("%v: rule without matches or services: %+v", key, r)
				}
				for _, m := range r.Matches {
					if m.Path.Match == "" {
						t.Errorf("%v: path match not written in full", key)
					}
					if m.Path.Match != consulapi.HTTPPathMatchRegularExpression && !strings.HasPrefix(m.Path.Value, "/") {
						t.Errorf("%v: path %q", key, m.Path.Value)
					}
				}
				for _, s := range r.Services {
					if s.Weight <= 0 {
						t.Errorf("%v: service %s weight %d", key, s.Name, s.Weight)
					}
				}
			}
		case *consulapi.TCPRouteConfigEntry:
			checkParents(t, d, key, e.Parents, "tcp")
			if len(e.Services) != 1 {
				t.Errorf("%v: %d services", key, len(e.Services))
			}
		case *consulapi.InlineCertificateConfigEntry:
			if e.Certificate == "" || e.PrivateKey == "" {
				t.Errorf("%v: empty certificate", key)
			}
		case *consulapi.ServiceConfigEntry:
			if e.Protocol != "http" {
				t.Errorf("%v: protocol %q", key, e.Protocol)
			}
		default:
			t.Errorf("%v: unexpected entry %T", key, e)
		}
	}
}

// checkParents: parents are unique, name a written listener of the route's protocol.
func checkParents(t *testing.T, d Desired, key EntryKey, parents []consulapi.ResourceReference, protocol string) {
	t.Helper()
	if len(parents) == 0 {
		t.Errorf("%v: no parents", key)
	}
	for i, p := range parents {
		if slices.Contains(parents[:i], p) {
			t.Errorf("%v: duplicate parent %+v", key, p)
		}
		gw, ok := d.Entries[EntryKey{Kind: consulapi.APIGateway, Name: p.Name, Namespace: p.Namespace, Partition: p.Partition}].(*consulapi.APIGatewayConfigEntry)
		if p.Kind != consulapi.APIGateway || !ok {
			t.Errorf("%v: parent %+v is not a written api-gateway", key, p)
			continue
		}
		if !slices.ContainsFunc(gw.Listeners, func(l consulapi.APIGatewayListener) bool { return l.Name == p.SectionName && l.Protocol == protocol }) {
			t.Errorf("%v: parent %+v names no %s listener", key, p, protocol)
		}
	}
}

// ---- determinism ----

func TestTranslateDeterministic(t *testing.T) {
	cases := append(translationCases(), translationCase{
		// Objects that share entries: with one destination namespace the Services
		// apps/web and other/web are one Consul service, and two Gateways use one
		// Secret. The first in sorted order owns a shared entry, whatever the order.
		name:   "shared entries",
		naming: Naming{DestinationNamespace: "k8s"},
		opts:   Options{ManageServiceDefaults: true},
		objects: []any{
			confirmedGateway("infra", "a", true, validListener(httpsListener("https", 443, "", certRef("certs", "tls")))),
			confirmedGateway("infra", "b", true, validListener(httpsListener("https", 443, "", certRef("certs", "tls"))), validListener(httpListener("http", 80, ""))),
			tlsSecret("certs", "tls"),
			backendService("apps", "web", 8080),
			backendService("other", "web", 8080),
			newConfirmedHTTPRoute("apps", "r", nil, attachedTo(attachment("infra", "a", "https"), attachment("infra", "b", "https", "http")),
				gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}}),
			newConfirmedHTTPRoute("other", "r", nil, attachedTo(attachment("infra", "b", "http")),
				gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}}),
		},
	})
	for _, tc := range cases {
		first := Translate(snapshotOf(tc.objects...), tc.naming, testOwnership, tc.opts)
		want := goldenForm(t, first)
		for i := range 30 {
			// A fresh snapshot each time: fresh maps, filled in another order.
			objs := slices.Clone(tc.objects)
			if i%2 == 1 {
				slices.Reverse(objs)
			}
			d := Translate(snapshotOf(objs...), tc.naming, testOwnership, tc.opts)
			if got := goldenForm(t, d); !bytes.Equal(got, want) {
				t.Fatalf("%s: run %d differs:\n%s", tc.name, i, gocmp.Diff(string(want), string(got)))
			}
			if diff := gocmp.Diff(first, d); diff != "" {
				t.Fatalf("%s: run %d differs (-first +run):\n%s", tc.name, i, diff)
			}
		}
		if tc.name == "shared entries" {
			sd := first.Entries[EntryKey{Kind: consulapi.ServiceDefaults, Name: "web", Namespace: "k8s"}]
			if sd == nil || sd.GetMeta()[metaNamespace] != "apps" {
				t.Errorf("shared service-defaults: %+v", sd)
			}
			// 2 api-gateways, 1 certificate, 2 http-routes, 1 service-defaults.
			if n := len(first.Entries); n != 6 {
				t.Errorf("shared entries: %d entries, want 6", n)
			}
		}
	}
}

// TestTranslateDoesNotModifySnapshot: the snapshot is shared with the syncer.
func TestTranslateDoesNotModifySnapshot(t *testing.T) {
	for _, tc := range translationCases() {
		s := snapshotOf(tc.objects...)
		before := snapshotOf(tc.objects...)
		for k, gw := range before.Gateways {
			before.Gateways[k] = gw.DeepCopy()
		}
		for _, routes := range before.Routes {
			for k, r := range routes {
				routes[k] = ConfirmedRoute{Route: r.Route.DeepCopyObject().(gatewayapi.Object), Decision: r.Decision}
			}
		}
		Translate(s, tc.naming, testOwnership, tc.opts)
		if diff := gocmp.Diff(before.Gateways, s.Gateways); diff != "" {
			t.Errorf("%s: Gateways modified:\n%s", tc.name, diff)
		}
		if diff := gocmp.Diff(before.Routes, s.Routes); diff != "" {
			t.Errorf("%s: routes modified:\n%s", tc.name, diff)
		}
	}
}

func TestTranslateEmpty(t *testing.T) {
	d := Translate(Snapshot{}, Naming{}, testOwnership, Options{ManageServiceDefaults: true})
	if len(d.Entries) != 0 || len(d.Problems) != 0 || d.Entries == nil {
		t.Errorf("empty snapshot: %+v", d)
	}
}

// ---- helpers ----

func TestSortProblems(t *testing.T) {
	a := cache.ObjectName{Namespace: "a", Name: "x"}
	b := cache.ObjectName{Namespace: "b", Name: "x"}
	got := sortProblems([]Problem{
		{"TCPRoute", a, "m"}, {"Gateway", b, "m"}, {"Gateway", a, "z"}, {"Gateway", a, "m"}, {"Gateway", a, "m"},
	})
	want := []Problem{{"Gateway", a, "m"}, {"Gateway", a, "z"}, {"Gateway", b, "m"}, {"TCPRoute", a, "m"}}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}
