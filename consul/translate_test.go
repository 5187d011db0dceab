package consul

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

const trController = "example.com/gateway-controller"

var trOwnership = Ownership{Controller: trController, ClusterID: "test-cluster"}

// Placeholders: the translation copies Secret data, it never parses it.
const (
	trCertPEM = "-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n"
	trKeyPEM  = "-----BEGIN PRIVATE KEY-----\nTEST\n-----END PRIVATE KEY-----\n"
)

func trPtr[T any](v T) *T { return &v }

func trUID(kind, ns, name string) types.UID {
	return types.UID(fmt.Sprintf("uid-%s-%s-%s", strings.ToLower(kind), ns, name))
}

func trCond(condType string, status bool, reason string) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: condType, Status: s, Reason: reason, ObservedGeneration: 1}
}

// trListener is a listener and whether its confirmed status says it is valid.
type trListener struct {
	l     gatewayv1.Listener
	valid bool
}

func trValid(l gatewayv1.Listener) trListener   { return trListener{l, true} }
func trInvalid(l gatewayv1.Listener) trListener { return trListener{l, false} }

func trHTTP(name string, port int32, host string) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType}
	if host != "" {
		l.Hostname = trPtr(gatewayv1.Hostname(host))
	}
	return l
}

func trHTTPS(name string, port int32, host string, certs ...gatewayv1.SecretObjectReference) gatewayv1.Listener {
	l := trHTTP(name, port, host)
	l.Protocol = gatewayv1.HTTPSProtocolType
	l.TLS = &gatewayv1.ListenerTLSConfig{Mode: trPtr(gatewayv1.TLSModeTerminate), CertificateRefs: certs}
	return l
}

func trTCP(name string, port int32) gatewayv1.Listener {
	return gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.TCPProtocolType}
}

func trCertRef(ns, name string) gatewayv1.SecretObjectReference {
	ref := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(name)}
	if ns != "" {
		ref.Namespace = trPtr(gatewayv1.Namespace(ns))
	}
	return ref
}

// trGateway is a confirmed Gateway: status as the status pipeline writes it.
func trGateway(ns, name string, accepted bool, listeners ...trListener) *gatewayv1.Gateway {
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: trUID("Gateway", ns, name), Generation: 1},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "consul"},
	}
	reason := "Accepted"
	if !accepted {
		reason = "ListenersNotValid"
	}
	gw.Status.Conditions = []metav1.Condition{trCond("Accepted", accepted, reason), trCond("Programmed", false, "Pending")}
	for _, tl := range listeners {
		gw.Spec.Listeners = append(gw.Spec.Listeners, tl.l)
		conds := []metav1.Condition{
			trCond("Accepted", true, "Accepted"), trCond("Programmed", false, "Pending"),
			trCond("ResolvedRefs", true, "ResolvedRefs"), trCond("Conflicted", false, "NoConflicts"),
		}
		if !tl.valid {
			conds = []metav1.Condition{
				trCond("Accepted", false, "UnsupportedProtocol"), trCond("Programmed", false, "Invalid"),
				trCond("ResolvedRefs", true, "ResolvedRefs"), trCond("Conflicted", false, "NoConflicts"),
			}
		}
		gw.Status.Listeners = append(gw.Status.Listeners, gatewayv1.ListenerStatus{Name: tl.l.Name, Conditions: conds})
	}
	return gw
}

func trSecret(ns, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: trUID("Secret", ns, name)},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte(trCertPEM), corev1.TLSPrivateKeyKey: []byte(trKeyPEM)},
	}
}

func trService(ns, name string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: trUID("Service", ns, name)}}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: p})
	}
	return svc
}

// trRef is a backendRef to a Service; ns "" means the route's namespace, weight nil
// means unset.
func trRef(ns, name string, port int32, weight *int32) gatewayv1.BackendRef {
	ref := gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: trPtr(port)},
		Weight:                 weight,
	}
	if ns != "" {
		ref.Namespace = trPtr(gatewayv1.Namespace(ns))
	}
	return ref
}

