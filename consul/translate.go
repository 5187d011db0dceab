package consul

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// Options are translation choices from flags.
type Options struct {
	// ManageServiceDefaults writes a service-defaults entry with Protocol "http" for
	// every backend Service of an http-route (the writer leaves any existing entry that
	// is not ours alone).
	ManageServiceDefaults bool
}

// Problem is something the translation could not express for an object; the syncer
// reports it in the object's status.
type Problem struct {
	Kind    string // "Gateway", "HTTPRoute", "TCPRoute"
	Object  cache.ObjectName
	Message string
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
// (attachments and dropped rules) and its ResolvedRefs condition. It never reads a
// Programmed condition: those carry Consul's verdict on what this function produced,
// and reading them would let the two chase each other.
//
// Whatever the confirmed status promises and Consul cannot be made to do exactly is
// left out, never approximated more broadly, and reported as a Problem on the object.
// The one approximation is an http rule some of whose backends cannot receive traffic:
// Gateway API answers their share of requests with 500, which Consul cannot, so the
// rule's other backends receive it (see httpRule); that is reported too.
//
// s.Services may hold Services no ReferenceGrant lets a route use: a Service in
// another namespace is used only while the route's status says every reference
// resolved (see backendProblem).
func Translate(s Snapshot, n Naming, o Ownership, opts Options) Desired {
	return NewTranslator(n, o, opts).Translate(s)
}

func newTranslator(s Snapshot, n Naming, o Ownership, opts Options) *translator {
	return &translator{
		snap:         s,
		naming:       n,
		owner:        o,
		opts:         opts,
		gateways:     map[cache.ObjectName]*programmedGateway{},
		backends:     map[cache.ObjectName]bool{},
		httpServices: map[consulService]bool{},
		desired:      Desired{Entries: map[EntryKey]consulapi.ConfigEntry{}},
	}
}

// finish adds what depends on every route (the service-defaults of their backends)
// and returns the desired state.
func (t *translator) finish() Desired {
	if t.opts.ManageServiceDefaults {
		for _, key := range sortedKeys(t.backends) {
			t.put(serviceDefaults(key, t.snap.Services[key], t.naming, t.owner))
		}
	}
	t.desired.Problems = sortProblems(t.desired.Problems)
	return t.desired
}

// translator carries the inputs and what has been produced so far.
type translator struct {
	snap   Snapshot
	naming Naming
	owner  Ownership
	opts   Options
	// gateways are the Gateways that got an api-gateway entry, and their listeners in it.
	gateways map[cache.ObjectName]*programmedGateway
	// backends are the Services some written http-route sends traffic to, and
	// httpServices the Consul services they are.
	backends     map[cache.ObjectName]bool
	httpServices map[consulService]bool
	desired      Desired
	// out records the translation of the object being translated (see object).
	out *objectTranslation
	// translated counts the objects translated anew.
	translated int
}

// consulService identifies a Consul service: with one destination namespace, Services
// of several Kubernetes namespaces are one Consul service.
type consulService struct{ name, namespace, partition string }

// programmedGateway is a Gateway's api-gateway entry as routes need to know it.
type programmedGateway struct {
	entryName string
	namespace string
	listeners map[gatewayv1.SectionName]consulapi.APIGatewayListener
}

// put adds entry to the translation of the object being translated, or to the desired
// state outside of one.
func (t *translator) put(entry consulapi.ConfigEntry) {
	if t.out != nil {
		t.out.entries = append(t.out.entries, entry)
		return
	}
	t.putDesired(entry)
}

// putDesired adds entry under its key. When two objects map to one key (a Secret used
// by several Gateways, a Service used by several routes) the first wins; callers go in
// sorted order, so the winner does not depend on map iteration.
func (t *translator) putDesired(entry consulapi.ConfigEntry) {
	key := KeyOf(entry)
	if _, ok := t.desired.Entries[key]; ok {
		return
	}
	t.desired.Entries[key] = entry
}

func (t *translator) problem(kind string, object cache.ObjectName, format string, args ...any) {
	p := Problem{Kind: kind, Object: object, Message: fmt.Sprintf(format, args...)}
	if t.out != nil {
		t.out.problems = append(t.out.problems, p)
		return
	}
	t.desired.Problems = append(t.desired.Problems, p)
}

// service is the cached Service under key, nil when there is none.
func (t *translator) service(key cache.ObjectName) *corev1.Service {
	svc, _ := t.read(readService, key).(*corev1.Service)
	return svc
}

// ---- Gateways ----

// gateway writes the api-gateway entry of an accepted Gateway and the certificate
// entries its listeners use.
func (t *translator) gateway(key cache.ObjectName, gw *gatewayv1.Gateway) {
	// A Gateway that is not accepted has no listener anyone may rely on; its status
	// already says so, so that is not a problem of the translation.
	if gw == nil || !conditionIs(gw.Status.Conditions, string(gatewayv1.GatewayConditionAccepted), metav1.ConditionTrue) {
		return
	}
	var listeners []consulapi.APIGatewayListener
	var certs []consulapi.ConfigEntry
	for _, l := range gw.Spec.Listeners {
		if !listenerProgrammable(gw.Status.Listeners, l.Name) {
			continue // its status says why
		}
		listener, listenerCerts, problem := t.listener(gw, l)
		if problem == "" {
			problem = portConflict(listeners, listener)
		}
		if problem != "" {
			t.problem("Gateway", key, "listener %s: %s; it is left out of Consul", l.Name, problem)
			continue
		}
		listeners = append(listeners, listener)
		certs = append(certs, listenerCerts...)
	}
	// Consul refuses an api-gateway without listeners (config_entry_gateways.go:769).
	if len(listeners) == 0 {
		t.problem("Gateway", key, "no listener can be programmed in Consul, so the Gateway has no api-gateway entry")
		return
	}
	entry := &consulapi.APIGatewayConfigEntry{
		Kind:      consulapi.APIGateway,
		Name:      t.naming.EntryName(gw.Namespace, gw.Name),
		Namespace: t.naming.Namespace(gw.Namespace),
		Partition: t.naming.Partition,
		Listeners: listeners,
		Meta:      t.owner.Meta(ownerOf("Gateway", gw)),
	}
	t.put(entry)
	for _, c := range certs {
		t.put(c)
	}
	pg := programmedGateway{entryName: entry.Name, namespace: entry.Namespace, listeners: map[gatewayv1.SectionName]consulapi.APIGatewayListener{}}
	for _, l := range listeners {
		pg.listeners[gatewayv1.SectionName(l.Name)] = l
	}
	t.out.gateway = &pg
}

// listenerProgrammable reports whether the confirmed status says the listener can be
// written: Accepted and ResolvedRefs True, Conflicted not True. A listener without a
// status entry promises nothing.
func listenerProgrammable(statuses []gatewayv1.ListenerStatus, name gatewayv1.SectionName) bool {
	i := slices.IndexFunc(statuses, func(s gatewayv1.ListenerStatus) bool { return s.Name == name })
	if i < 0 {
		return false
	}
	conds := statuses[i].Conditions
	return conditionIs(conds, string(gatewayv1.ListenerConditionAccepted), metav1.ConditionTrue) &&
		conditionIs(conds, string(gatewayv1.ListenerConditionResolvedRefs), metav1.ConditionTrue) &&
		!conditionIs(conds, string(gatewayv1.ListenerConditionConflicted), metav1.ConditionTrue)
}

// listener translates one listener the status says is programmable, with the
// certificate entries it needs. problem is non-empty when it cannot be written as the
// status promises; the status said it was fine, so that means the caches moved on since
// the confirmation, and the next confirmation settles it.
func (t *translator) listener(gw *gatewayv1.Gateway, l gatewayv1.Listener) (consulapi.APIGatewayListener, []consulapi.ConfigEntry, string) {
	protocol := listenerProtocol(l.Protocol)
	if protocol == "" {
		return consulapi.APIGatewayListener{}, nil, fmt.Sprintf("protocol %s is not supported by Consul's API gateway", l.Protocol)
	}
	out := consulapi.APIGatewayListener{Name: string(l.Name), Port: int(l.Port), Protocol: protocol}
	// Consul refuses a hostname on a tcp listener (config_entry_gateways.go:802), and
	// Gateway API ignores it there.
	if protocol == "http" && l.Hostname != nil {
		out.Hostname = string(*l.Hostname)
	}
	if l.Protocol != gatewayv1.HTTPSProtocolType {
		return out, nil, ""
	}
	// HTTPS without certificates would be served as plain HTTP: never write that.
	if l.TLS == nil || len(l.TLS.CertificateRefs) == 0 || (l.TLS.Mode != nil && *l.TLS.Mode != gatewayv1.TLSModeTerminate) {
		return consulapi.APIGatewayListener{}, nil, "an HTTPS listener must terminate TLS with at least one certificateRef"
	}
	var certs []consulapi.ConfigEntry
	for _, ref := range l.TLS.CertificateRefs {
		cert, problem := t.certificate(gw.Namespace, ref)
		if problem != "" {
			return consulapi.APIGatewayListener{}, nil, problem
		}
		out.TLS.Certificates = append(out.TLS.Certificates, consulapi.ResourceReference{
			Kind: consulapi.InlineCertificate, Name: cert.Name, Namespace: cert.Namespace, Partition: cert.Partition,
		})
		certs = append(certs, cert)
	}
	return out, certs, ""
}

// listenerProtocol is Consul's protocol for a Gateway API listener protocol ("" when
// Consul has none): HTTPS is an http listener with certificates.
func listenerProtocol(p gatewayv1.ProtocolType) string {
	switch p {
	case gatewayv1.HTTPProtocolType, gatewayv1.HTTPSProtocolType:
		return "http"
	case gatewayv1.TCPProtocolType:
		return "tcp"
	}
	return ""
}

// certificate is the inline-certificate entry of a certificateRef of a Gateway in
// gatewayNamespace. The entry is named and placed by the Secret's namespace, so every
// Gateway that uses one Secret shares one entry.
func (t *translator) certificate(gatewayNamespace string, ref gatewayv1.SecretObjectReference) (*consulapi.InlineCertificateConfigEntry, string) {
	key := objectRef(gatewayNamespace, ref.Namespace, ref.Name)
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Secret") {
		return nil, fmt.Sprintf("certificateRef %s is not a core Secret", key)
	}
	secret, _ := t.read(readSecret, key).(*corev1.Secret)
	if secret == nil || len(secret.Data[corev1.TLSCertKey]) == 0 || len(secret.Data[corev1.TLSPrivateKeyKey]) == 0 {
		return nil, fmt.Sprintf("Secret %s with %s and %s is not in the cache", key, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	return &consulapi.InlineCertificateConfigEntry{
		Kind:        consulapi.InlineCertificate,
		Name:        t.naming.CertificateName(key.Namespace, key.Name),
		Namespace:   t.naming.Namespace(key.Namespace),
		Partition:   t.naming.Partition,
		Certificate: string(secret.Data[corev1.TLSCertKey]),
		PrivateKey:  string(secret.Data[corev1.TLSPrivateKeyKey]),
		Meta:        t.owner.Meta(ownerOf("Secret", secret)),
	}, ""
}

// portConflict returns why l cannot join listeners: Consul merges listeners on one port
// only when their hostname and protocol are equal (config_entry_gateways.go:784). The
// status pipeline never accepts two such listeners; this keeps a stale mix of
// confirmations from producing an entry Consul refuses.
func portConflict(listeners []consulapi.APIGatewayListener, l consulapi.APIGatewayListener) string {
	for _, other := range listeners {
		if other.Port == l.Port && (other.Hostname != l.Hostname || other.Protocol != l.Protocol) {
			return fmt.Sprintf("port %d is taken by listener %s", l.Port, other.Name)
		}
	}
	return ""
}

// ---- Routes: parents ----

// parentListener is one listener a route is written to.
type parentListener struct {
	gateway  cache.ObjectName
	ref      consulapi.ResourceReference
	hostname string // the listener's hostname, "" for any
}

// routeParents returns the written listeners of the route's attachments that serve
// protocol, in attachment order, each once: Consul refuses duplicate parents
// (config_entry_routes.go:152). Every parent names its listener (SectionName): a
// parent without one would bind the route to every listener, also those the route does
// not attach to.
func (t *translator) routeParents(kind string, key cache.ObjectName, attachments []gwsync.Attachment, protocol string) []parentListener {
	var parents []parentListener
	var missing []string
	for _, a := range attachments {
		gw, _ := t.read(readGateway, a.Gateway).(*programmedGateway)
		for _, name := range a.Listeners {
			var listener consulapi.APIGatewayListener
			found := false
			if gw != nil {
				listener, found = gw.listeners[name]
			}
			if !found {
				missing = append(missing, a.Gateway.String()+"/"+string(name))
				continue
			}
			if listener.Protocol != protocol {
				t.problem(kind, key, "listener %s/%s is a %s listener in Consul; the route is left out of it", a.Gateway, name, listener.Protocol)
				continue
			}
			p := parentListener{
				gateway:  a.Gateway,
				ref:      consulapi.ResourceReference{Kind: consulapi.APIGateway, Name: gw.entryName, SectionName: string(name), Namespace: gw.namespace, Partition: t.naming.Partition},
				hostname: listener.Hostname,
			}
			if !slices.ContainsFunc(parents, func(q parentListener) bool { return q.ref == p.ref }) {
				parents = append(parents, p)
			}
		}
	}
	// Listeners that are not written are the Gateway's problem, reported there; the
	// route has one only when it is served nowhere.
	if len(parents) == 0 && len(missing) > 0 {
		t.problem(kind, key, "none of the listeners the route is accepted on is programmed in Consul (%s)", strings.Join(missing, ", "))
	}
	return parents
}

func parentRefs(parents []parentListener) []consulapi.ResourceReference {
	refs := make([]consulapi.ResourceReference, len(parents))
	for i, p := range parents {
		refs[i] = p.ref
	}
	return refs
}

// ---- HTTPRoutes ----

// httpRoute writes the http-route entry of a route that is served somewhere.
func (t *translator) httpRoute(key cache.ObjectName, c ConfirmedHTTPRoute) {
	r := c.Route
	if r == nil {
		return
	}
	parents := t.routeParents("HTTPRoute", key, c.Decision.Attachments, "http")
	if len(parents) == 0 {
		return
	}
	hostnames, parents, dropped := routeHostnames(r.Spec.Hostnames, parents)
	for _, d := range dropped {
		t.problem("HTTPRoute", key, "%s", d)
	}
	if len(parents) == 0 {
		return
	}
	resolved := refsResolved(r.Status.Parents, t.owner.Controller)
	var rules []consulapi.HTTPRouteRule
	var backends []cache.ObjectName
	for i, rule := range r.Spec.Rules {
		if slices.Contains(c.Decision.DroppedRules, i) {
			continue // reported by the status pipeline (PartiallyInvalid)
		}
		out, used, problems := t.httpRule(r.Namespace, i, rule, resolved)
		for _, p := range problems {
			t.problem("HTTPRoute", key, "%s", p)
		}
		if out != nil {
			rules = append(rules, *out)
			backends = append(backends, used...)
		}
	}
	// Nothing to route: the entry would only claim the hostnames. The problems say why.
	if len(rules) == 0 {
		return
	}
	t.put(&consulapi.HTTPRouteConfigEntry{
		Kind:      consulapi.HTTPRoute,
		Name:      t.naming.EntryName(r.Namespace, r.Name),
		Namespace: t.naming.Namespace(r.Namespace),
		Partition: t.naming.Partition,
		Parents:   parentRefs(parents),
		Rules:     rules,
		Hostnames: hostnames,
		Meta:      t.owner.Meta(ownerOf("HTTPRoute", r)),
	})
	t.out.backends = append(t.out.backends, backends...)
	for _, rule := range rules {
		for _, svc := range rule.Services {
			t.out.httpServices = append(t.out.httpServices, consulService{svc.Name, svc.Namespace, svc.Partition})
		}
	}
}

// httpRule translates rule index of a route in routeNamespace. It returns nil when the
// rule is left out, with the problems that say why, and the Services it sends traffic
// to.
//
// Backends: a backendRef with weight 0 receives no traffic and is left out (Consul
// would turn its 0 into 1, config_entry_routes.go:107). A backendRef that cannot be
// resolved (see backendProblem) is left out too. Gateway API wants its share of
// requests answered with 500; Consul's http-route cannot answer anything itself, so:
//
//   - when some backends remain, they receive that share as well: the route keeps
//     serving, and a Problem says the split differs;
//   - when none remains (all invalid, all weight 0, or no backendRefs), the rule is left
//     out and a Problem says so. Its requests then get what Consul gives a request no
//     rule matches, or go to another rule that matches them, instead of a 500.
func (t *translator) httpRule(routeNamespace string, index int, rule gatewayv1.HTTPRouteRule, resolved bool) (*consulapi.HTTPRouteRule, []cache.ObjectName, []string) {
	matches, err := httpMatches(rule.Matches)
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("rule %d: %v; the rule is left out of Consul", index, err)}
	}
	filters, err := httpFilters(rule.Filters)
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("rule %d: %v; the rule is left out of Consul", index, err)}
	}
	if !rewrites(rule) {
		matches = segmentPrefixes(matches)
	}
	var services []consulapi.HTTPService
	var used []cache.ObjectName
	var invalid []string
	for b, ref := range rule.BackendRefs {
		weight := backendWeight(ref.Weight)
		if weight == 0 {
			continue
		}
		key, why := backendProblem("HTTPRoute", routeNamespace, ref.BackendObjectReference, t.service, resolved)
		if why != "" {
			invalid = append(invalid, fmt.Sprintf("backendRef %d (%s) %s", b, key, why))
			continue
		}
		backendFilters, err := httpFilters(ref.Filters)
		if err != nil {
			return nil, nil, []string{fmt.Sprintf("rule %d: backendRef %d: %v; the rule is left out of Consul", index, b, err)}
		}
		services = append(services, consulapi.HTTPService{
			Name:      t.naming.ServiceName(key.Name),
			Namespace: t.naming.Namespace(key.Namespace),
			Partition: t.naming.Partition,
			Weight:    weight,
			Filters:   backendFilters,
		})
		used = append(used, key)
	}
	if len(services) == 0 {
		why := "no backendRef has a weight above 0"
		switch {
		case len(invalid) > 0:
			why = strings.Join(invalid, "; ")
		case len(rule.BackendRefs) == 0:
			why = "it has no backendRefs"
		}
		return nil, nil, []string{fmt.Sprintf("rule %d: no backend can receive its requests (%s); Gateway API answers them with 500, which Consul's http-route cannot express, so the rule is left out of Consul", index, why)}
	}
	var problems []string
	if len(invalid) > 0 {
		problems = append(problems, fmt.Sprintf("rule %d: %s; Consul's http-route cannot answer its share of requests with 500, so the rule's other backends receive it", index, strings.Join(invalid, "; ")))
	}
	return &consulapi.HTTPRouteRule{Matches: matches, Filters: filters, Services: services}, used, problems
}

