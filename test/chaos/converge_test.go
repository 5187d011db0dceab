package chaos

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
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
	var err error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		problems, err = s.convergenceProblems(ctx)
		if errors.Is(err, errInconsistentRead) {
			s.oracle.checked("convergence", 1)
			s.oracle.violate("convergence: after %s: %v", after, err)
			return
		}
		if err == nil && len(problems) == 0 {
			s.oracle.checked("convergence", 1)
			t.Logf("converged after %s in %s; the last check before: %s", after, time.Since(start).Round(100*time.Millisecond), lastProblems(last))
			return
		}
		last = problems
		sleepCtx(ctx, time.Second)
	}
	if err != nil {
		problems = append(problems, "the last check failed: "+err.Error())
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
// ours is at its object's generation and carries Consul's current verdict, Consul
// holds exactly an entry per object of ours, carrying its newest edit and content, and
// its service-intentions let exactly the gateways of those routes through.
func (s *scenario) convergenceProblems(ctx context.Context) ([]string, error) {
	routes, gateways, grant := s.world.snapshot()
	entries, err := s.ownedEntries(ctx)
	if err != nil {
		return nil, err
	}
	live, problems, err := s.statusProblems(ctx, routes, gateways, grant, entries)
	if err != nil {
		return nil, err
	}
	secret, err := s.kube.CoreV1().Secrets(s.ns).Get(ctx, certSecret, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	live[consulapi.InlineCertificate+"/"+certSecret] = secret.UID
	problems = append(problems, entrySetProblems(wantedEntries(routes, gateways, grant), entries, live)...)
	problems = append(problems, routeEntryProblems(s.world, routes, gateways, grant, entries)...)
	problems = append(problems, s.tcpEntryProblems(ctx, entries[consulapi.TCPRoute+"/"+tcpRoute])...)
	problems = append(problems, certificateProblems(secret, entries[consulapi.InlineCertificate+"/"+certSecret])...)
	problems = append(problems, blackholeProblems(entries[blackholeKey])...)
	intentionsWrong, err := s.intentionProblems(ctx, entries)
	if err != nil {
		return nil, err
	}
	problems = append(problems, intentionsWrong...)
	dataPlane, err := s.dataPlaneProblems(ctx, gateways)
	if err != nil {
		return nil, err
	}
	problems = append(problems, dataPlane...)
	problems = append(problems, s.writesInFlight()...)
	slices.Sort(problems)
	return problems, nil
}

// blackholeKey is the key of the blackhole's service-defaults among the owned entries:
// the chaos replicas write no other service-defaults (they run without
// --manage-service-defaults) and no entry prefix.
var blackholeKey = consulapi.ServiceDefaults + "/" + translate.Naming{}.BlackholeService()

// wantedEntries are the entries Consul must hold, by kind/name, each with the edit it
// must carry (0: any). A route of a Gateway of ours has an http-route entry; the
// TCPRoute has one while gw-0 is ours; the Secret has an inline-certificate while some
// Gateway of ours (each has an https listener using it) exists; the blackhole has
// service-defaults while a route of ours sends requests to it, which a backend in the
// other namespace does while no ReferenceGrant permits it.
func wantedEntries(routes map[string]routeModel, gateways map[string]gatewayModel, grant bool) map[string]int {
	want := map[string]int{}
	for name, g := range gateways {
		if g.ours {
			want[consulapi.APIGateway+"/"+name] = g.marker
			want[consulapi.InlineCertificate+"/"+certSecret] = 0
		}
	}
	for name, r := range routes {
		if !gateways[r.parent].ours {
			continue
		}
		want[consulapi.HTTPRoute+"/"+name] = r.marker
		if r.remote && !grant {
			want[blackholeKey] = 0
		}
	}
	if gateways[gatewayName(0)].ours {
		want[consulapi.TCPRoute+"/"+tcpRoute] = 0
	}
	return want
}

// entrySetProblems: Consul holds exactly the wanted entries, each at its edit and
// naming the UID of the object it was written for.
func entrySetProblems(want map[string]int, entries map[string]consulapi.ConfigEntry, live map[string]types.UID) []string {
	var problems []string
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
	return problems
}

// routeEntryProblems: each http-route entry of ours sends its requests where the
// route's backend and the ReferenceGrant say: to its Service in our namespace, to the
// remote Service while the grant permits it, else to the blackhole alone.
func routeEntryProblems(w *world, routes map[string]routeModel, gateways map[string]gatewayModel, grant bool, entries map[string]consulapi.ConfigEntry) []string {
	var problems []string
	for name, r := range routes {
		e, ok := entries[consulapi.HTTPRoute+"/"+name].(*consulapi.HTTPRouteConfigEntry)
		if !ok || !gateways[r.parent].ours {
			continue
		}
		want := routeBackend(w, r, grant)
		if got := httpRouteServices(e); !slices.Equal(got, []string{want}) {
			problems = append(problems, fmt.Sprintf("consul entry for HTTPRoute %s sends requests to %v, want [%s] (remote backend %t, grant %t)", name, got, want, r.remote, grant))
		}
	}
	return problems
}

// routeBackend is the Consul service a route's requests go to.
func routeBackend(w *world, r routeModel, grant bool) string {
	switch {
	case r.remote && grant:
		return w.service(remoteSvc)
	case r.remote:
		return translate.Naming{}.BlackholeService()
	default:
		return w.service("svc-" + strconv.Itoa(r.marker%serviceCount))
	}
}

func httpRouteServices(e *consulapi.HTTPRouteConfigEntry) []string {
	var out []string
	for _, rule := range e.Rules {
		for _, svc := range rule.Services {
			out = append(out, svc.Name)
		}
	}
	return out
}

// tcpEntryProblems: the tcp-route entry forwards to the TCPRoute's one backend as the
// API server holds it now (the tcp-backend edit moves it), from gw-0's tcp listener.
func (s *scenario) tcpEntryProblems(ctx context.Context, entry consulapi.ConfigEntry) []string {
	e, ok := entry.(*consulapi.TCPRouteConfigEntry)
	if !ok {
		return nil
	}
	route, err := s.world.env.gw.GatewayV1().TCPRoutes(s.ns).Get(ctx, tcpRoute, metav1.GetOptions{})
	if err != nil {
		return []string{fmt.Sprintf("TCPRoute %s: %v", tcpRoute, err)}
	}
	backend := string(route.Spec.Rules[0].BackendRefs[0].Name)
	var services, parents []string
	for _, svc := range e.Services {
		services = append(services, svc.Name)
	}
	for _, p := range e.Parents {
		parents = append(parents, p.Name+"/"+p.SectionName)
	}
	var problems []string
	if !slices.Equal(services, []string{backend}) {
		problems = append(problems, fmt.Sprintf("consul entry for TCPRoute %s forwards to %v, want [%s]", tcpRoute, services, backend))
	}
	if want := gatewayName(0) + "." + s.ns + "/tcp"; !slices.Equal(parents, []string{want}) {
		problems = append(problems, fmt.Sprintf("consul entry for TCPRoute %s has parents %v, want [%s]", tcpRoute, parents, want))
	}
	return problems
}

// certificateProblems: the inline-certificate carries the Secret's current certificate
// and key, so a rotation reached Consul.
func certificateProblems(secret *corev1.Secret, entry consulapi.ConfigEntry) []string {
	e, ok := entry.(*consulapi.InlineCertificateConfigEntry)
	if !ok {
		return nil
	}
	var problems []string
	if e.Certificate != string(secret.Data[corev1.TLSCertKey]) {
		problems = append(problems, fmt.Sprintf("consul's inline-certificate for Secret %s is %s, the Secret holds %s", certSecret, certificateSubject(e.Certificate), certificateSubject(string(secret.Data[corev1.TLSCertKey]))))
	}
	if e.PrivateKey != "" && e.PrivateKey != string(secret.Data[corev1.TLSPrivateKeyKey]) {
		problems = append(problems, fmt.Sprintf("consul's inline-certificate for Secret %s carries another private key than the Secret", certSecret))
	}
	return problems
}

// certificateSubject names a PEM certificate by its subject's common name, which
// writeCertificate makes unique per rotation.
func certificateSubject(certPEM string) string {
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil {
		return "not PEM"
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "unparsable: " + err.Error()
	}
	return "CN=" + cert.Subject.CommonName
}

// blackholeProblems: the blackhole's service-defaults declares it http, without which
// Consul refuses every http-route that uses it.
func blackholeProblems(entry consulapi.ConfigEntry) []string {
	e, ok := entry.(*consulapi.ServiceConfigEntry)
	if !ok || e.Protocol == "http" {
		return nil
	}
	return []string{fmt.Sprintf("consul's service-defaults of the blackhole has protocol %q, want http", e.Protocol)}
}

// statusProblems lists objects whose status of ours is not at their generation or
// not Consul's verdict on their entry, and returns the UIDs of the objects of ours by
// entry key.
func (s *scenario) statusProblems(ctx context.Context, routes map[string]routeModel, gateways map[string]gatewayModel, grant bool, entries map[string]consulapi.ConfigEntry) (map[string]types.UID, []string, error) {
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
		problems = append(problems, gatewayConditionProblems("Gateway "+gw.Name, gw, entries[consulapi.APIGateway+"/"+gw.Name])...)
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
		if model, ok := routes[r.Name]; ok {
			problems = append(problems, s.resolvedRefsProblems(r, model, grant, ours)...)
		}
	}
	tcp, err := s.gw.GatewayV1().TCPRoutes(s.ns).Get(ctx, tcpRoute, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	live[consulapi.TCPRoute+"/"+tcp.Name] = tcp.UID
	problems = append(problems, s.routeStatusProblems("TCPRoute "+tcp.Name, tcp.Generation, tcp.Spec.ParentRefs, tcp.Status.Parents, ours, entries[consulapi.TCPRoute+"/"+tcp.Name])...)
	return live, problems, nil
}

// resolvedRefsProblems: each parent status of ours on an HTTPRoute says whether its
// backend resolves: not while it is in the other namespace and no ReferenceGrant
// permits it (RefNotPermitted), else it does.
func (s *scenario) resolvedRefsProblems(r gatewayv1.HTTPRoute, model routeModel, grant bool, ours map[string]bool) []string {
	want, reason := metav1.ConditionTrue, string(gatewayv1.RouteReasonResolvedRefs)
	if model.remote && !grant {
		want, reason = metav1.ConditionFalse, string(gatewayv1.RouteReasonRefNotPermitted)
	}
	var problems []string
	for _, p := range r.Status.Parents {
		if string(p.ControllerName) != s.controllerName || !ours[string(p.ParentRef.Name)] {
			continue
		}
		c := meta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionResolvedRefs))
		if c == nil || c.Status != want || c.Reason != reason {
			problems = append(problems, fmt.Sprintf("HTTPRoute %s parent %s: ResolvedRefs is %s, want %s(%s) (remote backend %t, grant %t)", r.Name, p.ParentRef.Name, conditionString(c), want, reason, model.remote, grant))
		}
	}
	return problems
}

