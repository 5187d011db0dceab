package translate

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/fuzzgen"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// fuzzCase is a snapshot built from fuzzer input, as the objects snapshotOf files.
type fuzzCase struct {
	naming  Naming
	opts    Options
	objects []any
}

var fuzzGateway = cache.ObjectName{Namespace: "infra", Name: "gw"}

// newFuzzCase builds a Gateway infra/gw with listeners (some named like a ListenerSet
// listener's entry name), up to two ListenerSets of it whose names and listener names
// contain dots, and up to two HTTPRoutes and a TCPRoute in apps with decisions that
// attach them to any of the listeners (or to ones that do not exist), drop rules and
// resolve backendRefs or not (fuzzBackends). Statuses say what the bytes say,
// whether or not the status pipeline would: the translation must cope with
// confirmations that disagree with the caches.
func newFuzzCase(in *fuzzgen.Input) fuzzCase {
	c := fuzzCase{
		naming: Naming{Prefix: fuzzgen.Pick(in, namingPrefixes), MirrorNamespaces: in.Bool()},
		opts:   Options{ManageServiceDefaults: in.Bool()},
	}
	if in.Intn(8) > 0 {
		c.objects = append(c.objects, tlsSecret("infra", "tls"))
	}
	gw := confirmedGateway("infra", "gw", in.Intn(8) > 0, fuzzListeners(in, gatewayListenerNames)...)
	listeners := listenerNames(gw.Spec.Listeners, "")
	c.objects = append(c.objects, gw)
	for i := range in.Intn(3) {
		set := confirmedListenerSet("apps", fuzzgen.Pick(in, []string{"s", "s.l0"}), i, in.Intn(4) > 0,
			fuzzListeners(in, []gatewayv1.SectionName{"l0", "l1", "x", "l0.x"})...)
		if slices.ContainsFunc(c.objects, func(o any) bool { s, ok := o.(*gatewayv1.ListenerSet); return ok && s.Name == set.Name }) {
			continue
		}
		listeners = append(listeners, listenerNames(listenerList(set), "apps."+set.Name+".")...)
		c.objects = append(c.objects, set)
	}
	listeners = append(listeners, "nope")
	for _, name := range []string{"r", "q"}[:1+in.Intn(2)] {
		c.objects = append(c.objects, fuzzHTTPRoute(in, name, listeners))
	}
	if in.Bool() {
		ref := backendRef("", fuzzgen.Pick(in, []string{"web", "api", "missing"}), 8080, nil)
		t := newConfirmedTCPRoute("apps", "t", gwdecision.Route{}, ref)
		t.Decision = fuzzDecision(in, listeners, nil)
		t.Decision.Backends = fuzzBackends(in, "apps", [][]gatewayv1.BackendRef{{ref}})
		c.objects = append(c.objects, t)
	}
	return c
}

// gatewayListenerNames are the names a Gateway's own listeners may have, some equal to
// the entry names ListenerSet listeners get.
var gatewayListenerNames = []gatewayv1.SectionName{"l0", "l1", "l2", "apps.s.l0", "apps.s.l0.x"}

// fuzzListeners are listeners with names from names, each name once (the CRD's
// listMapKey), each valid or not per the bytes.
func fuzzListeners(in *fuzzgen.Input, names []gatewayv1.SectionName) []judgedListener {
	var out []judgedListener
	for _, l := range in.Listeners(names, certRef("infra", "tls")) {
		if slices.ContainsFunc(out, func(j judgedListener) bool { return j.l.Name == l.Name }) {
			continue
		}
		out = append(out, judgedListener{l, in.Intn(4) > 0})
	}
	return out
}

func listenerList(set *gatewayv1.ListenerSet) []gatewayv1.Listener {
	out := make([]gatewayv1.Listener, len(set.Spec.Listeners))
	for i, l := range set.Spec.Listeners {
		out[i] = gatewayv1.Listener(l)
	}
	return out
}