// backendWeight is a backendRef's weight: 1 when unset (the CRD default).
func backendWeight(w *int32) int {
	if w == nil {
		return 1
	}
	return max(int(*w), 0)
}

// refsResolved reports whether the route's confirmed status, in a parent entry of ours,
// says every backendRef resolved. The status pipeline computes one ResolvedRefs for the
// whole route, so any parent of ours tells.
func refsResolved(parents []gatewayv1.RouteParentStatus, controller string) bool {
	for _, p := range parents {
		if string(p.ControllerName) == controller && conditionIs(p.Conditions, string(gatewayv1.RouteConditionResolvedRefs), metav1.ConditionTrue) {
			return true
		}
	}
	return false
}

// backendProblem returns the Service a backendRef of a route of kind in routeNamespace
// names, and why it cannot be programmed ("" when it can).
//
// What the snapshot shows is checked here: a core Service (group "", kind Service, the
// CRD defaults), present, not ExternalName, with the port the ref names. What it does
// not show is taken from the confirmed status: a ReferenceGrant for a Service in
// another namespace, and for an HTTPRoute whether the port's appProtocol is one Consul
// speaks (the status pipeline's list). ResolvedRefs True vouches for both. When it is
// not True, its message names only the first failing backendRef, so a backendRef
// either of those checks could have failed is left out: a cross-namespace Service, or
// an HTTPRoute port with an appProtocol other than http. That errs towards not
// sending traffic, never towards bypassing a ReferenceGrant.
func backendProblem(kind, routeNamespace string, ref gatewayv1.BackendObjectReference, service func(cache.ObjectName) *corev1.Service, resolved bool) (cache.ObjectName, string) {
	key := objectRef(routeNamespace, ref.Namespace, ref.Name)
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Service") {
		return key, "is not a core Service"
	}
	svc := service(key)
	if svc == nil {
		return key, "names a Service that does not exist"
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return key, "names an ExternalName Service"
	}
	if ref.Port == nil {
		return key, "has no port"
	}
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == *ref.Port })
	if i < 0 {
		return key, fmt.Sprintf("names port %d, which the Service does not have", *ref.Port)
	}
	if resolved {
		return key, ""
	}
	if key.Namespace != routeNamespace {
		return key, "is in another namespace, and with the route's references not all resolved its ReferenceGrant cannot be vouched for"
	}
	if ap := svc.Spec.Ports[i].AppProtocol; kind == "HTTPRoute" && ap != nil && !strings.EqualFold(*ap, "http") {
		return key, fmt.Sprintf("has appProtocol %s, and with the route's references not all resolved it cannot be vouched for", *ap)
	}
	return key, ""
}

