package translate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// Fixture builders: confirmed objects as the status pipeline leaves them, and the
// snapshot that holds them.

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
	Decision gwdecision.Route
}

type confirmedTCPRoute struct {
	Route    *gatewayv1.TCPRoute
	Decision gwdecision.Route
}

// newConfirmedHTTPRoute is a confirmed HTTPRoute whose references resolved, but for
// those decision holds (see withBackends).
func newConfirmedHTTPRoute(ns, name string, hostnames []string, decision gwdecision.Route, rules ...gatewayv1.HTTPRouteRule) confirmedHTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidOf("HTTPRoute", ns, name), Generation: 1}}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	r.Spec.Rules = rules
	r.Status.Parents = ourRouteStatus(true)
	return confirmedHTTPRoute{Route: r, Decision: withBackends(decision, ns, httpBackendRefs(rules))}
}

func newConfirmedTCPRoute(ns, name string, decision gwdecision.Route, refs ...gatewayv1.BackendRef) confirmedTCPRoute {
	r := &gatewayv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidOf("TCPRoute", ns, name), Generation: 1}}
	r.Spec.Rules = []gatewayv1.TCPRouteRule{{BackendRefs: refs}}
	r.Status.Parents = ourRouteStatus(true)
	return confirmedTCPRoute{Route: r, Decision: withBackends(decision, ns, [][]gatewayv1.BackendRef{refs})}
}

// withBackends completes decision as the status pipeline would have made it for a
// route in namespace with rules' backendRefs when every one resolved to the Service
// it names: a resolved Backend for each backendRef decision does not hold, and the
// referent of each it holds. Backends come out in rule and backendRef order.
func withBackends(decision gwdecision.Route, namespace string, rules [][]gatewayv1.BackendRef) gwdecision.Route {
	held := decision.Backends
	decision.Backends = nil
	for r, refs := range rules {
		for b, ref := range refs {
			index := gwdecision.BackendRefIndex{Rule: r, Ref: b}
			referent := gatewayapi.Referent(namespace, ref.Namespace, ref.Name)
			if i := slices.IndexFunc(held, func(h gwdecision.Backend) bool { return h.Ref == index }); i >= 0 {
				h := held[i]
				h.Referent = referent
				decision.Backends = append(decision.Backends, h)
				continue
			}
			decision.Backends = append(decision.Backends, resolvedTo(index, referent, ref.BackendObjectReference))
		}
	}
	return decision
}

// resolvedTo is the Backend of a backendRef at index that resolved to referent, named
// after it in Consul.
func resolvedTo(index gwdecision.BackendRefIndex, referent cache.ObjectName, ref gatewayv1.BackendObjectReference) gwdecision.Backend {
	b := gwdecision.Backend{Ref: index, Resolved: true, Referent: referent, Consul: referent.Name}
	if gatewayapi.IsMeshService(ref) {
		b.MeshService = true
		return b
	}
	if ref.Port != nil {
		b.Port = *ref.Port
	}
	b.ServiceUID = uidOf("Service", referent.Namespace, referent.Name)
	return b
}

// unresolvedAt is decision with the backendRefs at refs unresolved.
func unresolvedAt(decision gwdecision.Route, refs ...gwdecision.BackendRefIndex) gwdecision.Route {
	for _, ref := range refs {
		decision.Backends = append(decision.Backends, gwdecision.Backend{Ref: ref})
	}
	return decision
}

// httpBackendRefs are the backendRefs of HTTPRoute rules, rule by rule.
func httpBackendRefs(rules []gatewayv1.HTTPRouteRule) [][]gatewayv1.BackendRef {
	refs := make([][]gatewayv1.BackendRef, len(rules))
	for i, rule := range rules {
		for _, ref := range rule.BackendRefs {
			refs[i] = append(refs[i], ref.BackendRef)
		}
	}
	return refs
}

func attachedTo(attachments ...gwdecision.Attachment) gwdecision.Route {
	return gwdecision.Route{Attachments: attachments}
}

func attachment(gwNamespace, gwName string, listeners ...string) gwdecision.Attachment {
	a := gwdecision.Attachment{Gateway: cache.ObjectName{Namespace: gwNamespace, Name: gwName}}
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
		default:
			panic(fmt.Sprintf("unexpected fixture %T", obj))
		}
	}
	return s
}

// webRoute is an HTTPRoute in apps whose one rule sends every request to web:8080.
func webRoute(name string, hostnames []string, a gwdecision.Attachment) confirmedHTTPRoute {
	return newConfirmedHTTPRoute("apps", name, hostnames, attachedTo(a),
		gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}})
}

// sortedKeys returns the keys of m in namespace, then name order.
func sortedKeys[V any](m map[cache.ObjectName]V) []cache.ObjectName {
	keys := make([]cache.ObjectName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareObjectNames)
	return keys
}