func listenerNames(listeners []gatewayv1.Listener, prefix string) []gatewayv1.SectionName {
	out := make([]gatewayv1.SectionName, len(listeners))
	for i, l := range listeners {
		out[i] = gatewayv1.SectionName(prefix + string(l.Name))
	}
	return out
}

func fuzzHTTPRoute(in *fuzzgen.Input, name string, listeners []gatewayv1.SectionName) confirmedHTTPRoute {
	c := newConfirmedHTTPRoute("apps", name, nil, gwdecision.Route{}, in.HTTPRules()...)
	c.Route.Spec.Hostnames = in.RouteHostnames()
	c.Decision = fuzzDecision(in, listeners, c.Route.Spec.Rules)
	c.Decision.Backends = fuzzBackends(in, "apps", httpBackendRefs(c.Route.Spec.Rules))
	return c
}

// fuzzDecision attaches a route to some of listeners (of infra/gw), and drops the
// rules Consul cannot program (as the status pipeline does) and some others (and
// perhaps one the route does not have). Once the bytes run out (Intn gives 0), the
// rules left are kept, so short inputs still have backends to check.
func fuzzDecision(in *fuzzgen.Input, listeners []gatewayv1.SectionName, rules []gatewayv1.HTTPRouteRule) gwdecision.Route {
	var d gwdecision.Route
	a := gwdecision.Attachment{Gateway: fuzzGateway}
	for _, l := range listeners {
		if in.Intn(3) == 0 {
			a.Listeners = append(a.Listeners, l)
		}
	}
	if len(a.Listeners) > 0 {
		d.Attachments = append(d.Attachments, a)
	}
	for i, rule := range rules {
		if in.Intn(3) == 2 || consullimits.HTTPRuleProblem(rule, consullimits.Consul115) != "" {
			d.DroppedRules = append(d.DroppedRules, i)
		}
	}
	if in.Intn(16) == 0 {
		d.DroppedRules = append(d.DroppedRules, len(rules))
	}
	return d
}

// fuzzBackends decides the backendRefs of a route in namespace, rule by rule: most
// resolve to the Service they name, whatever it is (the translation trusts the
// decision, so whether the status pipeline would have resolved it is no matter here),
// some do not; a resolved one is sometimes renamed (its pods register another Consul
// service) or narrowed. Once the bytes run out (Intn gives 0), a backendRef resolves
// as it is.
func fuzzBackends(in *fuzzgen.Input, namespace string, rules [][]gatewayv1.BackendRef) []gwdecision.Backend {
	var out []gwdecision.Backend
	for r, refs := range rules {
		for b, ref := range refs {
			index := gwdecision.BackendRefIndex{Rule: r, Ref: b}
			referent := gatewayapi.Referent(namespace, ref.Namespace, ref.Name)
			if in.Intn(6) == 5 {
				out = append(out, gwdecision.Backend{Ref: index, Referent: referent})
				continue
			}
			resolved := resolvedTo(index, referent, ref.BackendObjectReference)
			if in.Intn(6) == 5 {
				resolved.Consul += "-v2"
			}
			resolved.Narrowed = in.Intn(6) == 5
			out = append(out, resolved)
		}
	}
	return out
}

// FuzzTranslate translates snapshots built from the fuzzer's input and checks what
// the translation promises, whatever the input: no panic; entries Consul 1.15 accepts
// (checkConsul115Validation) and nothing in them Envoy refuses (checkEnvoyAccepts); the same entries and problems for the same objects in
// another order; entry names that lead back to their object; and http-routes that
// serve only what the route's decision grants (checkServedAsDecided).
func FuzzTranslate(f *testing.F) {
	for _, s := range fuzzTranslateSeeds() {
		f.Add(s.data, s.host, s.path)
	}
	f.Fuzz(func(t *testing.T, data []byte, host, path string) {
		c := newFuzzCase(fuzzgen.New(data, host, path))
		d := Translate(snapshotOf(c.objects...), c.naming, testOwnership, c.opts)
		checkConsul115Validation(t, d)
		checkDeterministic(t, c, d)
		checkEntryNamesLeadBack(t, c.naming, d)
		checkEnvoyAccepts(t, d)
		s := snapshotOf(c.objects...)
		for _, e := range d.Entries {
			switch e := e.(type) {
			case *consulapi.HTTPRouteConfigEntry:
				checkServedAsDecided(t, s, c.naming, d, e)
			case *consulapi.TCPRouteConfigEntry:
				checkTCPServedAsDecided(t, s, c.naming, e)
			}
		}
	})
}