// httpMatches translates a rule's matches. No matches means every request: the CRD
// default is one PathPrefix "/" match.
func httpMatches(matches []gatewayv1.HTTPRouteMatch) ([]consulapi.HTTPMatch, error) {
	if len(matches) == 0 {
		return []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/"}}}, nil
	}
	out := make([]consulapi.HTTPMatch, 0, len(matches))
	for i, m := range matches {
		match, err := httpMatch(m)
		if err != nil {
			return nil, fmt.Errorf("match %d: %w", i, err)
		}
		out = append(out, match)
	}
	return out, nil
}

// rewrites reports whether a rule or one of its backendRefs rewrites the URL.
func rewrites(rule gatewayv1.HTTPRouteRule) bool {
	has := func(filters []gatewayv1.HTTPRouteFilter) bool {
		return slices.ContainsFunc(filters, func(f gatewayv1.HTTPRouteFilter) bool { return f.Type == gatewayv1.HTTPRouteFilterURLRewrite })
	}
	return has(rule.Filters) || slices.ContainsFunc(rule.BackendRefs, func(b gatewayv1.HTTPBackendRef) bool { return has(b.Filters) })
}

// segmentPrefixes makes prefix matches match whole path segments, as Gateway API's
// PathPrefix does: Consul (Envoy) matches a plain string prefix, so prefix "/v2" would
// also match "/v2example". Prefix "/v2" (or "/v2/") becomes exact "/v2" or prefix
// "/v2/", with the match's other conditions on both. Prefix "/" is already exact.
//
// Rules that rewrite the URL keep the plain prefix: Consul applies one prefix rewrite
// to all matches of a rule, and the two matches would need different replacements.
// That gap is documented in docs/consul.md.
func segmentPrefixes(matches []consulapi.HTTPMatch) []consulapi.HTTPMatch {
	out := make([]consulapi.HTTPMatch, 0, len(matches))
	for _, m := range matches {
		prefix := strings.TrimSuffix(m.Path.Value, "/")
		if m.Path.Match != consulapi.HTTPPathMatchPrefix || prefix == "" {
			out = append(out, m)
			continue
		}
		exact, subtree := m, m
		exact.Path = consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchExact, Value: prefix}
		subtree.Path = consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: prefix + "/"}
		out = append(out, exact, subtree)
	}
	return out
}

