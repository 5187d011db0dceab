package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// convergeWithin bounds how long the controller has, once faults stop, to make status
// and Consul say what the newest spec means.
const convergeWithin = 3 * time.Minute

func (s *scenario) converge(t *testing.T, ctx context.Context, after string) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(convergeWithin)
	var problems, last []string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var err error
		if problems, err = s.convergenceProblems(ctx); err == nil && len(problems) == 0 {
			s.oracle.checked("convergence", 1)
			t.Logf("converged after %s in %s; the last check before: %s", after, time.Since(start).Round(100*time.Millisecond), lastProblems(last))
			return
		}
		last = problems
		sleepCtx(ctx, time.Second)
	}
	s.oracle.checked("convergence", 1)
	s.oracle.violate("convergence: %s after %s: %s", convergeWithin, after, strings.Join(problems, "; "))
}

// writesInFlight: no replica has a write on its way that the server may still apply.
// Consul 1.15 holds a write while it has no leader, up to about ten seconds after a
// restart; one that lands after the replicas stopped is work left for the referee,
// whereas a running leader's drift watch would have undone it.
func (s *scenario) writesInFlight() []string {
	var problems []string
	for _, r := range s.replicas {
		for _, p := range []*faultProxy{r.kube, r.consul} {
			if n := p.writesInFlight.Load(); n > 0 {
				problems = append(problems, fmt.Sprintf("%s has %d writes in flight to %s", r.name, n, p.target))
			}
		}
	}
	return problems
}

// lastProblems shortens what the last failed convergence check found, for the log.
func lastProblems(problems []string) string {
	switch {
	case len(problems) == 0:
		return "none (the first check passed)"
	case len(problems) > 3:
		return fmt.Sprintf("%s and %d more", strings.Join(problems[:3], "; "), len(problems)-3)
	default:
		return strings.Join(problems, "; ")
	}
}

// convergenceProblems compares the servers with the world model: every condition of
// ours is at its object's generation and carries Consul's current verdict, and Consul
// holds exactly an entry per object of ours, carrying its newest edit.
func (s *scenario) convergenceProblems(ctx context.Context) ([]string, error) {
	routes, gateways, _ := s.world.snapshot()
	entries, err := s.ownedEntries(ctx)
	if err != nil {
		return nil, err
	}
	live, problems, err := s.statusProblems(ctx, routes, gateways, entries)
	if err != nil {
		return nil, err
	}
	want := map[string]int{} // kind/name -> marker (0: present, any content)
	for name, g := range gateways {
		if g.ours {
			want[consulapi.APIGateway+"/"+name] = g.marker
		}
	}
	for name, r := range routes {
		if gateways[r.parent].ours {
			want[consulapi.HTTPRoute+"/"+name] = r.marker
		}
	}
	if gateways[gatewayName(0)].ours {
		want[consulapi.TCPRoute+"/"+tcpRoute] = 0
	}
	for key, marker := range want {
		e, ok := entries[key]
		if !ok {
			problems = append(problems, "consul has no entry for "+key)
			continue
		}
		if got, _ := entryMarker(e); marker != 0 && got != marker {
			problems = append(problems, fmt.Sprintf("consul entry for %s carries edit %d, want %d", key, got, marker))
		}
		if uid := e.GetMeta()["k8s-uid"]; uid != string(live[key]) {
			problems = append(problems, fmt.Sprintf("consul entry for %s names uid %s, the object has %s", key, uid, live[key]))
		}
	}
	for key := range entries {
		if _, ok := want[key]; !ok {
			problems = append(problems, "consul holds "+key+", which no object of ours wants")
		}
	}
	dataPlane, err := s.dataPlaneProblems(ctx, gateways)
	if err != nil {
		return nil, err
	}
	problems = append(problems, dataPlane...)
	problems = append(problems, s.writesInFlight()...)
	slices.Sort(problems)
	return problems, nil
}