func trHTTPRef(ns, name string, port int32, weight *int32, filters ...gatewayv1.HTTPRouteFilter) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: trRef(ns, name, port, weight), Filters: filters}
}

func trPrefix(path string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: trPtr(gatewayv1.PathMatchPathPrefix), Value: trPtr(path)}}
}

func trRouteStatus(resolved bool) []gatewayv1.RouteParentStatus {
	reason := "ResolvedRefs"
	if !resolved {
		reason = "BackendNotFound"
	}
	return []gatewayv1.RouteParentStatus{
		// Another controller's entry says nothing about ours.
		{ControllerName: "other.example.com/controller", Conditions: []metav1.Condition{trCond("ResolvedRefs", true, "ResolvedRefs")}},
		{ControllerName: trController, Conditions: []metav1.Condition{trCond("Accepted", true, "Accepted"), trCond("ResolvedRefs", resolved, reason)}},
	}
}

// confirmedHTTPRoute and confirmedTCPRoute are route fixtures of their own type, so a
// case can edit the route; trSnapshot files them as ConfirmedRoutes.
type confirmedHTTPRoute struct {
	Route    *gatewayv1.HTTPRoute
	Decision gwsync.RouteDecision
}

type confirmedTCPRoute struct {
	Route    *gatewayv1.TCPRoute
	Decision gwsync.RouteDecision
}

// trHTTPRoute is a confirmed HTTPRoute whose references all resolved.
func trHTTPRoute(ns, name string, hostnames []string, decision gwsync.RouteDecision, rules ...gatewayv1.HTTPRouteRule) confirmedHTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: trUID("HTTPRoute", ns, name), Generation: 1}}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	r.Spec.Rules = rules
	r.Status.Parents = trRouteStatus(true)
	return confirmedHTTPRoute{Route: r, Decision: decision}
}

func trTCPRoute(ns, name string, decision gwsync.RouteDecision, refs ...gatewayv1.BackendRef) confirmedTCPRoute {
	r := &gatewayv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: trUID("TCPRoute", ns, name), Generation: 1}}
	r.Spec.Rules = []gatewayv1.TCPRouteRule{{BackendRefs: refs}}
	r.Status.Parents = trRouteStatus(true)
	return confirmedTCPRoute{Route: r, Decision: decision}
}

func trAttached(attachments ...gwsync.Attachment) gwsync.RouteDecision {
	return gwsync.RouteDecision{Attachments: attachments}
}

func trAttach(gwNamespace, gwName string, listeners ...string) gwsync.Attachment {
	a := gwsync.Attachment{Gateway: cache.ObjectName{Namespace: gwNamespace, Name: gwName}}
	for _, l := range listeners {
		a.Listeners = append(a.Listeners, gatewayv1.SectionName(l))
	}
	return a
}