// httpMatch translates one match, applying the CRD defaults to unset fields (path
// PathPrefix "/", header and query type Exact). Types Consul has no equivalent for are
// an error: the status pipeline refuses them, so meeting one means the confirmation
// and this code disagree, and a dropped condition would widen the match.
func httpMatch(m gatewayv1.HTTPRouteMatch) (consulapi.HTTPMatch, error) {
	path, err := pathMatch(m.Path)
	if err != nil {
		return consulapi.HTTPMatch{}, err
	}
	out := consulapi.HTTPMatch{Path: path}
	for _, h := range m.Headers {
		t := gatewayv1.HeaderMatchExact
		if h.Type != nil {
			t = *h.Type
		}
		mt, ok := map[gatewayv1.HeaderMatchType]consulapi.HTTPHeaderMatchType{
			gatewayv1.HeaderMatchExact:             consulapi.HTTPHeaderMatchExact,
			gatewayv1.HeaderMatchRegularExpression: consulapi.HTTPHeaderMatchRegularExpression,
		}[t]
		if !ok {
			return consulapi.HTTPMatch{}, fmt.Errorf("header match type %s %s", t, notSupported)
		}
		out.Headers = append(out.Headers, consulapi.HTTPHeaderMatch{Match: mt, Name: string(h.Name), Value: h.Value})
	}
	for _, q := range m.QueryParams {
		t := gatewayv1.QueryParamMatchExact
		if q.Type != nil {
			t = *q.Type
		}
		mt, ok := map[gatewayv1.QueryParamMatchType]consulapi.HTTPQueryMatchType{
			gatewayv1.QueryParamMatchExact:             consulapi.HTTPQueryMatchExact,
			gatewayv1.QueryParamMatchRegularExpression: consulapi.HTTPQueryMatchRegularExpression,
		}[t]
		if !ok {
			return consulapi.HTTPMatch{}, fmt.Errorf("query param match type %s %s", t, notSupported)
		}
		out.Query = append(out.Query, consulapi.HTTPQueryMatch{Match: mt, Name: string(q.Name), Value: q.Value})
	}
	if m.Method != nil {
		method, ok := consulMethods[*m.Method]
		if !ok {
			return consulapi.HTTPMatch{}, fmt.Errorf("method %s %s", *m.Method, notSupported)
		}
		out.Method = method
	}
	return out, nil
}