func conditionString(c *metav1.Condition) string {
	if c == nil {
		return "missing"
	}
	return fmt.Sprintf("%s(%s)", c.Status, c.Reason)
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

// consulAcceptedProblems: every route of the world is valid, names a listener that
// takes it and reaches backends Consul serves as http (backendDefaults), so at
// convergence each parent of ours accepts the route, Consul accepted the route's entry
// and bound it, and the parent's ConsulAccepted says so. The expectation comes from
// the world, not from the controller's decision code, which the referee shares: a
// verdict both decide wrongly the same way still fails here. When Consul refused, the
// condition must carry Consul's status and reason too, so the report names both.
func consulAcceptedProblems(what string, conds []metav1.Condition, entry consulapi.ConfigEntry) []string {
	var problems []string
	if c := meta.FindStatusCondition(conds, string(gatewayv1.RouteConditionAccepted)); c == nil || c.Status != metav1.ConditionTrue {
		problems = append(problems, fmt.Sprintf("%s: Accepted is %s, want True: every route of the world is valid", what, conditionString(c)))
	}
	if entry == nil {
		return problems // entrySetProblems reports the missing entry
	}
	judged := consul.AcceptedCondition(entry)
	if judged == nil {
		return append(problems, fmt.Sprintf("%s: Consul has not judged its %s entry yet", what, entry.GetKind()))
	}
	problems = append(problems, consulVerdictProblems(what, entry)...)
	c := meta.FindStatusCondition(conds, gwsync.ConsulAcceptedCondition)
	if c == nil || string(c.Status) != string(judged.Status) || (judged.Status != consulapi.ConditionStatusTrue && c.Reason != judged.Reason) {
		problems = append(problems, fmt.Sprintf("%s: ConsulAccepted is %s while Consul's verdict is Accepted=%s(%s)", what, conditionString(c), judged.Status, judged.Reason))
	}
	return problems
}

// consulVerdictProblems: Consul accepted the entry and, for a route, bound it to every
// parent it names. Nothing the world asks for is refusable.
func consulVerdictProblems(what string, entry consulapi.ConfigEntry) []string {
	var problems []string
	if judged := consul.AcceptedCondition(entry); judged.Status != consulapi.ConditionStatusTrue {
		problems = append(problems, fmt.Sprintf("%s: Consul refused its %s entry: Accepted=%s(%s) %s", what, entry.GetKind(), judged.Status, judged.Reason, judged.Message))
	}
	if entry.GetKind() == consulapi.APIGateway {
		return problems
	}
	bound := 0
	for _, c := range consul.EntryStatus(entry).Conditions {
		if c.Type != string(consulapi.RouteConditionBound) {
			continue
		}
		bound++
		if c.Status != consulapi.ConditionStatusTrue {
			problems = append(problems, fmt.Sprintf("%s: Consul did not bind its %s entry: Bound=%s(%s) %s", what, entry.GetKind(), c.Status, c.Reason, c.Message))
		}
	}
	if bound == 0 {
		problems = append(problems, fmt.Sprintf("%s: Consul bound its %s entry to no parent", what, entry.GetKind()))
	}
	return problems
}

// gatewayConditionProblems: every Gateway of ours in the world is valid and deployed,
// so at convergence it is Accepted and Programmed, each listener is Accepted,
// ResolvedRefs and Programmed and not Conflicted, and Consul accepted its api-gateway
// entry. Like consulAcceptedProblems this comes from the world, not the decision code;
// a Gateway with no Programmed condition at all fails too.
func gatewayConditionProblems(what string, gw gatewayv1.Gateway, entry consulapi.ConfigEntry) []string {
	var problems []string
	want := func(where string, conds []metav1.Condition, condType string, status metav1.ConditionStatus) {
		if c := meta.FindStatusCondition(conds, condType); c == nil || c.Status != status {
			problems = append(problems, fmt.Sprintf("%s%s: %s is %s, want %s", what, where, condType, conditionString(c), status))
		}
	}
	want("", gw.Status.Conditions, string(gatewayv1.GatewayConditionAccepted), metav1.ConditionTrue)
	want("", gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed), metav1.ConditionTrue)
	if len(gw.Status.Listeners) != len(gw.Spec.Listeners) {
		problems = append(problems, fmt.Sprintf("%s: %d listener statuses for %d listeners", what, len(gw.Status.Listeners), len(gw.Spec.Listeners)))
	}
	for _, l := range gw.Status.Listeners {
		where := " listener " + string(l.Name)
		want(where, l.Conditions, string(gatewayv1.ListenerConditionAccepted), metav1.ConditionTrue)
		want(where, l.Conditions, string(gatewayv1.ListenerConditionResolvedRefs), metav1.ConditionTrue)
		want(where, l.Conditions, string(gatewayv1.ListenerConditionProgrammed), metav1.ConditionTrue)
		want(where, l.Conditions, string(gatewayv1.ListenerConditionConflicted), metav1.ConditionFalse)
	}
	switch {
	case entry == nil:
		// entrySetProblems reports the missing entry
	case consul.AcceptedCondition(entry) == nil:
		problems = append(problems, what+": Consul has not judged its api-gateway entry yet")
	default:
		problems = append(problems, consulVerdictProblems(what, entry)...)
	}
	return problems
}