// checkEnvoyAccepts: nothing written is what Envoy would refuse of what Consul makes
// of it (consullimits.HTTPRouteRuleEnvoyProblem), and no rule the decision kept had to
// be refused for it: the status pipeline's check of the Gateway API rule
// (consullimits.HTTPRuleProblem, which newFuzzCase's decisions follow) refuses all
// that the check of the written rule does.
func checkEnvoyAccepts(t *testing.T, d Desired) {
	t.Helper()
	for key, e := range d.Entries {
		route, ok := e.(*consulapi.HTTPRouteConfigEntry)
		if !ok {
			continue
		}
		for i, rule := range route.Rules {
			if msg := consullimits.HTTPRouteRuleEnvoyProblem(rule); msg != "" {
				t.Errorf("%v rule %d: written, though %s", key, i, msg)
			}
		}
	}
	for _, p := range d.Problems {
		if strings.Contains(p.Message, consullimits.EnvoyRefuses) || strings.Contains(p.Message, "regex") {
			t.Errorf("%s %s: a rule the decision kept was refused as Envoy would refuse it: %s", p.Kind, p.Object, p.Message)
		}
	}
}

// checkDeterministic translates c again from objects in other orders, once afresh and
// once with a Translator that remembers the first translation.
func checkDeterministic(t *testing.T, c fuzzCase, want Desired) {
	t.Helper()
	reversed := slices.Clone(c.objects)
	slices.Reverse(reversed)
	half := len(c.objects) / 2
	rotated := append(slices.Clone(c.objects[half:]), c.objects[:half]...)
	tr := NewTranslator(c.naming, testOwnership, c.opts)
	for i, objs := range [][]any{reversed, rotated, c.objects} {
		for _, d := range []Desired{Translate(snapshotOf(objs...), c.naming, testOwnership, c.opts), tr.Translate(snapshotOf(objs...))} {
			if diff := gocmp.Diff(want, d); diff != "" {
				t.Fatalf("order %d: translation differs (-first +again):\n%s", i, diff)
			}
		}
	}
}

// checkEntryNamesLeadBack: the entry of a Gateway or route is named after that object
// and SplitEntryName leads back to it, so two objects never share an entry; and an
// api-gateway's listeners are named apart (Consul refuses the entry otherwise, and a
// route bound to one would be bound to the other).
func checkEntryNamesLeadBack(t *testing.T, n Naming, d Desired) {
	t.Helper()
	for key, e := range d.Entries {
		owner := OwnerOf(e.GetMeta())
		if key.Kind != consulapi.APIGateway && key.Kind != consulapi.HTTPRoute && key.Kind != consulapi.TCPRoute {
			continue
		}
		ns, name, ok := n.SplitEntryName(key.Name)
		if !ok || ns != owner.Namespace || name != owner.Name {
			t.Errorf("%v of %s %s/%s: SplitEntryName = (%q, %q, %v)", key, owner.Kind, owner.Namespace, owner.Name, ns, name, ok)
		}
	}
}