// notSupported ends the messages about features the status pipeline should have
// refused.
const notSupported = "is not supported by Consul's API gateway"

// consulMethods are the methods an http-route match takes (config_entry_routes.go:346).
var consulMethods = map[gatewayv1.HTTPMethod]consulapi.HTTPMatchMethod{
	gatewayv1.HTTPMethodConnect: consulapi.HTTPMatchMethodConnect,
	gatewayv1.HTTPMethodDelete:  consulapi.HTTPMatchMethodDelete,
	gatewayv1.HTTPMethodGet:     consulapi.HTTPMatchMethodGet,
	gatewayv1.HTTPMethodHead:    consulapi.HTTPMatchMethodHead,
	gatewayv1.HTTPMethodOptions: consulapi.HTTPMatchMethodOptions,
	gatewayv1.HTTPMethodPatch:   consulapi.HTTPMatchMethodPatch,
	gatewayv1.HTTPMethodPost:    consulapi.HTTPMatchMethodPost,
	gatewayv1.HTTPMethodPut:     consulapi.HTTPMatchMethodPut,
	gatewayv1.HTTPMethodTrace:   consulapi.HTTPMatchMethodTrace,
}

// pathMatch translates a path match; unset means PathPrefix "/" (the CRD default). The
// match is always written in full, as Consul would normalize it
// (config_entry_routes.go:114), so what Consul stores equals what was written.
func pathMatch(p *gatewayv1.HTTPPathMatch) (consulapi.HTTPPathMatch, error) {
	t, value := gatewayv1.PathMatchPathPrefix, "/"
	if p != nil && p.Type != nil {
		t = *p.Type
	}
	if p != nil && p.Value != nil {
		value = *p.Value
	}
	switch t {
	case gatewayv1.PathMatchExact:
		return consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchExact, Value: value}, nil
	case gatewayv1.PathMatchPathPrefix:
		return consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: value}, nil
	case gatewayv1.PathMatchRegularExpression:
		return consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchRegularExpression, Value: value}, nil
	}
	return consulapi.HTTPPathMatch{}, fmt.Errorf("path match type %s %s", t, notSupported)
}

