package translate

import (
	"cmp"
	"fmt"
	"slices"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// Options are translation choices from flags.
type Options struct {
	// ManageServiceDefaults writes a service-defaults entry with Protocol "http" for
	// every backend Service of an http-route (the writer leaves any existing entry that
	// is not ours alone).
	ManageServiceDefaults bool
	// Responder is the responder's Consul service (internal/responder). Set, the
	// requests Gateway API answers with an error go to it with a directive to answer
	// 500, and RequestRedirect rules go to it with their redirect (see
	// blackhole.go); unset, the former go to the blackhole (503) and the status
	// pipeline refuses the latter.
	Responder Responder
}

// Responder names the responder's Consul service; its partition is the entries'.
type Responder struct {
	Name string
	// Namespace is its Consul Enterprise namespace; "" is the default.
	Namespace string
}

// Responder is the responder service named service, as the entries named by n reach
// it: in their destination namespace. An empty service is no responder.
func (n Naming) Responder(service string) Responder {
	if service == "" {
		return Responder{}
	}
	return Responder{Name: service, Namespace: n.DestinationNamespace}
}

// Problem is something the translation could not express for an object; the syncer
// reports it in the object's status.
type Problem struct {
	Kind   string // "Gateway", "HTTPRoute", "TCPRoute"
	Object cache.ObjectName
	// Parent is the one listener of a route the problem concerns: the route is written
	// for its other parents. Zero when the problem concerns the whole object.
	Parent  ProblemParent `json:",omitzero"`
	Message string
}

// ProblemParent is a listener of a Gateway (or of one of its ListenerSets, under the
// name the route's decision gives it) that a route attaches to.
type ProblemParent struct {
	Gateway  cache.ObjectName
	Listener gatewayv1.SectionName
}

// Desired is the set of entries Consul must hold.
type Desired struct {
	Entries  map[EntryKey]consulapi.ConfigEntry
	Problems []Problem // sorted by Kind, Object, Message
}

// Translate computes the entries Consul must hold for the confirmed snapshot. It is
// pure and deterministic: the same snapshot gives the same entries and problems,
// whatever the map iteration order.
//
// It reads only what the status pipeline decided: a Gateway's Accepted condition, its
// listeners' Accepted, ResolvedRefs and Conflicted conditions, a route's decision
// (attachments, dropped rules and what each backendRef resolved to). It never reads a
// Programmed condition: those carry Consul's verdict on what this function produced,
// and reading them would let the two chase each other.
//
// Whatever the confirmed status promises and Consul cannot be made to do exactly is
// left out, never approximated more broadly, and reported as a Problem on the object.
// The one approximation is the error Gateway API wants for the requests of a refused
// rule or an invalid backend: Consul cannot answer a request itself, so they go to a
// service no instance serves, and Envoy answers 503 (see blackhole.go).
//
// A backendRef is written as the route's decision resolved it (decision.Backend):
// the status pipeline holds the validity rules of a backend, and the translation reads
// no Service.
func Translate(s Snapshot, n Naming, o Ownership, opts Options) Desired {
	return NewTranslator(n, o, opts).Translate(s)
}

// routeTranslations are the route kinds Consul has a route entry for, in the order
// they are translated: a tcp-route reads which services the http-routes made http. A
// route kind without one (GRPCRoute: Consul 1.15 has no grpc-route) produces no entries,
// and the syncer does not hold its confirmations.
var routeTranslations = []struct {
	kind      gatewayv1.Kind
	unit      unitKind
	translate func(t *pass, key cache.ObjectName, c ConfirmedRoute)
}{
	{"HTTPRoute", unitHTTPRoute, (*pass).httpRoute},
	{"TCPRoute", unitTCPRoute, (*pass).tcpRoute},
}

// TranslatesRoutes reports whether routes of kind have a translation.
func TranslatesRoutes(kind gatewayv1.Kind) bool {
	for _, rt := range routeTranslations {
		if rt.kind == kind {
			return true
		}
	}
	return false
}

// newPass returns the state of a translator that holds nothing yet.
func newPass(n Naming, o Ownership, opts Options) *pass {
	return &pass{
		snap:         NewSnapshot(),
		naming:       n,
		owner:        o,
		opts:         opts,
		gateways:     map[cache.ObjectName]*programmedGateway{},
		listenerSets: map[cache.ObjectName][]*gatewayv1.ListenerSet{},
		backends:     map[backend]int{},
		httpServices: map[consulService]int{},
		blackholes:   map[consulService]int{},
		subsets:      map[consulService]map[string]int{},
	}
}

// pass is the state translations read: the held snapshot, and what the translations
// of other units made of it. Translator keeps it up to date across changes.
type pass struct {
	snap   Snapshot
	naming Naming
	owner  Ownership
	opts   Options
	// gateways are the Gateways that got an api-gateway entry, and their listeners in it.
	gateways map[cache.ObjectName]*programmedGateway
	// listenerSets are the accepted ListenerSets of each Gateway, in precedence order.
	listenerSets map[cache.ObjectName][]*gatewayv1.ListenerSet
	// backends are the Services written http-routes send traffic to, and httpServices
	// the Consul services they are, each with the number of routes that do.
	backends     map[backend]int
	httpServices map[consulService]int
	// blackholes are the blackhole services written http-routes use, counted alike.
	blackholes map[consulService]int
	// subsets are, per Consul service, the Kubernetes namespaces whose instances of
	// it narrowed backends reach, each with the number of backends that do.
	subsets map[consulService]map[string]int
	// out records the translation of the unit being translated (see translateObject).
	out *objectTranslation
}

// consulService identifies a Consul service: with one destination namespace, Services
// of several Kubernetes namespaces are one Consul service.
type consulService struct{ name, namespace, partition string }

// programmedGateway is a Gateway's api-gateway entry as routes need to know it.
type programmedGateway struct {
	entryName string
	namespace string
	// listeners are the Gateway's written listeners, by their names in the entry's
	// terms (gatewayapi.ListenerSetListenerName for a ListenerSet's).
	listeners map[gatewayv1.SectionName]gatewayListener
}

// gatewayListener is a written Gateway listener: the Consul listener that serves its
// port (portListeners), its own hostname ("" for any), and the hostnames of every
// Gateway listener that Consul listener serves.
type gatewayListener struct {
	consul    consulapi.APIGatewayListener
	hostname  string
	portHosts []string
}

// put adds entry to the translation of the unit being translated.
func (t *pass) put(entry consulapi.ConfigEntry) {
	t.current().entries = append(t.current().entries, entry)
}

// current is the translation in progress; a lone call (a test's) gets one of its own.
func (t *pass) current() *objectTranslation {
	if t.out == nil {
		t.out = &objectTranslation{}
	}
	return t.out
}

func (t *pass) problem(kind string, object cache.ObjectName, format string, args ...any) {
	t.addProblem(Problem{Kind: kind, Object: object, Message: fmt.Sprintf(format, args...)})
}

// parentProblems reports why a route is left out of some of its parent listeners:
// as problems of those parents when the route's entry is written (its other parents
// are served), and as the route's own when it is not, as then no parent is served.
func (t *pass) parentProblems(kind string, key cache.ObjectName, dropped []droppedParent, written bool) {
	for _, d := range dropped {
		p := Problem{Kind: kind, Object: key, Parent: d.parent, Message: d.why}
		if !written {
			p.Parent = ProblemParent{}
		}
		t.addProblem(p)
	}
}

func (t *pass) addProblem(p Problem) {
	t.current().problems = append(t.current().problems, p)
}

// ownerOf identifies obj as the owner of an entry.
func ownerOf(kind string, obj metav1.Object) Owner {
	return Owner{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID())}
}