// statusProblems lists objects whose status of ours is not at their generation or
// not Consul's verdict on their entry, and returns the UIDs of the objects of ours by
// entry key.
func (s *scenario) statusProblems(ctx context.Context, routes map[string]routeModel, gateways map[string]gatewayModel, entries map[string]consulapi.ConfigEntry) (map[string]types.UID, []string, error) {
	live := map[string]types.UID{}
	var problems []string
	gws, err := s.gw.GatewayV1().Gateways(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	ours := map[string]bool{}
	for _, gw := range gws.Items {
		if string(gw.Spec.GatewayClassName) != s.class {
			continue
		}
		ours[gw.Name] = true
		live[consulapi.APIGateway+"/"+gw.Name] = gw.UID
		problems = append(problems, staleConditions("Gateway "+gw.Name, gw.Generation, gatewayConditions(gw))...)
		problems = append(problems, programmedProblems("Gateway "+gw.Name, meta.FindStatusCondition(gw.Status.Conditions, "Programmed"), entries[consulapi.APIGateway+"/"+gw.Name])...)
	}
	for name, g := range gateways {
		if g.ours != ours[name] {
			problems = append(problems, fmt.Sprintf("Gateway %s: the API server and the model disagree on its class", name))
		}
	}
	hrs, err := s.gw.GatewayV1().HTTPRoutes(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	if len(hrs.Items) != len(routes) {
		problems = append(problems, fmt.Sprintf("%d HTTPRoutes on the API server, %d in the model", len(hrs.Items), len(routes)))
	}
	for _, r := range hrs.Items {
		live[consulapi.HTTPRoute+"/"+r.Name] = r.UID
		problems = append(problems, s.routeStatusProblems("HTTPRoute "+r.Name, r.Generation, r.Spec.ParentRefs, r.Status.Parents, ours, entries[consulapi.HTTPRoute+"/"+r.Name])...)
	}
	tcp, err := s.gw.GatewayV1().TCPRoutes(s.ns).Get(ctx, tcpRoute, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	live[consulapi.TCPRoute+"/"+tcp.Name] = tcp.UID
	problems = append(problems, s.routeStatusProblems("TCPRoute "+tcp.Name, tcp.Generation, tcp.Spec.ParentRefs, tcp.Status.Parents, ours, entries[consulapi.TCPRoute+"/"+tcp.Name])...)
	return live, problems, nil
}

func gatewayConditions(gw gatewayv1.Gateway) []metav1.Condition {
	var conds []metav1.Condition
	for _, c := range gw.Status.Conditions {
		if c.Type != foreignCondition {
			conds = append(conds, c)
		}
	}
	for _, l := range gw.Status.Listeners {
		conds = append(conds, l.Conditions...)
	}
	if len(conds) == 0 {
		conds = append(conds, metav1.Condition{Type: "Accepted (missing)", ObservedGeneration: -1})
	}
	return conds
}

func staleConditions(what string, generation int64, conds []metav1.Condition) []string {
	var out []string
	for _, c := range conds {
		if c.ObservedGeneration != generation {
			out = append(out, fmt.Sprintf("%s: %s at generation %d, the object is at %d", what, c.Type, c.ObservedGeneration, generation))
		}
	}
	return out
}

// routeStatusProblems: a parent status of ours for each parentRef to a Gateway of
// ours, at the route's generation and carrying Consul's verdict on the route's entry,
// and none for any other parent.
func (s *scenario) routeStatusProblems(what string, generation int64, refs []gatewayv1.ParentReference, parents []gatewayv1.RouteParentStatus, ours map[string]bool, entry consulapi.ConfigEntry) []string {
	var problems []string
	wanted := map[string]bool{}
	for _, ref := range refs {
		if ours[string(ref.Name)] {
			wanted[string(ref.Name)] = true
		}
	}
	for _, p := range parents {
		if string(p.ControllerName) != s.controllerName {
			continue
		}
		name := string(p.ParentRef.Name)
		if !wanted[name] {
			problems = append(problems, fmt.Sprintf("%s keeps a status of ours for %s, which is not a parent of ours", what, name))
			continue
		}
		delete(wanted, name)
		problems = append(problems, staleConditions(what+" parent "+name, generation, p.Conditions)...)
		problems = append(problems, consulAcceptedProblems(what+" parent "+name, p.Conditions, entry)...)
	}
	for name := range wanted {
		problems = append(problems, fmt.Sprintf("%s has no status of ours for parent %s", what, name))
	}
	return problems
}

// notServedReasons are the ConsulAccepted reasons of a parent the controller serves
// nothing on: they are its own verdict, not Consul's.
var notServedReasons = map[string]bool{gwsync.ReasonListenersNotValid: true, gwsync.ReasonNotExpressible: true}

// unsettledReasons say that Consul's verdict has not reached a condition: it is still
// awaited, or a write failed. A converged system has neither once Consul judged.
var unsettledReasons = map[string]bool{string(gatewayv1.GatewayReasonPending): true, consul.ReasonWriteFailed: true}

// consulAcceptedProblems: once Consul judged a route's entry, a parent of ours that
// accepts the route says Consul's verdict, not Pending and not a write failure (a
// converged system has none outstanding), and a refusal by Consul as Consul's reason.
// The generation alone is not enough: a condition can be at the generation and still
// Pending over a verdict Consul already gave, which a fresh replica would then write.
func consulAcceptedProblems(what string, conds []metav1.Condition, entry consulapi.ConfigEntry) []string {
	if c := meta.FindStatusCondition(conds, "Accepted"); c == nil || c.Status != metav1.ConditionTrue || entry == nil {
		return nil
	}
	judged := consul.AcceptedCondition(entry)
	if judged == nil {
		return []string{fmt.Sprintf("%s: Consul has not judged its %s entry yet", what, entry.GetKind())}
	}
	c := meta.FindStatusCondition(conds, gwsync.ConsulAcceptedCondition)
	switch {
	case c == nil:
		return []string{what + ": no ConsulAccepted condition"}
	case unsettledReasons[c.Reason]:
		return []string{fmt.Sprintf("%s: ConsulAccepted=%s(%s) while Consul's verdict is Accepted=%s(%s)", what, c.Status, c.Reason, judged.Status, judged.Reason)}
	case judged.Status != consulapi.ConditionStatusTrue && !notServedReasons[c.Reason] && c.Reason != judged.Reason:
		return []string{fmt.Sprintf("%s: ConsulAccepted=%s(%s), Consul refused the entry with %s", what, c.Status, c.Reason, judged.Reason)}
	}
	return nil
}

// programmedProblems: once Consul judged a Gateway's api-gateway entry, its Programmed
// condition is not Pending (the data plane is checked Ready too) and reports no failed
// write, and a refusal by Consul is Programmed=False with Consul's reason.
func programmedProblems(what string, programmed *metav1.Condition, entry consulapi.ConfigEntry) []string {
	if programmed == nil || entry == nil {
		return nil
	}
	judged := consul.AcceptedCondition(entry)
	switch {
	case judged == nil:
		return []string{what + ": Consul has not judged its api-gateway entry yet"}
	case unsettledReasons[programmed.Reason]:
		return []string{fmt.Sprintf("%s: Programmed=%s(%s) while Consul's verdict is Accepted=%s(%s)", what, programmed.Status, programmed.Reason, judged.Status, judged.Reason)}
	case judged.Status != consulapi.ConditionStatusTrue && programmed.Reason != judged.Reason:
		return []string{fmt.Sprintf("%s: Programmed=%s(%s), Consul refused the entry with %s", what, programmed.Status, programmed.Reason, judged.Reason)}
	}
	return nil
}

// dataPlaneProblems: each Gateway of ours, and no other, has a gateway Deployment with
// a Ready pod and a pod instance in Consul's catalog.
func (s *scenario) dataPlaneProblems(ctx context.Context, gateways map[string]gatewayModel) ([]string, error) {
	var problems []string
	deployments, err := s.kube.AppsV1().Deployments(s.ns).List(ctx, metav1.ListOptions{LabelSelector: dataplane.ManagedByLabel + "=" + dataplane.ManagedByValue})
	if err != nil {
		return nil, err
	}
	ready := map[string]bool{}
	for _, d := range deployments.Items {
		gw := d.Labels[dataplane.GatewayNameLabel]
		if !gateways[gw].ours {
			problems = append(problems, fmt.Sprintf("Deployment %s of Gateway %s, which is not ours, still exists", d.Name, gw))
			continue
		}
		ready[gw] = d.Status.ReadyReplicas > 0
	}
	registered, err := s.registeredGateways(ctx)
	if err != nil {
		return nil, err
	}
	for name, g := range gateways {
		switch {
		case g.ours && !ready[name]:
			problems = append(problems, fmt.Sprintf("Gateway %s has no gateway Deployment with a Ready pod", name))
		case g.ours && !registered[name]:
			problems = append(problems, fmt.Sprintf("Gateway %s has no pod instance in Consul's catalog", name))
		case !g.ours && registered[name]:
			problems = append(problems, fmt.Sprintf("Gateway %s, which is not ours, still has a pod instance in Consul's catalog", name))
		}
	}
	return problems, nil
}

// registeredGateways are the Gateways with a catalog instance of ours.
func (s *scenario) registeredGateways(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	services, _, err := s.consul.Catalog().Services((&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, err
	}
	for name := range services {
		instances, _, err := s.consul.Catalog().Service(name, "", (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return nil, err
		}
		for _, in := range instances {
			if s.owns(in.ServiceMeta) && in.ServiceMeta["k8s-kind"] == "Gateway" {
				out[in.ServiceMeta["k8s-name"]] = true
			}
		}
	}
	return out, nil
}

// ownedEntries are Consul's entries of the route and gateway kinds with our meta.
func (s *scenario) ownedEntries(ctx context.Context) (map[string]consulapi.ConfigEntry, error) {
	out := map[string]consulapi.ConfigEntry{}
	for _, kind := range []string{consulapi.APIGateway, consulapi.HTTPRoute, consulapi.TCPRoute} {
		entries, _, err := s.consul.ConfigEntries().List(kind, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if s.owns(e.GetMeta()) {
				out[kind+"/"+e.GetMeta()["k8s-name"]] = e
			}
		}
	}
	return out, nil
}

// checkNoLostDelete: after convergence, every entry and catalog instance with our meta
// belongs to an object that exists with that UID; nothing outlives what it was written
// for, deletes made while no replica ran included.
func (s *scenario) checkNoLostDelete(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, kind := range entryKinds {
		entries, _, err := s.consul.ConfigEntries().List(kind, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if s.owns(e.GetMeta()) {
				s.checkOwnerLives(ctx, kind+"/"+e.GetName(), e.GetMeta())
			}
		}
	}
	services, _, err := s.consul.Catalog().Services((&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	for name := range services {
		instances, _, err := s.consul.Catalog().Service(name, "", (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range instances {
			if s.owns(in.ServiceMeta) {
				s.checkOwnerLives(ctx, "catalog "+in.ServiceID, in.ServiceMeta)
			}
		}
	}
}

func (s *scenario) checkOwnerLives(ctx context.Context, what string, meta map[string]string) {
	s.oracle.checked("no lost delete", 1)
	ns, name, uid := meta["k8s-namespace"], meta["k8s-name"], meta["k8s-uid"]
	var got metav1.Object
	var err error
	switch meta["k8s-kind"] {
	case "Gateway":
		got, err = s.gw.GatewayV1().Gateways(ns).Get(ctx, name, metav1.GetOptions{})
	case "HTTPRoute":
		got, err = s.gw.GatewayV1().HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
	case "TCPRoute":
		got, err = s.gw.GatewayV1().TCPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
	case "Secret":
		got, err = s.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	case "Service":
		got, err = s.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	default:
		return // the blackhole's service-defaults: owned by the controller itself
	}
	switch {
	case apierrors.IsNotFound(err):
		s.oracle.violate("no lost delete: %s outlived %s %s/%s", what, meta["k8s-kind"], ns, name)
	case err != nil:
		s.oracle.violate("no lost delete: %s: %v", what, err)
	case string(got.GetUID()) != uid:
		s.oracle.violate("no lost delete: %s belongs to %s %s/%s uid %s, which was deleted and re-created", what, meta["k8s-kind"], ns, name, uid)
	}
}

func (s *scenario) summarize(id string, faults []string, d time.Duration) summary {
	s.world.mu.Lock()
	edits, refused := 0, 0
	for _, n := range s.world.edits {
		edits += n
	}
	for _, n := range s.world.refused {
		refused += n
	}
	s.world.mu.Unlock()
	s.oracle.mu.Lock()
	defer s.oracle.mu.Unlock()
	restarts := 0
	for _, r := range s.replicas {
		restarts += r.starts
	}
	s.counts.mu.Lock()
	defer s.counts.mu.Unlock()
	return summary{
		id: id, faults: faults, edits: edits, refused: refused,
		otherCount: cloneMap(s.counts.n), checks: cloneMap(s.oracle.checks),
		violations: slices.Clone(s.oracle.violations), expired: s.expired.Load(),
		restarts: restarts, duration: d.Round(time.Second),
	}
}

func cloneMap(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func summaryTable(rows []summary) string {
	var b strings.Builder
	b.WriteString("| run | faults injected | edits applied (refused) | foreign writes | watches expired (410) | replica starts | invariant checks | violations | time |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	total := map[string]int{}
	for _, r := range rows {
		checks := 0
		for k, v := range r.checks {
			checks += v
			total[k] += v
		}
		fmt.Fprintf(&b, "| %s | %d | %d (%d) | %d | %d | %d | %d | %d | %s |\n", r.id, r.otherCount["faults"], r.edits, r.refused,
			r.otherCount["foreign status writes"]+r.otherCount["foreign consul writes"], r.expired, r.restarts, checks, len(r.violations), r.duration)
	}
	b.WriteString("\n| invariant | checks |\n| --- | --- |\n")
	keys := make([]string, 0, len(total))
	for k := range total {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %d |\n", k, total[k])
	}
	sep := "\n"
	for _, r := range rows {
		for _, v := range r.violations {
			fmt.Fprintf(&b, "%s\n- %s: %s", sep, r.id, v)
			sep = ""
		}
	}
	return b.String()
}