// httpFilters translates the filters of a rule or of a backendRef. Consul 1.15 has
// request header modification and prefix rewriting; any other filter is an error
// rather than dropped, because dropping it would change what the route does.
func httpFilters(filters []gatewayv1.HTTPRouteFilter) (consulapi.HTTPFilters, error) {
	var out consulapi.HTTPFilters
	for _, f := range filters {
		switch {
		case f.Type == gatewayv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil:
			if h, ok := headerFilter(f.RequestHeaderModifier); ok {
				out.Headers = append(out.Headers, h)
			}
		case f.Type == gatewayv1.HTTPRouteFilterURLRewrite && f.URLRewrite != nil:
			rewrite, err := urlRewrite(f.URLRewrite)
			if err != nil {
				return consulapi.HTTPFilters{}, err
			}
			if rewrite != nil {
				out.URLRewrite = rewrite
			}
		default:
			return consulapi.HTTPFilters{}, fmt.Errorf("filter %s %s", f.Type, notSupported)
		}
	}
	return out, nil
}

// headerFilter translates a RequestHeaderModifier; ok is false when it changes nothing.
func headerFilter(h *gatewayv1.HTTPHeaderFilter) (consulapi.HTTPHeaderFilter, bool) {
	out := consulapi.HTTPHeaderFilter{Add: headerMap(h.Add), Set: headerMap(h.Set)}
	if len(h.Remove) > 0 {
		out.Remove = slices.Clone(h.Remove)
	}
	return out, out.Add != nil || out.Set != nil || out.Remove != nil
}

// headerMap turns a header list into Consul's map; nil when empty. Names are unique
// per list (the CRD's listMapKey), so nothing is lost.
func headerMap(headers []gatewayv1.HTTPHeader) map[string]string {
	if len(headers) == 0 {
		return nil
	}
	m := make(map[string]string, len(headers))
	for _, h := range headers {
		m[string(h.Name)] = h.Value
	}
	return m
}

// urlRewrite translates a URLRewrite. Consul's URLRewrite.Path is a prefix
// replacement (Envoy prefix_rewrite), so only ReplacePrefixMatch has an equivalent. An
// empty replacement is written as "/": Consul treats "" as no rewrite at all.
func urlRewrite(rw *gatewayv1.HTTPURLRewriteFilter) (*consulapi.URLRewrite, error) {
	if rw.Hostname != nil {
		return nil, fmt.Errorf("filter URLRewrite hostname %s", notSupported)
	}
	if rw.Path == nil {
		return nil, nil
	}
	if rw.Path.Type != gatewayv1.PrefixMatchHTTPPathModifier {
		return nil, fmt.Errorf("filter URLRewrite path type %s %s", rw.Path.Type, notSupported)
	}
	path := "/"
	if rw.Path.ReplacePrefixMatch != nil && *rw.Path.ReplacePrefixMatch != "" {
		path = *rw.Path.ReplacePrefixMatch
	}
	return &consulapi.URLRewrite{Path: path}, nil
}

// ---- HTTPRoute hostnames ----

// routeHostnames decides the Hostnames of an http-route entry written to parents. Consul
// 1.15 refuses wildcard route hostnames (config_entry_routes.go:135), and one entry's
// hostnames apply to every parent, filtered per listener by Consul's own rule
// (consulServedHostnames). So for each parent the hostnames Gateway API serves through
// it (intersectHostnames) are worked out, and one list is looked for that makes Consul
// serve exactly those on every parent:
//
//   - the concrete plan: the union of what every parent serves, when none of that is a
//     wildcard. Route hostnames that intersect no listener are left out: Consul's
//     suffix filter would otherwise serve "example.com" or "badexample.com" on a
//     "*.example.com" listener.
//   - the listener plan: no hostnames, so Consul serves each listener's own hostname.
//     Right exactly where a parent serves its listener's hostname and nothing else,
//     which is what a route wildcard that is as broad as the listener's hostname or
//     broader gives ("*.example.com" on a "*.example.com" or "a.example.com" listener).
//
// A parent neither plan serves exactly (a wildcard route hostname on a listener without
// hostname or with a broader wildcard, or hostnames that parents need differently) is
// left out, with a message: the route is served more narrowly than its status says,
// never more broadly. The plan that keeps more parents wins, the concrete plan on a tie.
func routeHostnames(route []gatewayv1.Hostname, parents []parentListener) ([]string, []parentListener, []string) {
	if len(route) == 0 {
		return nil, parents, nil // Consul serves each listener's hostname, as Gateway API does
	}
	served := make([][]string, len(parents))
	for i, p := range parents {
		served[i] = minimalHostnames(intersectHostnames(p.hostname, route))
	}
	hosts, keepConcrete := concretePlan(parents, served)
	keepListener := listenerPlan(parents, served)
	if countTrue(keepListener) > countTrue(keepConcrete) {
		hosts, keepConcrete = nil, keepListener
	}
	var kept []parentListener
	var dropped []string
	for i, p := range parents {
		if keepConcrete[i] {
			kept = append(kept, p)
			continue
		}
		dropped = append(dropped, hostnameProblem(p, hosts, served[i]))
	}
	return hosts, kept, dropped
}

