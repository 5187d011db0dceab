package sync

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/fuzzgen"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// fuzzSeeds are inputs every target starts from: nothing, and bytes that reach
// several listeners, rules and parents.
func fuzzSeeds(f *testing.F) {
	f.Add([]byte{}, "", "")
	f.Add([]byte{3, 0, 1, 1, 2, 1, 3, 2, 0, 4, 1, 0, 2, 2, 1, 3, 0, 1, 1, 2, 0, 3, 1, 1, 0, 2, 2, 0, 1, 3, 2, 1, 0}, "a.example.com", "/a")
	f.Add([]byte("\x03\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"), "*.example.com", "/a/b")
	f.Add([]byte("wildcard hostnames, dropped rules and listeners on one port"), "x.badexample.com", "/")
	for _, seed := range fuzzgen.Seeds(64) {
		f.Add(seed, "", "")
	}
}

// fuzzListeners are listeners named from names, each name once (the CRD's listMapKey).
func fuzzListeners(in *fuzzgen.Input, names []gatewayv1.SectionName) []gatewayv1.Listener {
	var out []gatewayv1.Listener
	for _, l := range in.Listeners(names, gatewayv1.SecretObjectReference{Namespace: ptrTo(gatewayv1.Namespace("infra")), Name: "tls"}) {
		if !slices.ContainsFunc(out, func(o gatewayv1.Listener) bool { return o.Name == l.Name }) {
			out = append(out, l)
		}
	}
	return out
}

// fuzzRoute is an HTTPRoute apps/r with one or two parentRefs to infra/gw or to
// ListenerSet apps/s: the whole parent, one of its listeners, one it does not have,
// or a port.
func fuzzRoute(in *fuzzgen.Input, gw *gatewayv1.Gateway, set *gatewayv1.ListenerSet) *gatewayv1.HTTPRoute {
	r := httpRoute("apps", "r", nil)
	r.Spec.Hostnames = in.RouteHostnames()
	r.Spec.Rules = in.HTTPRules()
	for range 1 + in.Intn(2) {
		ref := parentRef("infra", "gw", sectionOf(in, gw.Spec.Listeners))
		if set != nil && in.Intn(3) == 0 {
			ref = listenerSetRef("apps", "s", sectionOf(in, listenerEntries(set)))
		}
		if in.Intn(8) == 0 {
			ref.Port = ptrTo(fuzzgen.Pick(in, []gatewayv1.PortNumber{80, 443}))
		}
		if !slices.ContainsFunc(r.Spec.ParentRefs, func(p gatewayv1.ParentReference) bool { return cmp.Equal(p, ref) }) {
			r.Spec.ParentRefs = append(r.Spec.ParentRefs, ref)
		}
	}
	return r
}

// sectionOf is the name of one of listeners, "" (all of them) or one none has.
func sectionOf(in *fuzzgen.Input, listeners []gatewayv1.Listener) string {
	switch i := in.Intn(len(listeners) + 2); i {
	case len(listeners):
		return ""
	case len(listeners) + 1:
		return "nope"
	default:
		return string(listeners[i].Name)
	}
}

// routeObjects are the objects around a fuzzed route: namespaces, Services web and api
// in apps and web in other (which a ReferenceGrant may open), the certificate Secret,
// Gateway infra/gw with fuzzed listeners and perhaps ListenerSet apps/s of it.
func routeObjects(in *fuzzgen.Input, secret *corev1.Secret) ([]runtime.Object, *gatewayv1.Gateway, *gatewayv1.ListenerSet) {
	gw := allowListeners(gateway("infra", "gw", fuzzListeners(in, []gatewayv1.SectionName{"l0", "l1", "l2"})...), gatewayv1.NamespacesFromAll, nil)
	objs := []runtime.Object{
		ourClass(), namespace("apps", nil), namespace("infra", nil), namespace("other", nil),
		service("apps", "web", 8080), service("apps", "api", 8080), service("other", "web", 8080), secret, gw,
	}
	if in.Bool() {
		objs = append(objs, refGrant("other", "routes", []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}},
			[]gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}}))
	}
	var set *gatewayv1.ListenerSet
	if in.Bool() {
		set = listenerSet("apps", "s", 1, fuzzListeners(in, []gatewayv1.SectionName{"l0", "x"})...)
		objs = append(objs, set)
	}
	return objs, gw, set
}