// dataPlaneProblems: each Gateway of ours, and no other, has a gateway Deployment with
// a Ready pod, a Service, a ServiceAccount and a pod instance in Consul's catalog.
func (s *scenario) dataPlaneProblems(ctx context.Context, gateways map[string]gatewayModel) ([]string, error) {
	objects, problems, err := s.gatewayObjects(ctx, gateways)
	if err != nil {
		return nil, err
	}
	registered, err := s.registeredGateways(ctx)
	if err != nil {
		return nil, err
	}
	for name, g := range gateways {
		switch {
		case g.ours && !objects["ready Deployment"][name]:
			problems = append(problems, fmt.Sprintf("Gateway %s has no gateway Deployment with a Ready pod", name))
		case g.ours && !registered[name]:
			problems = append(problems, fmt.Sprintf("Gateway %s has no pod instance in Consul's catalog", name))
		case !g.ours && registered[name]:
			problems = append(problems, fmt.Sprintf("Gateway %s, which is not ours, still has a pod instance in Consul's catalog", name))
		}
		for _, kind := range []string{"Service", "ServiceAccount"} {
			if g.ours && !objects[kind][name] {
				problems = append(problems, fmt.Sprintf("Gateway %s has no gateway %s", name, kind))
			}
		}
	}
	return problems, nil
}