// concretePlan returns the union of the hostnames the parents serve and which parents
// Consul then serves exactly. Parents that need a wildcard or are served too much are
// dropped until the rest agree; dropping a parent only shrinks the union, so that ends.
func concretePlan(parents []parentListener, served [][]string) ([]string, []bool) {
	keep := make([]bool, len(parents))
	for i := range parents {
		keep[i] = len(served[i]) > 0 && !slices.ContainsFunc(served[i], isWildcard)
	}
	for {
		var hosts []string
		for i := range parents {
			for _, h := range served[i] {
				if keep[i] && !slices.Contains(hosts, h) {
					hosts = append(hosts, h)
				}
			}
		}
		changed := false
		for i, p := range parents {
			if keep[i] && !sameSet(consulServedHostnames(hosts, p.hostname), served[i]) {
				keep[i], changed = false, true
			}
		}
		if !changed {
			return hosts, keep
		}
	}
}

// listenerPlan returns which parents an entry without hostnames serves exactly: those
// that serve their listener's hostname and nothing else.
func listenerPlan(parents []parentListener, served [][]string) []bool {
	keep := make([]bool, len(parents))
	for i, p := range parents {
		keep[i] = p.hostname != "" && len(served[i]) == 1 && served[i][0] == p.hostname
	}
	return keep
}

// hostnameProblem says why parent p, whose listener serves served, is left out when
// the entry has hostnames hosts.
func hostnameProblem(p parentListener, hosts, served []string) string {
	listener := fmt.Sprintf("listener %s/%s", p.gateway, p.ref.SectionName)
	listenerHost := "no hostname"
	if p.hostname != "" {
		listenerHost = fmt.Sprintf("hostname %q", p.hostname)
	}
	switch {
	case len(served) == 0:
		return fmt.Sprintf("%s: its %s matches none of the route's hostnames; the route is left out of it", listener, listenerHost)
	case slices.ContainsFunc(served, isWildcard):
		return fmt.Sprintf("%s: the route's hostnames there are %v; Consul 1.15 takes no wildcard hostnames on an http-route, and only a listener hostname equal to or narrower than the wildcard can stand in for it (this listener has %s), so the route is left out of this listener", listener, served, listenerHost)
	}
	return fmt.Sprintf("%s: the route's hostnames there are %v, but with the hostnames its other listeners need Consul 1.15 would serve %v (it matches route hostnames to a wildcard listener by suffix); the route is left out of this listener",
		listener, served, consulServedHostnames(hosts, p.hostname))
}

// minimalHostnames drops the hostnames a wildcard in the same list already covers: the
// list serves the same requests without them.
func minimalHostnames(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if !slices.ContainsFunc(hosts, func(w string) bool { return w != h && wildcardMatches(w, h) }) {
			out = append(out, h)
		}
	}
	return out
}