// servable is a listener a route may be served on, under its name in Consul.
type servable struct {
	entry    gatewayv1.SectionName
	listener gatewayv1.Listener
	// namespace is that of the object that declares the listener.
	namespace string
	// namedBy reports whether a parentRef names the listener.
	namedBy func(ref gatewayv1.ParentReference) bool
}

// servables are the listeners of gw and of sets (nil ones left out).
func servables(gw *gatewayv1.Gateway, sets ...*gatewayv1.ListenerSet) []servable {
	var out []servable
	for _, l := range gw.Spec.Listeners {
		out = append(out, servable{l.Name, l, gw.Namespace, func(ref gatewayv1.ParentReference) bool {
			return !gatewayapi.IsListenerSet(ref) && refNamesListener(ref, l)
		}})
	}
	for _, set := range sets {
		if set == nil {
			continue
		}
		for _, entry := range set.Spec.Listeners {
			l := gatewayv1.Listener(entry)
			out = append(out, servable{gatewayapi.ListenerSetListenerName(cache.MetaObjectToName(set), l.Name), l, set.Namespace, func(ref gatewayv1.ParentReference) bool {
				return gatewayapi.IsListenerSet(ref) && string(ref.Name) == set.Name && refNamesListener(ref, l)
			}})
		}
	}
	return out
}

func refNamesListener(ref gatewayv1.ParentReference, l gatewayv1.Listener) bool {
	return (ref.SectionName == nil || *ref.SectionName == l.Name) && (ref.Port == nil || *ref.Port == l.Port)
}

// FuzzRouteStatus decides the status of HTTPRoutes built from the fuzzer's input and
// checks: no panic or error; every rule the decision drops is named in the status of
// every parent that accepts the route, and only those, and a route whose every rule is
// dropped is accepted and served nowhere (checkDroppedRulesReported); the route is
// served only where its status accepts it, on listeners of the Gateway or its
// ListenerSet whose hostname overlaps the route's (checkAttachments), and a valid
// route is accepted and served on every valid listener a parentRef names whose
// hostname overlaps the route's (checkValidListenersServe); the unresolved
// backendRefs are what ResolvedRefs says; the Gateway or ListenerSet counts the route
// on every listener it is served on; and the same objects in another order give the
// same status and decision, the route hostnames in another order the same decision.
func FuzzRouteStatus(f *testing.F) {
	fuzzSeeds(f)
	secret := tlsSecret(f, "infra", "tls")
	now := metav1.Now()
	f.Fuzz(func(t *testing.T, data []byte, host, path string) {
		in := fuzzgen.New(data, host, path)
		objs, gw, set := routeObjects(in, secret)
		route := fuzzRoute(in, gw, set)
		parents, decision := routeStatusOf(t, append(objs, route), route, now)
		checkDroppedRulesReported(t, route, parents, decision)
		checkAttachments(t, servables(gw, set), route, parents, decision)
		checkValidListenersServe(t, servables(gw, set), route, parents, decision)
		checkUnresolvedReported(t, route, parents, decision)
		checkAttachedRoutesCounted(t, append(objs, route), set, decision, now)
		reversed := slices.Clone(append(objs, route))
		slices.Reverse(reversed)
		again, againDecision := routeStatusOf(t, reversed, route, now)
		if diff := cmp.Diff(parents, again); diff != "" {
			t.Errorf("status differs with the objects in another order:\n%s", diff)
		}
		if diff := cmp.Diff(decision, againDecision); diff != "" {
			t.Errorf("decision differs with the objects in another order:\n%s", diff)
		}
		checkHostnamesOrderFree(t, objs, route, decision, now)
	})
}

