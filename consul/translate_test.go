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

// trHTTPRoute is a confirmed HTTPRoute whose references all resolved.
func trHTTPRoute(ns, name string, hostnames []string, decision gwsync.RouteDecision, rules ...gatewayv1.HTTPRouteRule) ConfirmedHTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: trUID("HTTPRoute", ns, name), Generation: 1}}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	r.Spec.Rules = rules
	r.Status.Parents = trRouteStatus(true)
	return ConfirmedHTTPRoute{Route: r, Decision: decision}
}

func trTCPRoute(ns, name string, decision gwsync.RouteDecision, refs ...gatewayv1.BackendRef) ConfirmedTCPRoute {
	r := &gatewayv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: trUID("TCPRoute", ns, name), Generation: 1}}
	r.Spec.Rules = []gatewayv1.TCPRouteRule{{BackendRefs: refs}}
	r.Status.Parents = trRouteStatus(true)
	return ConfirmedTCPRoute{Route: r, Decision: decision}
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
	s := Snapshot{
		Gateways:   map[cache.ObjectName]*gatewayv1.Gateway{},
		HTTPRoutes: map[cache.ObjectName]ConfirmedHTTPRoute{},
		TCPRoutes:  map[cache.ObjectName]ConfirmedTCPRoute{},
		Secrets:    map[cache.ObjectName]*corev1.Secret{},
		Services:   map[cache.ObjectName]*corev1.Service{},
	}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *gatewayv1.Gateway:
			s.Gateways[cache.MetaObjectToName(o)] = o
		case ConfirmedHTTPRoute:
			s.HTTPRoutes[cache.MetaObjectToName(o.Route)] = o
		case ConfirmedTCPRoute:
			s.TCPRoutes[cache.MetaObjectToName(o.Route)] = o
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
				func() ConfirmedHTTPRoute {
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
				func() ConfirmedHTTPRoute {
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
				func() ConfirmedTCPRoute {
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

func trWebRoute(name string, hostnames []string, a gwsync.Attachment) ConfirmedHTTPRoute {
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
		for k, r := range before.HTTPRoutes {
			before.HTTPRoutes[k] = ConfirmedHTTPRoute{Route: r.Route.DeepCopy(), Decision: r.Decision}
		}
		Translate(s, tc.naming, trOwnership, tc.opts)
		if diff := gocmp.Diff(before.Gateways, s.Gateways); diff != "" {
			t.Errorf("%s: Gateways modified:\n%s", tc.name, diff)
		}
		if diff := gocmp.Diff(before.HTTPRoutes, s.HTTPRoutes); diff != "" {
			t.Errorf("%s: HTTPRoutes modified:\n%s", tc.name, diff)
		}
	}
}

func TestTranslateEmpty(t *testing.T) {
	d := Translate(Snapshot{}, Naming{}, trOwnership, Options{ManageServiceDefaults: true})
	if len(d.Entries) != 0 || len(d.Problems) != 0 || d.Entries == nil {
		t.Errorf("empty snapshot: %+v", d)
	}
}

// ---- the small functions ----

func TestListenerProgrammable(t *testing.T) {
	status := func(conds ...metav1.Condition) []gatewayv1.ListenerStatus {
		return []gatewayv1.ListenerStatus{{Name: "l", Conditions: conds}}
	}
	accepted, resolved := trCond("Accepted", true, "Accepted"), trCond("ResolvedRefs", true, "ResolvedRefs")
	tests := []struct {
		name     string
		statuses []gatewayv1.ListenerStatus
		want     bool
	}{
		{"valid", status(accepted, resolved, trCond("Conflicted", false, "NoConflicts")), true},
		{"no conflicted condition", status(accepted, resolved), true},
		{"not accepted", status(trCond("Accepted", false, "UnsupportedProtocol"), resolved), false},
		{"refs not resolved", status(accepted, trCond("ResolvedRefs", false, "InvalidCertificateRef")), false},
		{"no resolved condition", status(accepted), false},
		{"conflicted", status(accepted, resolved, trCond("Conflicted", true, "HostnameConflict")), false},
		{"unknown accepted", status(metav1.Condition{Type: "Accepted", Status: metav1.ConditionUnknown}, resolved), false},
		{"no status entry", []gatewayv1.ListenerStatus{{Name: "other", Conditions: []metav1.Condition{accepted, resolved}}}, false},
	}
	for _, tt := range tests {
		if got := listenerProgrammable(tt.statuses, "l"); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestListenerProtocol(t *testing.T) {
	got := map[gatewayv1.ProtocolType]string{}
	for _, p := range []gatewayv1.ProtocolType{gatewayv1.HTTPProtocolType, gatewayv1.HTTPSProtocolType, gatewayv1.TCPProtocolType, gatewayv1.TLSProtocolType, gatewayv1.UDPProtocolType, "h2c"} {
		got[p] = listenerProtocol(p)
	}
	want := map[gatewayv1.ProtocolType]string{"HTTP": "http", "HTTPS": "http", "TCP": "tcp", "TLS": "", "UDP": "", "h2c": ""}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

func TestListenerTranslation(t *testing.T) {
	tr := &translator{snap: trSnapshot(trSecret("infra", "tls"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "empty"}}), naming: Naming{Prefix: "p-"}, owner: trOwnership}
	gw := trGateway("infra", "gw", true)
	tests := []struct {
		name        string
		listener    gatewayv1.Listener
		want        consulapi.APIGatewayListener
		wantCerts   []string
		wantProblem string
	}{
		{name: "http with hostname", listener: trHTTP("h", 80, "a.example.com"), want: consulapi.APIGatewayListener{Name: "h", Port: 80, Protocol: "http", Hostname: "a.example.com"}},
		{name: "tcp drops hostname", listener: func() gatewayv1.Listener {
			l := trTCP("t", 9000)
			l.Hostname = trPtr(gatewayv1.Hostname("ignored.example.com"))
			return l
		}(), want: consulapi.APIGatewayListener{Name: "t", Port: 9000, Protocol: "tcp"}},
		{name: "https", listener: trHTTPS("s", 443, "", trCertRef("", "tls")), want: consulapi.APIGatewayListener{Name: "s", Port: 443, Protocol: "http", TLS: consulapi.APIGatewayTLSConfiguration{
			Certificates: []consulapi.ResourceReference{{Kind: consulapi.InlineCertificate, Name: "p-secret.tls.infra"}},
		}}, wantCerts: []string{"p-secret.tls.infra"}},
		{name: "https without certificates", listener: trHTTPS("s", 443, ""), wantProblem: "an HTTPS listener must terminate TLS with at least one certificateRef"},
		{name: "https passthrough", listener: func() gatewayv1.Listener {
			l := trHTTPS("s", 443, "", trCertRef("", "tls"))
			l.TLS.Mode = trPtr(gatewayv1.TLSModePassthrough)
			return l
		}(), wantProblem: "an HTTPS listener must terminate TLS with at least one certificateRef"},
		{name: "missing secret", listener: trHTTPS("s", 443, "", trCertRef("", "tls"), trCertRef("other", "tls")), wantProblem: "Secret other/tls with tls.crt and tls.key is not in the cache"},
		{name: "secret without data", listener: trHTTPS("s", 443, "", trCertRef("", "empty")), wantProblem: "Secret infra/empty with tls.crt and tls.key is not in the cache"},
		{name: "not a secret", listener: trHTTPS("s", 443, "", gatewayv1.SecretObjectReference{Kind: trPtr(gatewayv1.Kind("ConfigMap")), Name: "tls"}), wantProblem: "certificateRef infra/tls is not a core Secret"},
		{name: "udp", listener: gatewayv1.Listener{Name: "u", Port: 53, Protocol: gatewayv1.UDPProtocolType}, wantProblem: "protocol UDP is not supported by Consul's API gateway"},
	}
	for _, tt := range tests {
		got, certs, problem := tr.listener(gw, tt.listener)
		if problem != tt.wantProblem {
			t.Errorf("%s: problem %q, want %q", tt.name, problem, tt.wantProblem)
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: listener (-want +got):\n%s", tt.name, diff)
		}
		var names []string
		for _, c := range certs {
			names = append(names, c.GetName())
		}
		if diff := gocmp.Diff(tt.wantCerts, names); diff != "" {
			t.Errorf("%s: certificates (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestPortConflict(t *testing.T) {
	existing := []consulapi.APIGatewayListener{{Name: "a", Port: 80, Protocol: "http", Hostname: "a.example.com"}}
	tests := []struct {
		l    consulapi.APIGatewayListener
		want string
	}{
		{consulapi.APIGatewayListener{Name: "b", Port: 81, Protocol: "http"}, ""},
		{consulapi.APIGatewayListener{Name: "b", Port: 80, Protocol: "http", Hostname: "a.example.com"}, ""},
		{consulapi.APIGatewayListener{Name: "b", Port: 80, Protocol: "http", Hostname: "b.example.com"}, "port 80 is taken by listener a"},
		{consulapi.APIGatewayListener{Name: "b", Port: 80, Protocol: "tcp"}, "port 80 is taken by listener a"},
	}
	for _, tt := range tests {
		if got := portConflict(existing, tt.l); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.l, got, tt.want)
		}
	}
}

func TestHTTPMatch(t *testing.T) {
	tests := []struct {
		name    string
		match   gatewayv1.HTTPRouteMatch
		want    consulapi.HTTPMatch
		wantErr string
	}{
		{name: "empty is prefix /", want: consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: "prefix", Value: "/"}}},
		{name: "path without type is a prefix", match: gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Value: trPtr("/a")}},
			want: consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: "prefix", Value: "/a"}}},
		{name: "exact", match: gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: trPtr(gatewayv1.PathMatchExact), Value: trPtr("/a")}},
			want: consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: "exact", Value: "/a"}}},
		{name: "regex", match: gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: trPtr(gatewayv1.PathMatchRegularExpression), Value: trPtr("/a.*")}},
			want: consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: "regex", Value: "/a.*"}}},
		{name: "headers, query, method", match: gatewayv1.HTTPRouteMatch{
			Headers:     []gatewayv1.HTTPHeaderMatch{{Name: "h1", Value: "v"}, {Type: trPtr(gatewayv1.HeaderMatchRegularExpression), Name: "h2", Value: "r"}},
			QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: "q1", Value: "v"}, {Type: trPtr(gatewayv1.QueryParamMatchRegularExpression), Name: "q2", Value: "r"}},
			Method:      trPtr(gatewayv1.HTTPMethodDelete),
		}, want: consulapi.HTTPMatch{
			Path:    consulapi.HTTPPathMatch{Match: "prefix", Value: "/"},
			Headers: []consulapi.HTTPHeaderMatch{{Match: "exact", Name: "h1", Value: "v"}, {Match: "regex", Name: "h2", Value: "r"}},
			Query:   []consulapi.HTTPQueryMatch{{Match: "exact", Name: "q1", Value: "v"}, {Match: "regex", Name: "q2", Value: "r"}},
			Method:  "DELETE",
		}},
		{name: "unknown path type", match: gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: trPtr(gatewayv1.PathMatchType("Suffix")), Value: trPtr("/a")}},
			wantErr: "path match type Suffix is not supported by Consul's API gateway"},
		{name: "unknown header type", match: gatewayv1.HTTPRouteMatch{Headers: []gatewayv1.HTTPHeaderMatch{{Type: trPtr(gatewayv1.HeaderMatchType("Prefix")), Name: "h"}}},
			wantErr: "header match type Prefix is not supported by Consul's API gateway"},
		{name: "unknown query type", match: gatewayv1.HTTPRouteMatch{QueryParams: []gatewayv1.HTTPQueryParamMatch{{Type: trPtr(gatewayv1.QueryParamMatchType("Present")), Name: "q"}}},
			wantErr: "query param match type Present is not supported by Consul's API gateway"},
		{name: "unknown method", match: gatewayv1.HTTPRouteMatch{Method: trPtr(gatewayv1.HTTPMethod("BREW"))},
			wantErr: "method BREW is not supported by Consul's API gateway"},
	}
	for _, tt := range tests {
		got, err := httpMatch(tt.match)
		if errString(err) != tt.wantErr {
			t.Errorf("%s: error %q, want %q", tt.name, errString(err), tt.wantErr)
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	got, err := httpMatches(nil)
	if diff := gocmp.Diff([]consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: "prefix", Value: "/"}}}, got); diff != "" || err != nil {
		t.Errorf("no matches: %v (-want +got):\n%s", err, diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestHTTPFilters(t *testing.T) {
	rewrite := func(t gatewayv1.HTTPPathModifierType, prefix, full *string) gatewayv1.HTTPRouteFilter {
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
			Path: &gatewayv1.HTTPPathModifier{Type: t, ReplacePrefixMatch: prefix, ReplaceFullPath: full},
		}}
	}
	headers := func(h gatewayv1.HTTPHeaderFilter) gatewayv1.HTTPRouteFilter {
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &h}
	}
	tests := []struct {
		name    string
		filters []gatewayv1.HTTPRouteFilter
		want    consulapi.HTTPFilters
		wantErr string
	}{
		{name: "none"},
		{name: "headers", filters: []gatewayv1.HTTPRouteFilter{headers(gatewayv1.HTTPHeaderFilter{
			Set: []gatewayv1.HTTPHeader{{Name: "s", Value: "1"}}, Add: []gatewayv1.HTTPHeader{{Name: "a", Value: "2"}}, Remove: []string{"r"},
		})}, want: consulapi.HTTPFilters{Headers: []consulapi.HTTPHeaderFilter{{Set: map[string]string{"s": "1"}, Add: map[string]string{"a": "2"}, Remove: []string{"r"}}}}},
		{name: "empty header modifier changes nothing", filters: []gatewayv1.HTTPRouteFilter{headers(gatewayv1.HTTPHeaderFilter{})}},
		{name: "prefix rewrite", filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.PrefixMatchHTTPPathModifier, trPtr("/new"), nil)},
			want: consulapi.HTTPFilters{URLRewrite: &consulapi.URLRewrite{Path: "/new"}}},
		{name: "empty prefix rewrite is /", filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.PrefixMatchHTTPPathModifier, trPtr(""), nil)},
			want: consulapi.HTTPFilters{URLRewrite: &consulapi.URLRewrite{Path: "/"}}},
		{name: "rewrite without path", filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{}}}},
		{name: "full path rewrite", filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.FullPathHTTPPathModifier, nil, trPtr("/x"))},
			wantErr: "filter URLRewrite path type ReplaceFullPath is not supported by Consul's API gateway"},
		{name: "hostname rewrite", filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: trPtr(gatewayv1.PreciseHostname("x.example.com"))}}},
			wantErr: "filter URLRewrite hostname is not supported by Consul's API gateway"},
		{name: "response headers", filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{}}},
			wantErr: "filter ResponseHeaderModifier is not supported by Consul's API gateway"},
		{name: "redirect", filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{}}},
			wantErr: "filter RequestRedirect is not supported by Consul's API gateway"},
	}
	for _, tt := range tests {
		got, err := httpFilters(tt.filters)
		if errString(err) != tt.wantErr {
			t.Errorf("%s: error %q, want %q", tt.name, errString(err), tt.wantErr)
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestBackendWeight(t *testing.T) {
	for _, tt := range []struct {
		w    *int32
		want int
	}{{nil, 1}, {trPtr[int32](0), 0}, {trPtr[int32](7), 7}, {trPtr[int32](-1), 0}} {
		if got := backendWeight(tt.w); got != tt.want {
			t.Errorf("backendWeight(%v) = %d, want %d", tt.w, got, tt.want)
		}
	}
}

func TestRefsResolved(t *testing.T) {
	if !refsResolved(trRouteStatus(true), trController) {
		t.Error("resolved status not recognised")
	}
	if refsResolved(trRouteStatus(false), trController) {
		t.Error("another controller's ResolvedRefs True was taken for ours")
	}
	if refsResolved(nil, trController) {
		t.Error("no status vouches for nothing")
	}
}

func TestBackendProblem(t *testing.T) {
	appProtocol := trService("apps", "h2c", 8080)
	appProtocol.Spec.Ports[0].AppProtocol = trPtr("kubernetes.io/h2c")
	httpProtocol := trService("apps", "plain", 8080)
	httpProtocol.Spec.Ports[0].AppProtocol = trPtr("HTTP")
	services := trSnapshot(trService("apps", "web", 8080), trService("other", "api", 8080), appProtocol, httpProtocol,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, Ports: []corev1.ServicePort{{Port: 80}}}},
	).Services
	ref := func(ns, name string, port int32) gatewayv1.BackendObjectReference {
		return trRef(ns, name, port, nil).BackendObjectReference
	}
	tests := []struct {
		name     string
		kind     string
		ref      gatewayv1.BackendObjectReference
		resolved bool
		want     string
	}{
		{"same namespace", "HTTPRoute", ref("", "web", 8080), false, ""},
		{"explicit core kind", "HTTPRoute", gatewayv1.BackendObjectReference{Group: trPtr(gatewayv1.Group("")), Kind: trPtr(gatewayv1.Kind("Service")), Name: "web", Port: trPtr(gatewayv1.PortNumber(8080))}, false, ""},
		{"other kind", "HTTPRoute", gatewayv1.BackendObjectReference{Kind: trPtr(gatewayv1.Kind("ServiceImport")), Name: "web"}, true, "is not a core Service"},
		{"other group", "HTTPRoute", gatewayv1.BackendObjectReference{Group: trPtr(gatewayv1.Group("x.io")), Name: "web"}, true, "is not a core Service"},
		{"missing", "HTTPRoute", ref("", "nope", 8080), true, "names a Service that does not exist"},
		{"external name", "HTTPRoute", ref("", "ext", 80), true, "names an ExternalName Service"},
		{"no port", "HTTPRoute", gatewayv1.BackendObjectReference{Name: "web"}, true, "has no port"},
		{"wrong port", "HTTPRoute", ref("", "web", 80), true, "names port 80, which the Service does not have"},
		{"cross namespace, vouched for", "HTTPRoute", ref("other", "api", 8080), true, ""},
		{"cross namespace, not vouched for", "TCPRoute", ref("other", "api", 8080), false, "is in another namespace, and with the route's references not all resolved its ReferenceGrant cannot be vouched for"},
		{"appProtocol, vouched for", "HTTPRoute", ref("", "h2c", 8080), true, ""},
		{"appProtocol, not vouched for", "HTTPRoute", ref("", "h2c", 8080), false, "has appProtocol kubernetes.io/h2c, and with the route's references not all resolved it cannot be vouched for"},
		{"appProtocol http", "HTTPRoute", ref("", "plain", 8080), false, ""},
		{"appProtocol on a tcp route", "TCPRoute", ref("", "h2c", 8080), false, ""},
	}
	for _, tt := range tests {
		lookup := func(key cache.ObjectName) *corev1.Service { return services[key] }
		_, got := backendProblem(tt.kind, "apps", tt.ref, lookup, tt.resolved)
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestIntersectHostnames(t *testing.T) {
	tests := []struct {
		listener string
		route    []gatewayv1.Hostname
		want     []string
	}{
		{"", []gatewayv1.Hostname{"a.example.com", "*.example.com"}, []string{"a.example.com", "*.example.com"}},
		{"a.example.com", []gatewayv1.Hostname{"a.example.com", "b.example.com"}, []string{"a.example.com"}},
		{"*.example.com", []gatewayv1.Hostname{"a.example.com", "a.b.example.com", "example.com", "badexample.com"}, []string{"a.example.com", "a.b.example.com"}},
		{"*.example.com", []gatewayv1.Hostname{"*.example.com", "*.b.example.com", "*.com"}, []string{"*.example.com", "*.b.example.com"}},
		{"a.example.com", []gatewayv1.Hostname{"*.example.com", "*.com"}, []string{"a.example.com"}},
		{"example.com", []gatewayv1.Hostname{"*.example.com"}, nil},
	}
	for _, tt := range tests {
		if diff := gocmp.Diff(tt.want, intersectHostnames(tt.listener, tt.route)); diff != "" {
			t.Errorf("intersectHostnames(%q, %v) (-want +got):\n%s", tt.listener, tt.route, diff)
		}
	}
}

// TestConsulServedHostnames pins the copy of Consul 1.15's FilteredHostnames, including
// the looseness of its suffix filter that routeHostnames guards against.
func TestMinimalHostnames(t *testing.T) {
	got := minimalHostnames([]string{"a.example.com", "*.example.com", "example.com", "*.b.example.com", "x.b.example.com", "other.com"})
	want := []string{"*.example.com", "example.com", "other.com"}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

func TestConsulServedHostnames(t *testing.T) {
	tests := []struct {
		entry    []string
		listener string
		want     []string
	}{
		{nil, "", []string{"*"}},
		{nil, "*.example.com", []string{"*.example.com"}},
		{nil, "a.example.com", []string{"a.example.com"}},
		{[]string{"a.example.com", "b.other.com"}, "", []string{"a.example.com", "b.other.com"}},
		{[]string{"a.example.com", "example.com", "badexample.com", "b.other.com"}, "*.example.com", []string{"a.example.com", "example.com", "badexample.com"}},
		{[]string{"a.example.com", "b.example.com"}, "a.example.com", []string{"a.example.com"}},
		{[]string{"b.example.com"}, "a.example.com", nil},
	}
	for _, tt := range tests {
		if diff := gocmp.Diff(tt.want, consulServedHostnames(tt.entry, tt.listener)); diff != "" {
			t.Errorf("consulServedHostnames(%v, %q) (-want +got):\n%s", tt.entry, tt.listener, diff)
		}
	}
}

func TestRouteHostnames(t *testing.T) {
	parent := func(listener, hostname string) parentListener {
		return parentListener{
			gateway:  cache.ObjectName{Namespace: "infra", Name: "gw"},
			ref:      consulapi.ResourceReference{Kind: consulapi.APIGateway, Name: "gw.infra", SectionName: listener},
			hostname: hostname,
		}
	}
	wild, foo, anyHost, shop, bad := parent("wild", "*.example.com"), parent("foo", "foo.example.com"), parent("any", ""), parent("shop", "shop.other.com"), parent("bad", "x.badexample.com")
	tests := []struct {
		name      string
		route     []gatewayv1.Hostname
		parents   []parentListener
		wantHosts []string
		wantKept  []string
	}{
		{"no route hostnames", nil, []parentListener{wild, anyHost}, nil, []string{"wild", "any"}},
		{"concrete pass through", []gatewayv1.Hostname{"a.example.com", "b.example.com"}, []parentListener{wild}, []string{"a.example.com", "b.example.com"}, []string{"wild"}},
		{"concrete on any", []gatewayv1.Hostname{"a.example.com"}, []parentListener{anyHost, wild}, []string{"a.example.com"}, []string{"any", "wild"}},
		{"non-intersecting left out", []gatewayv1.Hostname{"example.com", "a.example.com"}, []parentListener{wild}, []string{"a.example.com"}, []string{"wild"}},
		{"wildcard equals listener", []gatewayv1.Hostname{"*.example.com"}, []parentListener{wild}, nil, []string{"wild"}},
		{"wildcard narrowed by listener", []gatewayv1.Hostname{"*.example.com"}, []parentListener{foo}, []string{"foo.example.com"}, []string{"foo"}},
		{"wildcard on two listeners", []gatewayv1.Hostname{"*.example.com"}, []parentListener{wild, foo}, nil, []string{"wild", "foo"}},
		{"wildcard on any", []gatewayv1.Hostname{"*.example.com"}, []parentListener{anyHost}, nil, nil},
		{"wildcard and concrete", []gatewayv1.Hostname{"*.example.com", "shop.other.com"}, []parentListener{wild, shop}, nil, []string{"wild", "shop"}},
		{"wildcard covers concrete", []gatewayv1.Hostname{"*.example.com", "a.example.com"}, []parentListener{wild}, nil, []string{"wild"}},
		{"wildcard covers concrete, on any", []gatewayv1.Hostname{"*.example.com", "a.example.com"}, []parentListener{anyHost}, nil, nil},
		{"listener plan cannot serve a concrete listener", []gatewayv1.Hostname{"*.example.com", "a.other.com"}, []parentListener{wild, foo, anyHost}, nil, []string{"wild", "foo"}},
		{"narrower wildcard", []gatewayv1.Hostname{"*.b.example.com"}, []parentListener{wild}, nil, nil},
		// Consul's suffix filter would serve x.badexample.com on *.example.com too:
		// one of the two listeners has to go, the first one found.
		{"suffix overlap", []gatewayv1.Hostname{"a.example.com", "x.badexample.com"}, []parentListener{wild, bad}, []string{"x.badexample.com"}, []string{"bad"}},
		{"listener matches nothing", []gatewayv1.Hostname{"a.other.com"}, []parentListener{wild, anyHost}, []string{"a.other.com"}, []string{"any"}},
	}
	for _, tt := range tests {
		hosts, kept, dropped := routeHostnames(tt.route, tt.parents)
		var keptNames []string
		for _, p := range kept {
			keptNames = append(keptNames, p.ref.SectionName)
		}
		if diff := gocmp.Diff(tt.wantHosts, hosts); diff != "" {
			t.Errorf("%s: hostnames (-want +got):\n%s", tt.name, diff)
		}
		if diff := gocmp.Diff(tt.wantKept, keptNames); diff != "" {
			t.Errorf("%s: parents (-want +got):\n%s", tt.name, diff)
		}
		if len(dropped) != len(tt.parents)-len(kept) {
			t.Errorf("%s: %d parents dropped, %d problems: %v", tt.name, len(tt.parents)-len(kept), len(dropped), dropped)
		}
		// Whatever is kept, Consul serves exactly what Gateway API does.
		for _, p := range kept {
			if want, got := minimalHostnames(intersectHostnames(p.hostname, tt.route)), consulServedHostnames(hosts, p.hostname); len(tt.route) > 0 && !sameSet(want, got) {
				t.Errorf("%s: listener %s: Consul serves %v, Gateway API %v", tt.name, p.ref.SectionName, got, want)
			}
		}
	}
}

func TestRouteParents(t *testing.T) {
	s := trSnapshot(trGateway("infra", "gw", true, trValid(trHTTP("http", 80, "")), trValid(trTCP("tcp", 9000))))
	tr := newTranslator(s, Naming{Partition: "p"}, trOwnership, Options{})
	gw := cache.ObjectName{Namespace: "infra", Name: "gw"}
	if pg := tr.object(nil, s.Gateways[gw], nil, func() { tr.gateway(gw, s.Gateways[gw]) }).gateway; pg != nil {
		tr.gateways[gw] = pg
	}
	route := cache.ObjectName{Namespace: "apps", Name: "r"}

	parents := tr.routeParents("HTTPRoute", route, []gwsync.Attachment{
		trAttach("infra", "gw", "http"),
		trAttach("infra", "gw", "http", "tcp"), // the same listener again, and a tcp one
		trAttach("infra", "missing", "http"),   // a Gateway without entry
	}, "http")
	want := []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "gw.infra", SectionName: "http", Partition: "p"}}
	if diff := gocmp.Diff(want, parentRefs(parents)); diff != "" {
		t.Errorf("parents (-want +got):\n%s", diff)
	}
	wantProblems := []Problem{{Kind: "HTTPRoute", Object: route, Message: "listener infra/gw/tcp is a tcp listener in Consul; the route is left out of it"}}
	if diff := gocmp.Diff(wantProblems, tr.desired.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	tr.desired.Problems = nil
	if parents := tr.routeParents("HTTPRoute", route, []gwsync.Attachment{trAttach("infra", "missing", "http"), trAttach("infra", "gw", "nope")}, "http"); len(parents) != 0 {
		t.Errorf("parents without written listeners: %v", parents)
	}
	wantProblems = []Problem{{Kind: "HTTPRoute", Object: route, Message: "none of the listeners the route is accepted on is programmed in Consul (infra/missing/http, infra/gw/nope)"}}
	if diff := gocmp.Diff(wantProblems, tr.desired.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	tr.desired.Problems = nil
	if parents := tr.routeParents("HTTPRoute", route, nil, "http"); len(parents) != 0 || len(tr.desired.Problems) != 0 {
		t.Errorf("a route accepted nowhere: parents %v, problems %v", parents, tr.desired.Problems)
	}
}

func TestTCPRuleBackends(t *testing.T) {
	tr := &translator{snap: trSnapshot(trService("apps", "a", 1), trService("apps", "b", 1))}
	tests := []struct {
		name        string
		refs        []gatewayv1.BackendRef
		want        consulapi.TCPService
		wantProblem string
	}{
		{"one", []gatewayv1.BackendRef{trRef("", "a", 1, nil)}, consulapi.TCPService{Name: "a"}, ""},
		{"weight 0 not counted", []gatewayv1.BackendRef{trRef("", "a", 1, trPtr[int32](0)), trRef("", "b", 1, trPtr[int32](5))}, consulapi.TCPService{Name: "b"}, ""},
		{"none", []gatewayv1.BackendRef{trRef("", "a", 1, trPtr[int32](0))}, consulapi.TCPService{}, "rule 0: no backendRef has a weight above 0; the rule is left out of Consul"},
		{"two", []gatewayv1.BackendRef{trRef("", "a", 1, nil), trRef("", "b", 1, nil)}, consulapi.TCPService{}, "rule 0: 2 backends would receive connections, but Consul's tcp-route forwards to a single service; the rule is left out of Consul"},
		{"missing", []gatewayv1.BackendRef{trRef("", "c", 1, nil)}, consulapi.TCPService{}, "rule 0: backendRef apps/c names a Service that does not exist; the rule is left out of Consul"},
	}
	for _, tt := range tests {
		got, problem := tr.tcpRule("apps", 0, gatewayv1.TCPRouteRule{BackendRefs: tt.refs}, true)
		if problem != tt.wantProblem {
			t.Errorf("%s: problem %q, want %q", tt.name, problem, tt.wantProblem)
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

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

func TestSegmentPrefixes(t *testing.T) {
	prefix := func(v string) consulapi.HTTPMatch {
		return consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: v}, Method: consulapi.HTTPMatchMethodGet}
	}
	exact := func(v string) consulapi.HTTPMatch {
		return consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchExact, Value: v}, Method: consulapi.HTTPMatchMethodGet}
	}
	tests := []struct {
		name string
		in   []consulapi.HTTPMatch
		want []consulapi.HTTPMatch
	}{
		{"root stays a prefix", []consulapi.HTTPMatch{prefix("/")}, []consulapi.HTTPMatch{prefix("/")}},
		{"a segment becomes exact or subtree", []consulapi.HTTPMatch{prefix("/v2")}, []consulapi.HTTPMatch{exact("/v2"), prefix("/v2/")}},
		{"a trailing slash is the same segment", []consulapi.HTTPMatch{prefix("/v2/")}, []consulapi.HTTPMatch{exact("/v2"), prefix("/v2/")}},
		{"exact matches stay", []consulapi.HTTPMatch{exact("/a"), prefix("/b")}, []consulapi.HTTPMatch{exact("/a"), exact("/b"), prefix("/b/")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := gocmp.Diff(tt.want, segmentPrefixes(tt.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