// conditionIs reports whether conds hold condType with status.
func conditionIs(conds []metav1.Condition, condType string, status metav1.ConditionStatus) bool {
	c := meta.FindStatusCondition(conds, condType)
	return c != nil && c.Status == status
}

// backend is a Service or MeshService a route sends traffic to, as the route's
// decision resolved it (decision.Backend): the Consul service it is (the Service's
// name, the name its pods register under or the MeshService's spec.name).
type backend struct {
	Service cache.ObjectName
	Consul  string
	// MeshService: Service names a MeshService, whose Consul service Kubernetes does
	// not own; its service-defaults are its owner's to write.
	MeshService bool
	// Narrowed: pods of other namespaces register Consul too, and only the instances
	// of Service's namespace receive the traffic (narrowed.go).
	Narrowed bool
	// UID is the Service's, recorded as the owner of the backend's entries; "" for a
	// MeshService.
	UID types.UID
}

// resolvedBackend is the backend backendRef ref of a route sends traffic to, as its
// decision says; false when the decision did not resolve it (or does not hold it,
// which a decision made from the route it is confirmed with always does).
func resolvedBackend(decision gwdecision.Route, ref gwdecision.BackendRefIndex) (backend, bool) {
	b, ok := decision.Backend(ref)
	if !ok || !b.Resolved {
		return backend{}, false
	}
	return backend{Service: b.Referent, Consul: b.Consul, MeshService: b.MeshService, Narrowed: b.Narrowed, UID: b.ServiceUID}, true
}

// owner is the object b's entries are written for: its Service or MeshService (which
// has no UID here: nothing reads a MeshService's).
func (b backend) owner() Owner {
	kind := gatewayapi.ServiceKind
	if b.MeshService {
		kind = gatewayapi.MeshServiceKind
	}
	return Owner{Kind: kind, Namespace: b.Service.Namespace, Name: b.Service.Name, UID: string(b.UID)}
}

// consulName is the Consul service routes name for b: Consul itself, or the service
// of ours that reaches only the instances of b's namespace.
func (b backend) consulName(n Naming) string {
	if b.Narrowed {
		return n.NarrowedServiceName(b.Service.Namespace, b.Consul)
	}
	return n.ServiceName(b.Consul)
}

func compareObjectNames(a, b cache.ObjectName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// sortProblems orders problems by kind, object, parent and message, without
// duplicates.
func sortProblems(problems []Problem) []Problem {
	slices.SortFunc(problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), compareObjectNames(a.Object, b.Object),
			compareObjectNames(a.Parent.Gateway, b.Parent.Gateway), cmp.Compare(a.Parent.Listener, b.Parent.Listener), cmp.Compare(a.Message, b.Message))
	})
	return slices.Compact(problems)
}

func sameSet(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