// checkHostnamesOrderFree: route hostnames are a set, so in reverse order they give
// the same decision.
func checkHostnamesOrderFree(t *testing.T, objs []runtime.Object, route *gatewayv1.HTTPRoute, decision decision.Route, now metav1.Time) {
	t.Helper()
	reversed := route.DeepCopy()
	slices.Reverse(reversed.Spec.Hostnames)
	_, again := routeStatusOf(t, append(slices.Clone(objs), reversed), reversed, now)
	if diff := cmp.Diff(decision, again); diff != "" {
		t.Errorf("decision differs with the route hostnames %v reversed:\n%s", route.Spec.Hostnames, diff)
	}
}

func routeStatusOf(t *testing.T, objs []runtime.Object, route *gatewayv1.HTTPRoute, now metav1.Time) ([]gatewayv1.RouteParentStatus, decision.Route) {
	t.Helper()
	d := newTestDecider(t, objs...)
	view, rules, err := d.viewRoute(route)
	if err != nil {
		t.Fatal(err)
	}
	parents, decision, err := d.routeParentStatuses(view, rules, nil, route.Generation, now)
	if err != nil {
		t.Fatal(err)
	}
	return parents, decision
}

// ruleIndexes are the "rule N:" a status message names.
var ruleIndexes = regexp.MustCompile(`rule (\d+): `)

func namedRules(msg string) []int {
	var out []int
	for _, m := range ruleIndexes.FindAllStringSubmatch(msg, -1) {
		i, _ := strconv.Atoi(m[1])
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// checkDroppedRulesReported: the dropped rules are indexes of rules, in order; every
// parent that accepts the route names exactly them in PartiallyInvalid ("Dropped
// Rule(s)..."), and a route none of whose rules can be programmed is accepted nowhere
// and served nowhere; a parent that refuses it for that (UnsupportedValue) names each
// rule.
func checkDroppedRulesReported(t *testing.T, route *gatewayv1.HTTPRoute, parents []gatewayv1.RouteParentStatus, decision decision.Route) {
	t.Helper()
	n := len(route.Spec.Rules)
	if !slices.IsSorted(decision.DroppedRules) || slices.ContainsFunc(decision.DroppedRules, func(i int) bool { return i < 0 || i >= n }) {
		t.Fatalf("dropped rules %v of %d rules", decision.DroppedRules, n)
	}
	allDropped := n > 0 && len(decision.DroppedRules) == n
	if allDropped && len(decision.Attachments) > 0 {
		t.Errorf("every rule dropped, yet served on %v", decision.Attachments)
	}
	for _, p := range parents {
		accepted := meta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted))
		partial := meta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionPartiallyInvalid))
		switch {
		case allDropped && accepted.Status == metav1.ConditionTrue:
			t.Errorf("parent %s: every rule dropped, yet Accepted %q", p.ParentRef.Name, accepted.Message)
		case accepted.Status == metav1.ConditionTrue && len(decision.DroppedRules) == 0:
			if partial != nil {
				t.Errorf("parent %s: PartiallyInvalid %q without a dropped rule", p.ParentRef.Name, partial.Message)
			}
		case accepted.Status == metav1.ConditionTrue:
			if partial == nil || partial.Status != metav1.ConditionTrue || !strings.HasPrefix(partial.Message, "Dropped Rule") ||
				!slices.Equal(namedRules(partial.Message), decision.DroppedRules) {
				t.Errorf("parent %s: dropped rules %v, PartiallyInvalid %+v", p.ParentRef.Name, decision.DroppedRules, partial)
			}
		case allDropped && accepted.Reason == string(gatewayv1.RouteReasonUnsupportedValue):
			if !slices.Equal(namedRules(accepted.Message), decision.DroppedRules) {
				t.Errorf("parent %s: dropped rules %v, Accepted %q", p.ParentRef.Name, decision.DroppedRules, accepted.Message)
			}
		}
	}
}