// checkServedAsDecided checks an http-route entry against its route and decision: it
// is bound only to listeners the decision attaches the route to; on each of them
// Consul serves only hostnames both the route and the listener grant; what it sends to
// a backend comes from a rule the decision did not drop and to a backendRef of that
// rule that resolved; the requests of a dropped rule go to the blackhole; and a rule
// that could be served but is not is named in a problem.
func checkServedAsDecided(t *testing.T, s Snapshot, n Naming, d Desired, e *consulapi.HTTPRouteConfigEntry) {
	t.Helper()
	owner := OwnerOf(e.Meta)
	key := cache.ObjectName{Namespace: owner.Namespace, Name: owner.Name}
	c, ok := s.Routes["HTTPRoute"][key]
	if !ok {
		t.Fatalf("%s: no HTTPRoute %s in the snapshot", e.Name, key)
	}
	route := c.Route.(*gatewayv1.HTTPRoute)
	for _, p := range e.Parents {
		checkParentGranted(t, n, d, e, route, c.Decision, p)
	}
	served := map[int]bool{}
	for _, rule := range e.Rules {
		checkRuleServedAsDecided(t, n, e.Name, route, c.Decision, rule, served)
	}
	checkDroppedRulesBlackholed(t, n, e, route, c.Decision)
	checkUnservedRulesReported(t, d, key, route, c.Decision, served)
}

func checkParentGranted(t *testing.T, n Naming, d Desired, e *consulapi.HTTPRouteConfigEntry, route *gatewayv1.HTTPRoute, decision gwdecision.Route, p consulapi.ResourceReference) {
	t.Helper()
	checkParentAttached(t, n, e.Name, decision, p)
	entry, _ := d.Entries[EntryKey{Kind: consulapi.APIGateway, Name: p.Name, Namespace: p.Namespace, Partition: p.Partition}].(*consulapi.APIGatewayConfigEntry)
	if entry == nil {
		return // checkConsul115Validation reports it
	}
	i := slices.IndexFunc(entry.Listeners, func(l consulapi.APIGatewayListener) bool { return l.Name == p.SectionName })
	if i < 0 {
		return
	}
	listener := entry.Listeners[i].Hostname
	hosts := consulServedHostnames(e.Hostnames, listener)
	if patterns := authorityPatterns(e); len(patterns) > 0 && slices.Equal(hosts, []string{"*"}) {
		checkAuthorityGranted(t, e.Name, p.SectionName, listener, route.Spec.Hostnames, patterns)
		return
	}
	for _, h := range hosts {
		if !hostnameGranted(listener, route.Spec.Hostnames, h) {
			t.Errorf("%s: serves %q on listener %s (hostname %q), which route hostnames %v do not grant (entry hostnames %v)",
				e.Name, h, p.SectionName, listener, route.Spec.Hostnames, e.Hostnames)
		}
	}
}

// authorityPatterns are the regular expressions on ":authority" that every match of
// entry e carries: served in a Consul listener's catch-all virtual host, e then serves
// only the hosts they admit (several wildcard listeners on one port). None when some
// match has none.
func authorityPatterns(e *consulapi.HTTPRouteConfigEntry) []string {
	var patterns []string
	for _, r := range e.Rules {
		for _, m := range r.Matches {
			i := slices.IndexFunc(m.Headers, isAuthorityMatch)
			if i < 0 {
				return nil
			}
			if v := m.Headers[i].Value; !slices.Contains(patterns, v) {
				patterns = append(patterns, v)
			}
		}
	}
	return patterns
}

func isAuthorityMatch(h consulapi.HTTPHeaderMatch) bool {
	return h.Name == ":authority" && h.Match == consulapi.HTTPHeaderMatchRegularExpression
}

// checkAuthorityGranted: an entry narrowed by ":authority" patterns admits, of the
// hosts its listener's and route's hostnames suggest (with and without a port), only
// those the route is granted on the listener. Go's RE2 stands in for Envoy's.
func checkAuthorityGranted(t *testing.T, entry, section, listener string, route []gatewayv1.Hostname, patterns []string) {
	t.Helper()
	for _, pattern := range patterns {
		re, err := regexp.Compile(pattern)
		if err != nil {
			t.Errorf("%s: :authority pattern %q does not compile: %v", entry, pattern, err)
			continue
		}
		for _, host := range hostCandidates(listener, route) {
			for _, port := range []string{"", ":80", ":1234"} {
				if re.MatchString(host+port) && !hostnameGranted(listener, route, strings.ToLower(host)) {
					t.Errorf("%s: admits %q through :authority %q on listener %s (hostname %q), which route hostnames %v do not grant",
						entry, host+port, pattern, section, listener, route)
				}
			}
		}
	}
}