// intersectHostnames returns the hostnames Gateway API serves for a route through a
// listener with hostname listener ("" for any): each route hostname that overlaps the
// listener's, as the more specific of the two, deduplicated, in route order. A wildcard
// stands for one or more labels, so "*.example.com" matches neither "example.com" nor
// "badexample.com". The status pipeline applies the same rules (sync/hostnames.go).
func intersectHostnames(listener string, route []gatewayv1.Hostname) []string {
	var hosts []string
	for _, r := range route {
		host, ok := hostnameIntersection(listener, string(r))
		if ok && !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	return hosts
}

func hostnameIntersection(listener, route string) (string, bool) {
	switch {
	case listener == "", listener == route, wildcardMatches(listener, route):
		return route, true
	case wildcardMatches(route, listener):
		return listener, true
	}
	return "", false
}

// wildcardMatches reports whether pattern is a wildcard that matches host (which may be
// a narrower wildcard).
func wildcardMatches(pattern, host string) bool {
	suffix, ok := strings.CutPrefix(pattern, "*")
	if !ok {
		return false
	}
	labels, found := strings.CutSuffix(host, suffix)
	return found && labels != ""
}

func isWildcard(host string) bool { return strings.HasPrefix(host, "*") }

// consulServedHostnames is what Consul 1.15 serves of an http-route with hostnames
// entry on a listener with hostname listener: HTTPRouteConfigEntry.FilteredHostnames
// (config_entry_routes.go:307), called with APIGatewayListener.GetHostname.
func consulServedHostnames(entry []string, listener string) []string {
	if listener == "" {
		listener = "*"
	}
	if len(entry) == 0 {
		return []string{listener}
	}
	wildcard := strings.ContainsRune(listener, '*')
	suffix := strings.TrimPrefix(strings.TrimPrefix(listener, "*"), ".")
	var hosts []string
	for _, h := range entry {
		if (wildcard && strings.HasSuffix(h, suffix)) || (!wildcard && h == suffix) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// ---- TCPRoutes ----

// tcpRoute writes the tcp-route entry of a route that is served somewhere. Consul's
// tcp-route forwards to at most one service (config_entry_routes.go:539), and TCPRoute
// has one rule; the status pipeline refuses rules that would send traffic to more than
// one backend.
func (t *translator) tcpRoute(key cache.ObjectName, c ConfirmedTCPRoute) {
	r := c.Route
	if r == nil {
		return
	}
	parents := t.routeParents("TCPRoute", key, c.Decision.Attachments, "tcp")
	if len(parents) == 0 {
		return
	}
	resolved := refsResolved(r.Status.Parents, t.owner.Controller)
	var services []consulapi.TCPService
	for i, rule := range r.Spec.Rules {
		if slices.Contains(c.Decision.DroppedRules, i) {
			continue
		}
		service, problem := t.tcpRule(r.Namespace, i, rule, resolved)
		if problem != "" {
			t.problem("TCPRoute", key, "%s", problem)
			continue
		}
		services = append(services, service)
	}
	// Without a service there is nothing to forward to: Gateway API refuses the
	// connections, and Consul gets no route that could accept them.
	if len(services) == 0 {
		return
	}
	if len(services) > 1 {
		t.problem("TCPRoute", key, "%d rules have a backend, but Consul's tcp-route forwards to a single service; the route is left out of Consul", len(services))
		return
	}
	// The service-defaults written for http-route backends make the service http, and
	// Consul 1.15 refuses a tcp-route to an http service ("route protocol does not match
	// targeted service protocol"). The http-routes keep it; this route cannot have it.
	if svc := services[0]; t.opts.ManageServiceDefaults && t.read(readHTTPService, consulService{svc.Name, svc.Namespace, svc.Partition}).(bool) {
		t.problem("TCPRoute", key, "Consul service %s is also an HTTPRoute backend, so its service-defaults declare protocol http, and Consul's tcp-route cannot forward to an http service; the route is left out of Consul", svc.Name)
		return
	}
	t.put(&consulapi.TCPRouteConfigEntry{
		Kind:      consulapi.TCPRoute,
		Name:      t.naming.EntryName(r.Namespace, r.Name),
		Namespace: t.naming.Namespace(r.Namespace),
		Partition: t.naming.Partition,
		Parents:   parentRefs(parents),
		Services:  services,
		Meta:      t.owner.Meta(ownerOf("TCPRoute", r)),
	})
}

// tcpRule returns the one service a TCP rule forwards to, or why it has none.
// backendRefs with weight 0 receive no connections and are not counted.
func (t *translator) tcpRule(routeNamespace string, index int, rule gatewayv1.TCPRouteRule, resolved bool) (consulapi.TCPService, string) {
	var refs []gatewayv1.BackendRef
	for _, ref := range rule.BackendRefs {
		if backendWeight(ref.Weight) > 0 {
			refs = append(refs, ref)
		}
	}
	switch len(refs) {
	case 0:
		return consulapi.TCPService{}, fmt.Sprintf("rule %d: no backendRef has a weight above 0; the rule is left out of Consul", index)
	case 1:
	default:
		return consulapi.TCPService{}, fmt.Sprintf("rule %d: %d backends would receive connections, but Consul's tcp-route forwards to a single service; the rule is left out of Consul", index, len(refs))
	}
	key, why := backendProblem("TCPRoute", routeNamespace, refs[0].BackendObjectReference, t.service, resolved)
	if why != "" {
		return consulapi.TCPService{}, fmt.Sprintf("rule %d: backendRef %s %s; the rule is left out of Consul", index, key, why)
	}
	return consulapi.TCPService{Name: t.naming.ServiceName(key.Name), Namespace: t.naming.Namespace(key.Namespace), Partition: t.naming.Partition}, ""
}

// ---- service-defaults ----

// serviceDefaults is the service-defaults entry that declares a backend Service of an
// http-route as http: Consul 1.15 refuses an http-route to a service of any other
// protocol ("route protocol does not match targeted service protocol"). Only Services
// present in the snapshot become backends.
func serviceDefaults(key cache.ObjectName, svc *corev1.Service, n Naming, o Ownership) *consulapi.ServiceConfigEntry {
	return &consulapi.ServiceConfigEntry{
		Kind:      consulapi.ServiceDefaults,
		Name:      n.ServiceName(key.Name),
		Namespace: n.Namespace(key.Namespace),
		Partition: n.Partition,
		Protocol:  "http",
		Meta:      o.Meta(ownerOf("Service", svc)),
	}
}

// ---- helpers ----

// ownerOf identifies obj as the owner of an entry.
func ownerOf(kind string, obj metav1.Object) Owner {
	return Owner{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID())}
}

// conditionIs reports whether conds hold condType with status.
func conditionIs(conds []metav1.Condition, condType string, status metav1.ConditionStatus) bool {
	c := meta.FindStatusCondition(conds, condType)
	return c != nil && c.Status == status
}

// objectRef is the object a reference names; its namespace defaults to from's.
func objectRef(from string, namespace *gatewayv1.Namespace, name gatewayv1.ObjectName) cache.ObjectName {
	if namespace != nil && *namespace != "" {
		return cache.ObjectName{Namespace: string(*namespace), Name: string(name)}
	}
	return cache.ObjectName{Namespace: from, Name: string(name)}
}

func sortedKeys[V any](m map[cache.ObjectName]V) []cache.ObjectName {
	keys := make([]cache.ObjectName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareObjectNames)
	return keys
}

func compareObjectNames(a, b cache.ObjectName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// sortProblems orders problems by kind, object and message, without duplicates.
func sortProblems(problems []Problem) []Problem {
	slices.SortFunc(problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), compareObjectNames(a.Object, b.Object), cmp.Compare(a.Message, b.Message))
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