// trSnapshot files objects into a snapshot.
func trSnapshot(objs ...any) Snapshot {
	s := emptySnapshot()
	for _, obj := range objs {
		switch o := obj.(type) {
		case *gatewayv1.Gateway:
			s.Gateways[cache.MetaObjectToName(o)] = o
		case confirmedHTTPRoute:
			s.Routes["HTTPRoute"][cache.MetaObjectToName(o.Route)] = ConfirmedRoute{Route: o.Route, Decision: o.Decision}
		case confirmedTCPRoute:
			s.Routes["TCPRoute"][cache.MetaObjectToName(o.Route)] = ConfirmedRoute{Route: o.Route, Decision: o.Decision}
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

type trCase struct {
	name    string
	naming  Naming
	opts    Options
	objects []any
}

func trCases() []trCase {
	return []trCase{
		{
			// http, https (two certificates, one shared from another namespace) and tcp
			// are written; the UDP listener and the second listener on port 80 are not
			// valid per status and are left out without a problem.
			name: "gateway_listeners",
			objects: []any{
				trGateway("infra", "gw", true,
					trValid(trHTTP("http", 80, "*.example.com")),
					trValid(trHTTPS("https", 443, "secure.example.com", trCertRef("", "tls-a"), trCertRef("certs", "tls-shared"))),
					trValid(gatewayv1.Listener{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType, Hostname: trPtr(gatewayv1.Hostname("db.example.com"))}),
					trInvalid(gatewayv1.Listener{Name: "dns", Port: 53, Protocol: gatewayv1.UDPProtocolType}),
					trInvalid(trHTTP("http-other", 80, "other.example.com")),
				),
				trSecret("infra", "tls-a"),
				trSecret("certs", "tls-shared"),
			},
		},
		{
			// Not accepted: nothing is written. A route accepted nowhere has no
			// attachments and no problem either.
			name: "gateway_not_accepted",
			objects: []any{
				trGateway("infra", "gw", false, trValid(trHTTP("http", 80, ""))),
				trHTTPRoute("apps", "orphan", nil, gwsync.RouteDecision{},
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil)}}),
				trService("apps", "web", 8080),
			},
		},
		{
			// Attached to two listeners of one Gateway; rule 1 was dropped by the status
			// pipeline and is not written.
			name: "route_two_listeners_dropped_rule",
			objects: []any{
				trGateway("infra", "gw", true,
					trValid(trHTTP("http", 80, "")),
					trValid(trHTTPS("https", 443, "app.example.com", trCertRef("", "tls")))),
				trSecret("infra", "tls"),
				trService("apps", "api", 8080),
				trService("apps", "web", 8080),
				trService("apps", "mirror", 8080),
				trHTTPRoute("apps", "app", []string{"app.example.com"},
					gwsync.RouteDecision{Attachments: []gwsync.Attachment{trAttach("infra", "gw", "http", "https")}, DroppedRules: []int{1}},
					gatewayv1.HTTPRouteRule{
						Matches:     []gatewayv1.HTTPRouteMatch{trPrefix("/api")},
						BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "api", 8080, nil)},
					},
					gatewayv1.HTTPRouteRule{
						Matches: []gatewayv1.HTTPRouteMatch{trPrefix("/mirror")},
						Filters: []gatewayv1.HTTPRouteFilter{{
							Type:          gatewayv1.HTTPRouteFilterRequestMirror,
							RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: trRef("", "mirror", 8080, nil).BackendObjectReference},
						}},
						BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil)},
					},
					gatewayv1.HTTPRouteRule{
						BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil)},
					},
				),
			},
		},
		{
			name: "http_matches_filters",
			objects: []any{
				trGateway("apps", "gw", true, trValid(trHTTP("http", 80, ""))),
				trService("apps", "web", 8080),
				trService("apps", "legacy", 8080),
				trService("apps", "v2", 8080),
				trHTTPRoute("apps", "matches", nil, trAttached(trAttach("apps", "gw", "http")),
					// Every match kind, and request header modification on the rule.
					gatewayv1.HTTPRouteRule{
						Matches: []gatewayv1.HTTPRouteMatch{
							{
								Path: &gatewayv1.HTTPPathMatch{Type: trPtr(gatewayv1.PathMatchExact), Value: trPtr("/exact")},
								Headers: []gatewayv1.HTTPHeaderMatch{
									{Name: "x-exact-default", Value: "a"},
									{Type: trPtr(gatewayv1.HeaderMatchExact), Name: "x-exact", Value: "b"},
									{Type: trPtr(gatewayv1.HeaderMatchRegularExpression), Name: "x-regex", Value: "^v[0-9]+$"},
								},
								QueryParams: []gatewayv1.HTTPQueryParamMatch{
									{Name: "exact-default", Value: "1"},
									{Type: trPtr(gatewayv1.QueryParamMatchExact), Name: "exact", Value: "2"},
									{Type: trPtr(gatewayv1.QueryParamMatchRegularExpression), Name: "regex", Value: "[a-z]+"},
								},
								Method: trPtr(gatewayv1.HTTPMethodGet),
							},
							{Path: &gatewayv1.HTTPPathMatch{Type: trPtr(gatewayv1.PathMatchPathPrefix), Value: trPtr("/prefix")}, Method: trPtr(gatewayv1.HTTPMethodPost)},
							{Path: &gatewayv1.HTTPPathMatch{Type: trPtr(gatewayv1.PathMatchRegularExpression), Value: trPtr("^/re/[0-9]+$")}},
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
						BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil)},
					},
					// Rule-level prefix rewrite; header modification on the backend.
					gatewayv1.HTTPRouteRule{
						Matches: []gatewayv1.HTTPRouteMatch{trPrefix("/old")},
						Filters: []gatewayv1.HTTPRouteFilter{{
							Type:       gatewayv1.HTTPRouteFilterURLRewrite,
							URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: trPtr("/new")}},
						}},
						BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "legacy", 8080, nil, gatewayv1.HTTPRouteFilter{
							Type:                  gatewayv1.HTTPRouteFilterRequestHeaderModifier,
							RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "x-backend", Value: "legacy"}}},
						})},
					},
					// No matches (every request); backend-level rewrite and headers.
					gatewayv1.HTTPRouteRule{
						BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "v2", 8080, nil,
							gatewayv1.HTTPRouteFilter{
								Type:       gatewayv1.HTTPRouteFilterURLRewrite,
								URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: trPtr("/v2")}},
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
				trGateway("apps", "gw", true, trValid(trHTTP("http", 80, ""))),
				trService("apps", "stable", 8080),
				trService("apps", "canary", 8080),
				trService("apps", "drained", 8080),
				trService("apps", "default-weight", 8080),
				trHTTPRoute("apps", "split", nil, trAttached(trAttach("apps", "gw", "http")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{
						trHTTPRef("", "stable", 8080, trPtr[int32](90)),
						trHTTPRef("", "canary", 8080, trPtr[int32](10)),
						trHTTPRef("", "drained", 8080, trPtr[int32](0)),
						trHTTPRef("", "default-weight", 8080, nil),
					}},
				),
			},
		},
		{
			// Backends that cannot receive traffic. Rule 0 keeps its valid backend, which
			// also gets the missing one's share (a problem says so). Rules 1 and 2 have no
			// backend left and are left out. Rule 3 shows each kind of unusable ref.
			name: "invalid_backends",
			objects: []any{
				trGateway("apps", "gw", true, trValid(trHTTP("http", 80, ""))),
				trService("apps", "web", 8080),
				&corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "external", UID: "uid-service-apps-external"},
					Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.org", Ports: []corev1.ServicePort{{Port: 80}}},
				},
				func() confirmedHTTPRoute {
					c := trHTTPRoute("apps", "broken", nil, trAttached(trAttach("apps", "gw", "http")),
						gatewayv1.HTTPRouteRule{
							Matches: []gatewayv1.HTTPRouteMatch{trPrefix("/partial")},
							BackendRefs: []gatewayv1.HTTPBackendRef{
								trHTTPRef("", "web", 8080, trPtr[int32](1)),
								trHTTPRef("", "missing", 8080, trPtr[int32](1)),
							},
						},
						gatewayv1.HTTPRouteRule{
							Matches:     []gatewayv1.HTTPRouteMatch{trPrefix("/none")},
							BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "missing", 8080, nil)},
						},
						gatewayv1.HTTPRouteRule{
							// No backendRefs at all: Gateway API answers 500.
							Matches: []gatewayv1.HTTPRouteMatch{trPrefix("/empty")},
							Filters: []gatewayv1.HTTPRouteFilter{{
								Type:                  gatewayv1.HTTPRouteFilterRequestHeaderModifier,
								RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Remove: []string{"x"}},
							}},
						},
						gatewayv1.HTTPRouteRule{
							Matches: []gatewayv1.HTTPRouteMatch{trPrefix("/kinds")},
							BackendRefs: []gatewayv1.HTTPBackendRef{
								{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
									Group: trPtr(gatewayv1.Group("example.com")), Kind: trPtr(gatewayv1.Kind("Bucket")), Name: "bucket",
								}}},
								trHTTPRef("", "external", 80, nil),
								trHTTPRef("", "web", 9999, nil),
								trHTTPRef("", "web", 8080, trPtr[int32](0)),
							},
						},
					)
					c.Route.Status.Parents = trRouteStatus(false)
					return c
				}(),
			},
		},
		{
			// A Service in another namespace is written where the status vouches for
			// its ReferenceGrant (ResolvedRefs True), and left out where it cannot
			// (ResolvedRefs False: the status names only the first failing ref).
			name: "cross_namespace_backend",
			objects: []any{
				trGateway("infra", "gw", true, trValid(func() gatewayv1.Listener {
					l := trHTTP("http", 80, "")
					l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: trPtr(gatewayv1.NamespacesFromAll)}}
					return l
				}())),
				trService("backends", "api", 8080),
				trService("apps", "web", 8080),
				trHTTPRoute("apps", "granted", nil, trAttached(trAttach("infra", "gw", "http")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("backends", "api", 8080, nil)}}),
				func() confirmedHTTPRoute {
					c := trHTTPRoute("apps", "unresolved", nil, trAttached(trAttach("infra", "gw", "http")),
						gatewayv1.HTTPRouteRule{
							Matches:     []gatewayv1.HTTPRouteMatch{trPrefix("/api")},
							BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("backends", "api", 8080, nil)},
						},
						gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil), trHTTPRef("", "gone", 8080, nil)}},
					)
					c.Route.Status.Parents = trRouteStatus(false)
					return c
				}(),
			},
		},
		{
			// The weight-0 backendRef of "db" receives no connections and is not
			// counted; "broken" names a missing Service and is left out.
			name: "tcp_route",
			objects: []any{
				trGateway("infra", "gw", true, trValid(trTCP("postgres", 5432)), trValid(trTCP("redis", 6379))),
				trService("data", "postgres", 5432),
				trService("data", "postgres-old", 5432),
				trTCPRoute("data", "db", trAttached(trAttach("infra", "gw", "postgres")),
					trRef("", "postgres-old", 5432, trPtr[int32](0)),
					trRef("", "postgres", 5432, nil)),
				func() confirmedTCPRoute {
					c := trTCPRoute("data", "broken", trAttached(trAttach("infra", "gw", "redis")), trRef("", "redis", 6379, nil))
					c.Route.Status.Parents = trRouteStatus(false)
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
				trGateway("infra", "gw", true,
					trValid(trHTTPS("https", 443, "", trCertRef("certs", "wildcard"))),
					trValid(trTCP("tcp", 9000))),
				trSecret("certs", "wildcard"),
				trService("backends", "api", 8080),
				trService("apps", "queue", 9000),
				trHTTPRoute("apps", "web", []string{"www.example.com"}, trAttached(trAttach("infra", "gw", "https")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("backends", "api", 8080, nil)}}),
				trTCPRoute("apps", "queue", trAttached(trAttach("infra", "gw", "tcp")), trRef("", "queue", 9000, nil)),
			},
		},
		{
			// One service-defaults per backend Service that an http-route sends traffic
			// to: not for the weight-0 one or a tcp-route's.
			name: "service_defaults",
			opts: Options{ManageServiceDefaults: true},
			objects: []any{
				trGateway("apps", "gw", true, trValid(trHTTP("http", 80, "")), trValid(trTCP("tcp", 9000))),
				trService("apps", "web", 8080),
				trService("apps", "api", 8080),
				trService("apps", "drained", 8080),
				trService("apps", "queue", 9000),
				trHTTPRoute("apps", "one", nil, trAttached(trAttach("apps", "gw", "http")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil), trHTTPRef("", "drained", 8080, trPtr[int32](0))}}),
				trHTTPRoute("apps", "two", []string{"two.example.com"}, trAttached(trAttach("apps", "gw", "http")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil), trHTTPRef("", "api", 8080, nil)}}),
				trTCPRoute("apps", "queue", trAttached(trAttach("apps", "gw", "tcp")), trRef("", "queue", 9000, nil)),
				// web is http now: Consul 1.15 refuses a tcp-route to it.
				trTCPRoute("apps", "web-tcp", trAttached(trAttach("apps", "gw", "tcp")), trRef("", "web", 8080, nil)),
			},
		},
		{
			// The status said the Secrets resolved, but the cache no longer has them:
			// "partial" keeps its http listener, "tls-only" has none left. The route on
			// the missing listener has nowhere to go.
			name: "missing_secret",
			objects: []any{
				trGateway("infra", "partial", true,
					trValid(trHTTP("http", 80, "")),
					trValid(trHTTPS("https", 443, "", trCertRef("", "present"), trCertRef("", "gone")))),
				trGateway("infra", "tls-only", true, trValid(trHTTPS("https", 443, "", trCertRef("", "gone")))),
				trSecret("infra", "present"),
				trService("infra", "web", 8080),
				trHTTPRoute("infra", "secure", nil, trAttached(trAttach("infra", "tls-only", "https")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil)}}),
				trHTTPRoute("infra", "both", nil, trAttached(trAttach("infra", "partial", "http", "https")),
					gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil)}}),
			},
		},
		{
			// Consul 1.15 takes no wildcard route hostnames. See routeHostnames.
			name: "wildcard_hostnames",
			objects: []any{
				trGateway("infra", "gw", true,
					trValid(trHTTP("wild", 8080, "*.example.com")),
					trValid(trHTTP("foo", 8081, "foo.example.com")),
					trValid(trHTTP("any", 8082, "")),
					trValid(trHTTP("shop", 8083, "shop.other.com"))),
				trService("apps", "web", 8080),
				// Same wildcard as the listener: the entry has no hostnames, Consul serves
				// the listener's "*.example.com".
				trWebRoute("same-wildcard", []string{"*.example.com"}, trAttach("infra", "gw", "wild")),
				// A wildcard on a more specific listener: that listener's hostname.
				trWebRoute("narrowed", []string{"*.example.com"}, trAttach("infra", "gw", "foo")),
				// A wildcard on a listener for any hostname: Consul cannot express it.
				trWebRoute("unexpressible", []string{"*.example.com"}, trAttach("infra", "gw", "any")),
				// "example.com" does not intersect "*.example.com" and is left out; Consul's
				// suffix filter would serve it.
				trWebRoute("concrete", []string{"a.example.com", "example.com"}, trAttach("infra", "gw", "wild")),
				// Wildcard plus a concrete hostname, each matching one listener exactly.
				trWebRoute("mixed", []string{"*.example.com", "shop.other.com"}, trAttach("infra", "gw", "wild", "shop")),
				// Served on "wild" as the listener's own wildcard; not expressible on "any".
				trWebRoute("partly", []string{"*.example.com"}, trAttach("infra", "gw", "wild", "any")),
			},
		},
	}
}