// hostCandidates are hosts to try against an ":authority" pattern: each hostname, and
// for a wildcard one or two labels before its suffix, its suffix alone and an upper
// case host; and a host nobody names.
func hostCandidates(listener string, route []gatewayv1.Hostname) []string {
	out := []string{"other.invalid"}
	add := func(h string) {
		suffix, wildcard := strings.CutPrefix(h, "*")
		switch {
		case wildcard:
			out = append(out, "a"+suffix, "a.b"+suffix, strings.TrimPrefix(suffix, "."), "A"+strings.ToUpper(suffix))
		case h != "":
			out = append(out, h)
		}
	}
	add(listener)
	for _, h := range route {
		add(string(h))
	}
	return out
}

// withoutAuthority is m without its ":authority" narrowing (authorityPatterns).
func withoutAuthority(m consulapi.HTTPMatch) consulapi.HTTPMatch {
	m.Headers = slices.DeleteFunc(slices.Clone(m.Headers), isAuthorityMatch)
	return m
}

// checkParentAttached: a route entry's parent is a listener the decision attaches the
// route to.
func checkParentAttached(t *testing.T, n Naming, entry string, decision gwdecision.Route, p consulapi.ResourceReference) {
	t.Helper()
	ns, name, _ := n.SplitEntryName(p.Name)
	gw := cache.ObjectName{Namespace: ns, Name: name}
	if !slices.ContainsFunc(decision.Attachments, func(a gwdecision.Attachment) bool {
		return a.Gateway == gw && slices.Contains(a.Listeners, gatewayv1.SectionName(p.SectionName))
	}) {
		t.Errorf("%s: bound to %s/%s, which the decision %+v does not attach it to", entry, gw, p.SectionName, decision.Attachments)
	}
}

// checkTCPServedAsDecided: a tcp-route entry is bound only to attached listeners, and
// is not written for a route whose one rule the decision dropped.
func checkTCPServedAsDecided(t *testing.T, s Snapshot, n Naming, e *consulapi.TCPRouteConfigEntry) {
	t.Helper()
	owner := OwnerOf(e.Meta)
	c := s.Routes["TCPRoute"][cache.ObjectName{Namespace: owner.Namespace, Name: owner.Name}]
	for _, p := range e.Parents {
		checkParentAttached(t, n, e.Name, c.Decision, p)
	}
	if route, _ := c.Route.(*gatewayv1.TCPRoute); len(route.Spec.Rules) == 1 && slices.Contains(c.Decision.DroppedRules, 0) {
		t.Errorf("%s: written, though its one rule is dropped", e.Name)
	}
}

// hostnameGranted reports whether Gateway API serves host for a route with hostnames
// route through a listener with hostname listener: both must cover it. "*" is any
// host, which only a listener and a route without hostnames grant. This is written
// out again here, independently of the code under test.
func hostnameGranted(listener string, route []gatewayv1.Hostname, host string) bool {
	if host == "*" {
		return listener == "" && len(route) == 0
	}
	if listener != "" && !hostnameCovers(listener, host) {
		return false
	}
	return len(route) == 0 || slices.ContainsFunc(route, func(r gatewayv1.Hostname) bool { return hostnameCovers(string(r), host) })
}

// hostnameCovers: pattern is host, or a wildcard whose "*" stands for one or more
// labels of host.
func hostnameCovers(pattern, host string) bool {
	suffix, wildcard := strings.CutPrefix(pattern, "*")
	if !wildcard {
		return pattern == host
	}
	return strings.HasPrefix(suffix, ".") && strings.HasSuffix(host, suffix) && len(host) > len(suffix)
}

// matchRule is the index of the rule a translated match comes from (the tag header
// fuzzgen puts on every match); -1 for the match a rule without matches gets.
func matchRule(m consulapi.HTTPMatch) int {
	for _, h := range m.Headers {
		if h.Name == fuzzgen.RuleTag {
			i, _ := strconv.Atoi(h.Value)
			return i
		}
	}
	return -1
}