// checkAttachments: the route is served only through a parentRef that accepts it,
// on existing HTTP or HTTPS listeners of the Gateway or its ListenerSet that the
// parentRef names, whose hostname overlaps one of the route's.
func checkAttachments(t *testing.T, listeners []servable, route *gatewayv1.HTTPRoute, parents []gatewayv1.RouteParentStatus, decision decision.Route) {
	t.Helper()
	for _, a := range decision.Attachments {
		if a.Gateway != (cache.ObjectName{Namespace: "infra", Name: "gw"}) || len(a.Listeners) == 0 {
			t.Errorf("attachment %+v", a)
			continue
		}
		for _, name := range a.Listeners {
			i := slices.IndexFunc(listeners, func(l servable) bool { return l.entry == name })
			if i < 0 {
				t.Errorf("served on listener %s, which neither the Gateway nor its ListenerSet has", name)
				continue
			}
			checkListenerGranted(t, listeners[i], route, parents)
		}
	}
}

func checkListenerGranted(t *testing.T, s servable, route *gatewayv1.HTTPRoute, parents []gatewayv1.RouteParentStatus) {
	t.Helper()
	l := s.listener
	if l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType {
		t.Errorf("HTTPRoute served on %s listener %s", l.Protocol, s.entry)
	}
	if len(route.Spec.Hostnames) > 0 && !slices.ContainsFunc(route.Spec.Hostnames, func(h gatewayv1.Hostname) bool { return hostnamesOverlap(l.Hostname, h) }) {
		t.Errorf("served on listener %s (hostname %v), which none of %v overlaps", s.entry, ptrString(l.Hostname), route.Spec.Hostnames)
	}
	if !slices.ContainsFunc(parents, func(p gatewayv1.RouteParentStatus) bool {
		return meta.IsStatusConditionTrue(p.Conditions, string(gatewayv1.RouteConditionAccepted)) && s.namedBy(p.ParentRef)
	}) {
		t.Errorf("served on listener %s, which no parentRef that accepts the route names", s.entry)
	}
}

// checkValidListenersServe is checkAttachments the other way round: a route with
// DNS hostnames and a rule that is not dropped is accepted by each parentRef that names
// a valid HTTP or HTTPS listener (validListener) whose hostname overlaps one of the
// route's, and is served on that listener. A route whose every rule is dropped is
// refused there for its rules (UnsupportedValue), not for want of a listener.
func checkValidListenersServe(t *testing.T, listeners []servable, route *gatewayv1.HTTPRoute, parents []gatewayv1.RouteParentStatus, decision decision.Route) {
	t.Helper()
	if slices.ContainsFunc(route.Spec.Hostnames, func(h gatewayv1.Hostname) bool { return !dnsHostname(h) }) {
		return
	}
	allDropped := len(route.Spec.Rules) > 0 && len(decision.DroppedRules) == len(route.Spec.Rules)
	for _, p := range parents {
		for _, s := range listeners {
			if s.namedBy(p.ParentRef) && servesRoute(s, listeners, route) {
				checkServedOn(t, p, s, allDropped, decision)
			}
		}
	}
}

// checkServedOn: parent p, which names valid listener s, accepts the route and it is
// served on s; or, every rule dropped, p refuses it for its rules.
func checkServedOn(t *testing.T, p gatewayv1.RouteParentStatus, s servable, allDropped bool, decision decision.Route) {
	t.Helper()
	accepted := meta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted))
	if allDropped {
		if accepted.Status != metav1.ConditionFalse || accepted.Reason != string(gatewayv1.RouteReasonUnsupportedValue) {
			t.Errorf("parent %s names valid listener %s, every rule is dropped, yet Accepted is %s/%s", p.ParentRef.Name, s.entry, accepted.Status, accepted.Reason)
		}
		return
	}
	switch {
	case accepted.Status != metav1.ConditionTrue:
		t.Errorf("parent %s names valid listener %s (hostname %s), yet Accepted is %s/%s: %s",
			p.ParentRef.Name, s.entry, ptrString(s.listener.Hostname), accepted.Status, accepted.Reason, accepted.Message)
	case !attachedTo(decision, s.entry):
		t.Errorf("parent %s accepts the route on valid listener %s, yet it is not served there: attachments %+v", p.ParentRef.Name, s.entry, decision.Attachments)
	}
}