func trWebRoute(name string, hostnames []string, a gwsync.Attachment) confirmedHTTPRoute {
	return trHTTPRoute("apps", name, hostnames, trAttached(a),
		gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil)}})
}

// trEncode is the golden form of a translation: entries sorted by kind, partition,
// namespace and name, then the problems.
func trEncode(t *testing.T, d Desired) []byte {
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
	for _, tc := range trCases() {
		t.Run(tc.name, func(t *testing.T) {
			d := Translate(trSnapshot(tc.objects...), tc.naming, trOwnership, tc.opts)
			trCheckConsul115(t, d)
			got := trEncode(t, d)
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

// trCheckConsul115 checks every entry against the validation Consul 1.15 applies
// (agent/structs config_entry_gateways.go, config_entry_routes.go) and the
// normalization it does on write, which must leave our entries unchanged, and checks
// the invariants the translation promises.
func trCheckConsul115(t *testing.T, d Desired) {
	t.Helper()
	for key, e := range d.Entries {
		if KeyOf(e) != key {
			t.Errorf("entry under %v has key %v", key, KeyOf(e))
		}
		if e.GetMeta()[metaController] != trOwnership.Controller || e.GetMeta()[metaUID] == "" {
			t.Errorf("%v: meta %v does not name its owner", key, e.GetMeta())
		}
		switch e := e.(type) {
		case *consulapi.APIGatewayConfigEntry:
			if len(e.Listeners) == 0 {
				t.Errorf("%v: api-gateway without listeners", key)
			}
			byPort := map[int]consulapi.APIGatewayListener{}
			for _, l := range e.Listeners {
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
			trCheckParents(t, d, key, e.Parents, "http")
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
			trCheckParents(t, d, key, e.Parents, "tcp")
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

// trCheckParents: parents are unique, name a written listener of the route's protocol.
func trCheckParents(t *testing.T, d Desired, key EntryKey, parents []consulapi.ResourceReference, protocol string) {
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
	cases := append(trCases(), trCase{
		// Objects that share entries: with one destination namespace the Services
		// apps/web and other/web are one Consul service, and two Gateways use one
		// Secret. The first in sorted order owns a shared entry, whatever the order.
		name:   "shared entries",
		naming: Naming{DestinationNamespace: "k8s"},
		opts:   Options{ManageServiceDefaults: true},
		objects: []any{
			trGateway("infra", "a", true, trValid(trHTTPS("https", 443, "", trCertRef("certs", "tls")))),
			trGateway("infra", "b", true, trValid(trHTTPS("https", 443, "", trCertRef("certs", "tls"))), trValid(trHTTP("http", 80, ""))),
			trSecret("certs", "tls"),
			trService("apps", "web", 8080),
			trService("other", "web", 8080),
			trHTTPRoute("apps", "r", nil, trAttached(trAttach("infra", "a", "https"), trAttach("infra", "b", "https", "http")),
				gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil)}}),
			trHTTPRoute("other", "r", nil, trAttached(trAttach("infra", "b", "http")),
				gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil)}}),
		},
	})
	for _, tc := range cases {
		first := Translate(trSnapshot(tc.objects...), tc.naming, trOwnership, tc.opts)
		want := trEncode(t, first)
		for i := range 30 {
			// A fresh snapshot each time: fresh maps, filled in another order.
			objs := slices.Clone(tc.objects)
			if i%2 == 1 {
				slices.Reverse(objs)
			}
			d := Translate(trSnapshot(objs...), tc.naming, trOwnership, tc.opts)
			if got := trEncode(t, d); !bytes.Equal(got, want) {
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
	for _, tc := range trCases() {
		s := trSnapshot(tc.objects...)
		before := trSnapshot(tc.objects...)
		for k, gw := range before.Gateways {
			before.Gateways[k] = gw.DeepCopy()
		}
		for _, routes := range before.Routes {
			for k, r := range routes {
				routes[k] = ConfirmedRoute{Route: r.Route.DeepCopyObject().(gatewayapi.Object), Decision: r.Decision}
			}
		}
		Translate(s, tc.naming, trOwnership, tc.opts)
		if diff := gocmp.Diff(before.Gateways, s.Gateways); diff != "" {
			t.Errorf("%s: Gateways modified:\n%s", tc.name, diff)
		}
		if diff := gocmp.Diff(before.Routes, s.Routes); diff != "" {
			t.Errorf("%s: routes modified:\n%s", tc.name, diff)
		}
	}
}

func TestTranslateEmpty(t *testing.T) {
	d := Translate(Snapshot{}, Naming{}, trOwnership, Options{ManageServiceDefaults: true})
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