// sourceRules are the rules a translated match can come from.
func sourceRules(route *gatewayv1.HTTPRoute, m consulapi.HTTPMatch) []int {
	if i := matchRule(m); i >= 0 {
		return []int{i}
	}
	var out []int
	for i, r := range route.Spec.Rules {
		if len(r.Matches) == 0 {
			out = append(out, i)
		}
	}
	return out
}

func isBlackhole(n Naming, s consulapi.HTTPService) bool { return s.Name == n.BlackholeService() }

// checkRuleServedAsDecided: a translated rule that sends requests to a backend comes
// from rules the decision kept, and each backend is a resolved backendRef of one of
// them. It records the rules served.
func checkRuleServedAsDecided(t *testing.T, n Naming, entry string, route *gatewayv1.HTTPRoute, decision gwdecision.Route, rule consulapi.HTTPRouteRule, served map[int]bool) {
	t.Helper()
	for _, svc := range rule.Services {
		if isBlackhole(n, svc) {
			continue
		}
		for _, m := range rule.Matches {
			sources := slices.DeleteFunc(sourceRules(route, m), func(i int) bool { return slices.Contains(decision.DroppedRules, i) })
			if !slices.ContainsFunc(sources, func(i int) bool { return servesBackend(n, route, decision, i, svc) }) {
				t.Errorf("%s: sends %+v to %s, which no kept rule with a resolved backendRef to it does (dropped %v)", entry, m, svc.Name, decision.DroppedRules)
			}
			for _, i := range sources {
				served[i] = true
			}
		}
	}
}

// servesBackend reports whether rule i of route has a backendRef with weight that the
// decision resolved to the Consul service svc: named after the decision's Consul
// service, or after the service of ours of a narrowed one, in its referent's
// namespace. This is written out again here, independently of the code under test.
func servesBackend(n Naming, route *gatewayv1.HTTPRoute, decision gwdecision.Route, i int, svc consulapi.HTTPService) bool {
	if i >= len(route.Spec.Rules) {
		return false
	}
	for b, ref := range route.Spec.Rules[i].BackendRefs {
		d, ok := decision.Backend(gwdecision.BackendRefIndex{Rule: i, Ref: b})
		if !ok || !d.Resolved || backendWeight(ref.Weight) == 0 || svc.Namespace != n.Namespace(d.Referent.Namespace) {
			continue
		}
		name := d.Consul
		if d.Narrowed {
			name = n.Prefix + "consul_gateway_controller_" + d.Referent.Namespace + "_" + d.Consul
		}
		if svc.Name == name {
			return true
		}
	}
	return false
}

// checkDroppedRulesBlackholed: each segment match of a dropped rule is in a rule that
// sends everything to the blackhole, so its requests cannot reach a broader rule.
func checkDroppedRulesBlackholed(t *testing.T, n Naming, e *consulapi.HTTPRouteConfigEntry, route *gatewayv1.HTTPRoute, decision gwdecision.Route) {
	t.Helper()
	for _, i := range decision.DroppedRules {
		if i >= len(route.Spec.Rules) {
			continue
		}
		if consullimits.HTTPMatchesProblem(route.Spec.Rules[i].Matches) != "" {
			continue // left out: its matches select no request
		}
		matches, err := httpMatches(route.Spec.Rules[i].Matches)
		if err != nil {
			t.Errorf("%s: dropped rule %d: %v", e.Name, i, err)
			continue
		}
		for _, m := range segmentPrefixes(matches) {
			if !slices.ContainsFunc(e.Rules, func(r consulapi.HTTPRouteRule) bool {
				return slices.ContainsFunc(r.Matches, func(o consulapi.HTTPMatch) bool {
					return gocmp.Equal(withoutAuthority(o), m, cmpopts.EquateEmpty())
				}) &&
					!slices.ContainsFunc(r.Services, func(s consulapi.HTTPService) bool { return !isBlackhole(n, s) })
			}) {
				t.Errorf("%s: match %+v of dropped rule %d does not go to the blackhole", e.Name, m, i)
			}
		}
	}
}