// servesRoute reports whether s is a valid listener route may attach to: HTTP or
// HTTPS, with a hostname that overlaps one of the route's.
func servesRoute(s servable, listeners []servable, route *gatewayv1.HTTPRoute) bool {
	l := s.listener
	if l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType || !validListener(s, listeners) {
		return false
	}
	return len(route.Spec.Hostnames) == 0 || slices.ContainsFunc(route.Spec.Hostnames, func(h gatewayv1.Hostname) bool { return hostnamesOverlap(l.Hostname, h) })
}

func attachedTo(route decision.Route, entry gatewayv1.SectionName) bool {
	return slices.ContainsFunc(route.Attachments, func(a decision.Attachment) bool {
		return a.Gateway == (cache.ObjectName{Namespace: "infra", Name: "gw"}) && slices.Contains(a.Listeners, entry)
	})
}

// validListener reports whether s, one of the listeners merged into a Gateway (its own
// and its ListenerSets'), is valid by what the fuzz targets vary, written out
// independently of the code under test: a protocol Consul serves (HTTP, HTTPS, TCP), a
// DNS hostname or none, a name in Consul and a port no other listener has, and for
// HTTPS a certificate in the listener's own namespace (the fuzz targets grant no
// Secret across namespaces). It says nothing of the listeners it does not call valid.
func validListener(s servable, listeners []servable) bool {
	l := s.listener
	switch l.Protocol {
	case gatewayv1.HTTPProtocolType, gatewayv1.TCPProtocolType:
	case gatewayv1.HTTPSProtocolType:
		if !certInOwnNamespace(l, s.namespace) {
			return false
		}
	default:
		return false
	}
	if l.Hostname != nil && !dnsHostname(*l.Hostname) {
		return false
	}
	shared := 0
	for _, o := range listeners {
		if o.entry == s.entry || o.listener.Port == l.Port {
			shared++
		}
	}
	return shared == 1
}

// certInOwnNamespace reports whether the listener's one certificate is a Secret in
// namespace, its own.
func certInOwnNamespace(l gatewayv1.Listener, namespace string) bool {
	if l.TLS == nil || len(l.TLS.CertificateRefs) != 1 {
		return false
	}
	ref := l.TLS.CertificateRefs[0]
	return ref.Namespace == nil || string(*ref.Namespace) == namespace
}

// dnsHostname reports whether h is a hostname the CRD admits and not an IP address,
// which Gateway API does not allow as a hostname.
func dnsHostname(h gatewayv1.Hostname) bool {
	return hostnamePattern.MatchString(string(h)) && net.ParseIP(string(h)) == nil
}