// gatewayObjects lists the data plane objects in our namespace by kind and Gateway
// name ("ready Deployment": those with a Ready pod), and reports those of a Gateway
// that is not ours: a Gateway that left the class keeps nothing we deployed.
func (s *scenario) gatewayObjects(ctx context.Context, gateways map[string]gatewayModel) (map[string]map[string]bool, []string, error) {
	opts := metav1.ListOptions{LabelSelector: dataplane.ManagedSelector}
	deployments, err := s.kube.AppsV1().Deployments(s.ns).List(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	services, err := s.kube.CoreV1().Services(s.ns).List(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	accounts, err := s.kube.CoreV1().ServiceAccounts(s.ns).List(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	objects := map[string]map[string]bool{"ready Deployment": {}, "Service": {}, "ServiceAccount": {}}
	var problems []string
	// ofOurs reports whether o belongs to a Gateway of ours; one of another is a problem.
	ofOurs := func(kind string, o metav1.Object) (string, bool) {
		gw := o.GetLabels()[dataplane.GatewayNameLabel]
		if !gateways[gw].ours {
			problems = append(problems, fmt.Sprintf("%s %s of Gateway %s, which is not ours, still exists", kind, o.GetName(), gw))
			return gw, false
		}
		return gw, true
	}
	for _, d := range deployments.Items {
		if gw, ok := ofOurs("Deployment", &d); ok && d.Status.ReadyReplicas > 0 {
			objects["ready Deployment"][gw] = true
		}
	}
	for _, svc := range services.Items {
		if gw, ok := ofOurs("Service", &svc); ok {
			objects["Service"][gw] = true
		}
	}
	for _, sa := range accounts.Items {
		if gw, ok := ofOurs("ServiceAccount", &sa); ok {
			objects["ServiceAccount"][gw] = true
		}
	}
	return objects, problems, nil
}

// registeredGateways are the Gateways with a catalog instance of ours.
func (s *scenario) registeredGateways(ctx context.Context) (map[string]bool, error) {
	verdicts, err := verdictConsul()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	services, _, err := verdicts.Catalog().Services(consistentRead(ctx))
	if err != nil {
		return nil, err
	}
	for name := range services {
		instances, _, err := verdicts.Catalog().Service(name, "", consistentRead(ctx))
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

// ownedKinds are the entry kinds the controller writes.
var ownedKinds = []string{consulapi.APIGateway, consulapi.HTTPRoute, consulapi.TCPRoute, consulapi.InlineCertificate, consulapi.ServiceDefaults}

// ownedEntries are Consul's entries with our meta, by kind and the name of the object
// they were written for.
func (s *scenario) ownedEntries(ctx context.Context) (map[string]consulapi.ConfigEntry, error) {
	verdicts, err := verdictConsul()
	if err != nil {
		return nil, err
	}
	out := map[string]consulapi.ConfigEntry{}
	for _, kind := range ownedKinds {
		entries, _, err := verdicts.ConfigEntries().List(kind, consistentRead(ctx))
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
// for, deletes made while no replica ran included. A failed read is a violation too,
// so the run's other findings still reach the table.
func (s *scenario) checkNoLostDelete(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := s.checkOwnersLive(ctx); err != nil {
		s.oracle.violate("no lost delete: %v", err)
	}
}

func (s *scenario) checkOwnersLive(ctx context.Context) error {
	verdicts, err := verdictConsul()
	if err != nil {
		return err
	}
	for _, kind := range ownedKinds {
		entries, _, err := verdicts.ConfigEntries().List(kind, consistentRead(ctx))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if s.owns(e.GetMeta()) {
				s.checkOwnerLives(ctx, kind+"/"+e.GetName(), e.GetMeta())
			}
		}
	}
	services, _, err := verdicts.Catalog().Services(consistentRead(ctx))
	if err != nil {
		return err
	}
	for name := range services {
		instances, _, err := verdicts.Catalog().Service(name, "", consistentRead(ctx))
		if err != nil {
			return err
		}
		for _, in := range instances {
			if s.owns(in.ServiceMeta) {
				s.checkOwnerLives(ctx, "catalog "+in.ServiceID, in.ServiceMeta)
			}
		}
	}
	return nil
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