// checkUnservedRulesReported: a rule the decision kept, with a backendRef that can
// receive traffic, is served, or a problem names it.
func checkUnservedRulesReported(t *testing.T, d Desired, key cache.ObjectName, route *gatewayv1.HTTPRoute, decision gwdecision.Route, served map[int]bool) {
	t.Helper()
	for i, rule := range route.Spec.Rules {
		if served[i] || slices.Contains(decision.DroppedRules, i) || !ruleHasBackend(i, rule, decision) {
			continue
		}
		prefix := fmt.Sprintf("rule %d:", i)
		if !slices.ContainsFunc(d.Problems, func(p Problem) bool {
			return p.Kind == "HTTPRoute" && p.Object == key && strings.Contains(p.Message, prefix)
		}) {
			t.Errorf("%s: rule %d has a backend but is not served, and no problem says why; problems %v", key, i, d.Problems)
		}
	}
}

// ruleHasBackend reports whether the decision resolved some backendRef of rule index
// that has weight.
func ruleHasBackend(index int, rule gatewayv1.HTTPRouteRule, decision gwdecision.Route) bool {
	for b, ref := range rule.BackendRefs {
		if d, ok := decision.Backend(gwdecision.BackendRefIndex{Rule: index, Ref: b}); ok && d.Resolved && backendWeight(ref.Weight) > 0 {
			return true
		}
	}
	return false
}

// FuzzTranslator checks the Translator's memory: after one snapshot it translates a
// second exactly as Translate does, where the second keeps some of the first's
// objects (the same objects, which the memory reuses), replaces some with other
// versions, pairs a kept route with another decision, adds and removes others.
func FuzzTranslator(f *testing.F) {
	for _, s := range fuzzTranslatorSeeds() {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, before, after, mix []byte) {
		first := newFuzzCase(fuzzgen.New(before, "", ""))
		second := newFuzzCase(fuzzgen.New(after, "", ""))
		s := mixedSnapshot(snapshotOf(first.objects...), snapshotOf(second.objects...), fuzzgen.New(mix, "", ""))
		tr := NewTranslator(first.naming, testOwnership, first.opts)
		tr.Translate(snapshotOf(first.objects...))
		want := Translate(s, first.naming, testOwnership, first.opts)
		if diff := gocmp.Diff(want, tr.Translate(s)); diff != "" {
			t.Errorf("Translator after another snapshot differs from Translate (-Translate +Translator):\n%s", diff)
		}
	})
}

// mixedSnapshot holds, for each object of a or b, a's version, b's or none, as in
// chooses; a route kept from a may get b's decision.
func mixedSnapshot(a, b Snapshot, in *fuzzgen.Input) Snapshot {
	s := NewSnapshot()
	mixInto(s.Gateways, a.Gateways, b.Gateways, in)
	mixInto(s.ListenerSets, a.ListenerSets, b.ListenerSets, in)
	mixInto(s.Secrets, a.Secrets, b.Secrets, in)
	for _, rt := range routeTranslations {
		routes := s.Routes[rt.kind]
		mixInto(routes, a.Routes[rt.kind], b.Routes[rt.kind], in)
		for _, key := range sortedKeys(routes) {
			if other, ok := b.Routes[rt.kind][key]; ok && routes[key].Route == a.Routes[rt.kind][key].Route && in.Bool() {
				routes[key] = ConfirmedRoute{Route: routes[key].Route, Decision: other.Decision}
			}
		}
	}
	return s
}

// mixInto puts into dst, per key of a or b in order, a's value, b's or none.
func mixInto[V any](dst, a, b map[cache.ObjectName]V, in *fuzzgen.Input) {
	union := maps.Clone(a)
	maps.Copy(union, b)
	for _, key := range sortedKeys(union) {
		av, inA := a[key]
		bv, inB := b[key]
		switch choice := in.Intn(3); {
		case choice == 0 && inA:
			dst[key] = av
		case choice == 1 && inB:
			dst[key] = bv
		}
	}
}