// hostnamesOverlap is the Gateway API rule, written out again independently of the
// code under test: no listener hostname overlaps all, a wildcard stands for one or
// more labels.
func hostnamesOverlap(listener *gatewayv1.Hostname, route gatewayv1.Hostname) bool {
	if listener == nil {
		return true
	}
	covers := func(pattern, host string) bool {
		suffix, wildcard := strings.CutPrefix(pattern, "*")
		return pattern == host || wildcard && strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return covers(string(*listener), string(route)) || covers(string(route), string(*listener))
}

func ptrString[T ~string](p *T) string {
	if p == nil {
		return "<none>"
	}
	return string(*p)
}

// checkUnresolvedReported: the decision says what each backendRef resolved to, and
// ResolvedRefs is False exactly when some did not resolve.
func checkUnresolvedReported(t *testing.T, route *gatewayv1.HTTPRoute, parents []gatewayv1.RouteParentStatus, decided decision.Route) {
	t.Helper()
	checkEveryBackendDecided(t, route, decided)
	unresolved := decided.Unresolved()
	for _, p := range parents {
		resolved := meta.IsStatusConditionTrue(p.Conditions, string(gatewayv1.RouteConditionResolvedRefs))
		if resolved != (len(unresolved) == 0) {
			t.Errorf("parent %s: ResolvedRefs %v, unresolved %v", p.ParentRef.Name, resolved, unresolved)
		}
	}
}

// checkEveryBackendDecided: the decision holds one Backend per backendRef of the
// route, in rule and backendRef order, each naming the object its backendRef names.
func checkEveryBackendDecided(t *testing.T, route *gatewayv1.HTTPRoute, decided decision.Route) {
	t.Helper()
	var want []decision.BackendRefIndex
	for r, rule := range route.Spec.Rules {
		for b := range rule.BackendRefs {
			want = append(want, decision.BackendRefIndex{Rule: r, Ref: b})
		}
	}
	var got []decision.BackendRefIndex
	for _, b := range decided.Backends {
		got = append(got, b.Ref)
		if b.Ref.Rule >= len(route.Spec.Rules) || b.Ref.Ref >= len(route.Spec.Rules[b.Ref.Rule].BackendRefs) {
			continue
		}
		ref := route.Spec.Rules[b.Ref.Rule].BackendRefs[b.Ref.Ref]
		if referent := gatewayapi.Referent(route.Namespace, ref.Namespace, ref.Name); b.Referent != referent {
			t.Errorf("backendRef %+v names %s, but its decision says %s", b.Ref, referent, b.Referent)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decided backendRefs (-route +decision):\n%s", diff)
	}
}

// checkAttachedRoutesCounted: the status of the Gateway or of its ListenerSet counts
// the route on each listener it is served on.
func checkAttachedRoutesCounted(t *testing.T, objs []runtime.Object, set *gatewayv1.ListenerSet, decision decision.Route, now metav1.Time) {
	t.Helper()
	if len(decision.Attachments) == 0 {
		return
	}
	d := newTestDecider(t, objs...)
	gw, err := d.gateways.Gateways("infra").Get("gw")
	if err != nil {
		t.Fatal(err)
	}
	status, err := d.gatewayStatus(gw, ourClass(), now)
	if err != nil {
		t.Fatal(err)
	}
	attached := map[gatewayv1.SectionName]int32{}
	for _, l := range status.Listeners {
		attached[l.Name] = l.AttachedRoutes
	}
	if set != nil {
		setStatus, err := d.listenerSetStatus(set, gw, ourClass(), now)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range setStatus.Listeners {
			attached[gatewayapi.ListenerSetListenerName(cache.MetaObjectToName(set), l.Name)] = l.AttachedRoutes
		}
	}
	for _, a := range decision.Attachments {
		for _, name := range a.Listeners {
			if attached[name] < 1 {
				t.Errorf("served on listener %s, which does not count the route: %v", name, attached)
			}
		}
	}
}

// FuzzListeners judges a Gateway's listeners and those of ListenerSets merged into it,
// built from the fuzzer's input (names with dots, shared ports, every protocol), and
// checks what Consul needs of the listeners the status lets through: no panic or
// error, distinct names in the api-gateway entry, and one protocol and hostname per
// port (Consul merges listeners on a port only then); and the other way round, that
// every valid listener is let through (checkValidListenersProgrammable).
func FuzzListeners(f *testing.F) {
	fuzzSeeds(f)
	secret := tlsSecret(f, "infra", "tls")
	f.Fuzz(func(t *testing.T, data []byte, host, path string) {
		in := fuzzgen.New(data, host, path)
		gw := allowListeners(gateway("infra", "gw", fuzzListeners(in, []gatewayv1.SectionName{"l0", "l1", "apps.s.l0", "apps.s.l0.x"})...), gatewayv1.NamespacesFromAll, nil)
		objs := []runtime.Object{ourClass(), namespace("apps", nil), namespace("infra", nil), secret, gw}
		var sets []*gatewayv1.ListenerSet
		for i := range in.Intn(3) {
			set := listenerSet("apps", fuzzgen.Pick(in, []string{"s", "s.l0", "t"}), i, fuzzListeners(in, []gatewayv1.SectionName{"l0", "l1", "x", "l0.x"})...)
			if !slices.ContainsFunc(sets, func(s *gatewayv1.ListenerSet) bool { return s.Name == set.Name }) {
				sets = append(sets, set)
				objs = append(objs, set)
			}
		}
		d := newTestDecider(t, objs...)
		v, err := d.evaluateGateway(gw, ourClass())
		if err != nil {
			t.Fatal(err)
		}
		checkProgrammableListeners(t, v)
		checkValidListenersProgrammable(t, v, servables(gw, sets...))
		if _, err := d.gatewayStatus(gw, ourClass(), metav1.Now()); err != nil {
			t.Fatal(err)
		}
	})
}

// checkProgrammableListeners checks the listeners of v that the status says can be
// programmed, the Gateway's own and its ListenerSets': distinct names in the
// api-gateway entry, and on each port what one Consul listener serves (one protocol;
// no listener without hostname beside a wildcard one, no wildcard within another),
// all named after the first.
func checkProgrammableListeners(t *testing.T, v gatewayVerdict) {
	t.Helper()
	all := slices.Clone(v.listeners)
	for _, s := range v.sets {
		all = append(all, s.listeners...)
	}
	byName := map[gatewayv1.SectionName]string{}
	byPort := map[gatewayv1.PortNumber][]listenerState{}
	for _, st := range all {
		if !st.programmable() {
			continue
		}
		who := fmt.Sprintf("%s %s/%s listener %s", st.owner.kind, st.owner.namespace, st.owner.name, st.listener.Name)
		if other, ok := byName[st.entryName]; ok {
			t.Errorf("%s and %s are both named %s in Consul", other, who, st.entryName)
		}
		byName[st.entryName] = who
		byPort[st.listener.Port] = append(byPort[st.listener.Port], st)
	}
	for port, sts := range byPort {
		checkPortListeners(t, port, sts)
	}
}

// checkPortListeners checks the programmable listeners of one port, in precedence
// order, against what one Consul listener serves.
func checkPortListeners(t *testing.T, port gatewayv1.PortNumber, sts []listenerState) {
	t.Helper()
	var wide []string
	for _, st := range sts {
		if consulProtocol(st.listener.Protocol) != consulProtocol(sts[0].listener.Protocol) || st.listener.Protocol != sts[0].listener.Protocol {
			t.Errorf("port %d has listeners of protocols %s and %s", port, sts[0].listener.Protocol, st.listener.Protocol)
		}
		if st.consulListener != sts[0].entryName {
			t.Errorf("port %d: listener %s is served as Consul listener %q, want %q", port, st.entryName, st.consulListener, sts[0].entryName)
		}
		if h := string(hostnameOf(st.listener)); st.listener.Protocol != gatewayv1.TCPProtocolType && (h == "" || strings.HasPrefix(h, "*")) {
			wide = append(wide, h)
		}
	}
	if len(sts) > 1 && sts[0].listener.Protocol == gatewayv1.TCPProtocolType {
		t.Errorf("port %d has %d TCP listeners", port, len(sts))
	}
	for i, a := range wide {
		for _, b := range wide[i+1:] {
			if a == "" || b == "" || nestedWildcardHostnames(a, b) {
				t.Errorf("port %d has listeners with hostnames %q and %q, which one Consul listener cannot serve", port, a, b)
			}
		}
	}
}

// checkValidListenersProgrammable: every listener validListener calls valid, the
// Gateway's own or a ListenerSet's, is judged and can be programmed.
func checkValidListenersProgrammable(t *testing.T, v gatewayVerdict, listeners []servable) {
	t.Helper()
	all := slices.Clone(v.listeners)
	for _, s := range v.sets {
		all = append(all, s.listeners...)
	}
	for _, s := range listeners {
		if !validListener(s, listeners) {
			continue
		}
		i := slices.IndexFunc(all, func(st listenerState) bool { return st.entryName == s.entry })
		switch {
		case i < 0:
			t.Errorf("valid listener %s (%s port %d) is not judged", s.entry, s.listener.Protocol, s.listener.Port)
		case !all[i].programmable():
			st := all[i]
			t.Errorf("valid listener %s (%s port %d, hostname %s) cannot be programmed: accepted %v %s %q, conflict %q, refs %v %s %q",
				s.entry, s.listener.Protocol, s.listener.Port, ptrString(s.listener.Hostname), st.accepted, st.acceptedReason, st.acceptedMessage,
				st.conflictReason, st.refsResolved, st.refsReason, st.refsMessage)
		}
	}
}

// consulProtocol is the protocol of a listener in Consul: HTTPS is http with TLS.
func consulProtocol(p gatewayv1.ProtocolType) string {
	if p == gatewayv1.HTTPSProtocolType {
		return string(gatewayv1.HTTPProtocolType)
	}
	return string(p)
}

// hostnamePattern is the CRD's pattern for listener and route hostnames.
var hostnamePattern = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// FuzzHostnameIntersection checks the Gateway API hostname rule on hostnames the CRD
// admits: a listener and a route hostname overlap exactly when hostnamesOverlap
// (written independently) says so; the result is one of the two and covered by both;
// with both set, the order does not matter; and no two different hostnames are each
// a wildcard match of the other.
func FuzzHostnameIntersection(f *testing.F) {
	for _, pair := range [][2]string{
		{"", "a.example.com"}, {"*.example.com", "example.com"}, {"*.example.com", "*.a.example.com"},
		{"*.example.com", "x.badexample.com"}, {"a.example.com", "*.example.com"}, {"*.com", "*.example.com"},
	} {
		f.Add(pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, listener, route string) {
		if (listener != "" && !hostnamePattern.MatchString(listener)) || !hostnamePattern.MatchString(route) {
			t.Skip("not a hostname the CRD admits")
		}
		l, r := gatewayv1.Hostname(listener), gatewayv1.Hostname(route)
		var lp *gatewayv1.Hostname
		if listener != "" {
			lp = &l
		}
		got, ok := gatewayapi.HostnameIntersection(l, r)
		if ok != hostnamesOverlap(lp, r) {
			t.Fatalf("gatewayapi.HostnameIntersection(%q, %q) = %q, %v; overlap is %v", l, r, got, ok, !ok)
		}
		if ok && (got != r && got != l || !hostnameCovers(l, got) || !hostnameCovers(r, got)) {
			t.Errorf("gatewayapi.HostnameIntersection(%q, %q) = %q, not the narrower of the two", l, r, got)
		}
		if listener != "" {
			if back, backOK := gatewayapi.HostnameIntersection(r, l); back != got || backOK != ok {
				t.Errorf("gatewayapi.HostnameIntersection(%q, %q) = %q, %v, but the other way %q, %v", l, r, got, ok, back, backOK)
			}
		}
		if l != r && gatewayapi.WildcardMatches(l, r) && gatewayapi.WildcardMatches(r, l) {
			t.Errorf("%q and %q match each other", l, r)
		}
	})
}

// hostnameCovers reports whether every host that host stands for, pattern stands for
// too; an empty pattern stands for all.
func hostnameCovers(pattern, host gatewayv1.Hostname) bool {
	if pattern == "" || pattern == host {
		return true
	}
	suffix, wildcard := strings.CutPrefix(string(pattern), "*")
	return wildcard && strings.HasSuffix(string(host), suffix) && len(host) > len(suffix)
}
