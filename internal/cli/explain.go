package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

const explainUsage = `Usage: consul-gateway-controller explain route [NAMESPACE/]NAME [--kind HTTPRoute|TCPRoute] [flags]
       consul-gateway-controller explain request METHOD URL [-H 'Name: value' ...] (explain request --help)
       consul-gateway-controller explain gateway NAMESPACE/NAME (explain gateway --help)

Explains one route in words: per parent, whether it is attached and why; per rule,
whether it is served, dropped (its requests answered by the blackhole, or by the
responder with --responder-service) or refused, and why; per backendRef, the Consul service it resolves to and how many healthy instances
Consul has of it; the Consul entries written for it and Consul's verdict; and what
Consul 1.15 does with its rules' order against the Gateway API precedence. It only
reads, with the controller's flags and environment (see status); a NAME without a
namespace is in the kubeconfig context's. When Consul cannot be read, it prints what
the cluster says and "Consul not reached: ..." where Consul's part would be, and
exits 3.

Flags:
`

// Explain runs the explain command and returns its exit code: 0; 1 when the route
// cannot be read; 2 for bad arguments; 3 when Consul could not be read (the rest is
// printed).
func Explain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch sub, rest := explainSubcommand(args); sub {
	case "request":
		return explainRequestCommand(ctx, rest, stdout, stderr)
	case "gateway":
		return explainGatewayCommand(ctx, rest, stdout, stderr)
	}
	var f statusFlags
	fs, kind := explainFlags(stderr, &f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "explain: %v\n", err)
		return 2
	}
	if fs.NArg() != 2 || fs.Arg(0) != "route" {
		fmt.Fprintln(stderr, "explain: want: explain route [NAMESPACE/]NAME, explain request METHOD URL or explain gateway NAMESPACE/NAME")
		return 2
	}
	ns, name, ok := strings.Cut(fs.Arg(1), "/")
	if !ok {
		ns, name = "", ns
	}
	if (ok && ns == "") || name == "" {
		fmt.Fprintf(stderr, "explain: %q: want [NAMESPACE/]NAME\n", fs.Arg(1))
		return 2
	}
	if *kind != gatewayapi.HTTPRouteKind && *kind != gatewayapi.TCPRouteKind {
		fmt.Fprintf(stderr, "explain: --kind %s: want HTTPRoute or TCPRoute\n", *kind)
		return 2
	}
	f.namespace = ns
	c, err := connect(ctx, &f)
	if err != nil {
		fmt.Fprintf(stderr, "explain: %v\n", err)
		return 1
	}
	if err := explainRoute(ctx, stdout, c, f, gatewayv1.Kind(*kind), cache.ObjectName{Namespace: f.namespace, Name: name}); err != nil {
		fmt.Fprintf(stderr, "explain: %v\n", err)
		return 1
	}
	if c.reader.err != nil {
		fmt.Fprintln(stderr, c.reader.err)
		return ExitConsulNotRead
	}
	return 0
}

// explainSubcommand is the first argument that is neither a flag nor a flag's value,
// and args without it: explain's flags may come before its subcommand.
func explainSubcommand(args []string) (string, []string) {
	var f statusFlags
	var rf requestFlags
	known := requestFlagSet(io.Discard, &f, &rf)
	known.String("kind", "", "")
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			return a, append(slices.Clone(args[:i]), args[i+1:]...)
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		fl := known.Lookup(name)
		if fl == nil && len(name) == 1 {
			fl = known.ShorthandLookup(name)
		}
		if fl != nil && fl.NoOptDefVal == "" {
			i++ // its value
		}
	}
	return "", args
}

// explainFlags is the explain command's flag set, filling f, and its --kind: the
// read-only commands' flags, and the controller's --responder-service, so that the
// route is judged as by a controller with it.
func explainFlags(stderr io.Writer, f *statusFlags) (*pflag.FlagSet, *string) {
	fs := readerFlags("explain", stderr, f)
	kind := fs.String("kind", gatewayapi.HTTPRouteKind, "the route's kind: HTTPRoute or TCPRoute")
	options.AddResponderFlag(fs, &f.responderService)
	fs.Usage = func() {
		fmt.Fprint(stderr, explainUsage)
		fs.PrintDefaults()
	}
	return fs, kind
}

// decisionConfig is how explain decides on a route: as the controller f names does,
// with RequestRedirect when it has a responder.
func decisionConfig(f statusFlags) gwsync.OfflineConfig {
	return gwsync.OfflineConfig{
		ControllerName: gatewayv1.GatewayController(f.controller),
		Capabilities:   consullimits.Consul115.WithResponder(f.responderService),
	}
}

// connections are a read-only command's clients.
type connections struct {
	kube    kubernetes.Interface
	gateway gatewayclient.Interface
	consul  *consulapi.Client
	// reader reads Consul with consul, bounded, in the entries' namespace and
	// partition, and keeps its first failure.
	reader *consulReader
}

func explainRoute(ctx context.Context, w io.Writer, c connections, f statusFlags, kind gatewayv1.Kind, key cache.ObjectName) error {
	route, parents, err := getRouteOf(ctx, c.gateway, kind, key)
	if err != nil {
		return err
	}
	objects, notes, err := backendObjects(ctx, c)
	if err != nil {
		return err
	}
	explanation, err := decideRoute(decisionConfig(f), route, objects)
	if err != nil {
		return err
	}
	// Consul not read: the entries are unknown, said where they would be printed.
	entries, _ := ownedEntries(ctx, c.reader, translate.Ownership{Controller: f.controller, ClusterID: f.clusterID})
	p := printer{w: w, errorAnswer: errorAnswer(f.responderService)}
	p.line(0, "%s %s", kind, key)
	for _, n := range notes {
		p.line(1, "note: %s", n)
	}
	ours := ourParents(parents, gatewayv1.GatewayController(f.controller))
	p.parents(ours, f.controller)
	p.rules(ctx, c, kind, key, route, explanation)
	p.entries(entries[ownerName{kind, key}], f, c.reader.err)
	p.precedence(ours)
	return p.err
}

// ourParents are the route's parent statuses this controller writes.
func ourParents(parents []gatewayv1.RouteParentStatus, controller gatewayv1.GatewayController) []gatewayv1.RouteParentStatus {
	var ours []gatewayv1.RouteParentStatus
	for _, parent := range parents {
		if parent.ControllerName == controller {
			ours = append(ours, parent)
		}
	}
	return ours
}

// parents prints whether the route is attached to each of its parents, and Consul's
// verdict there.
func (p *printer) parents(ours []gatewayv1.RouteParentStatus, controller string) {
	p.line(0, "")
	p.line(0, "Parents:")
	for _, parent := range ours {
		p.line(1, "%s: %s", gatewayapi.ParentName(parent.ParentRef), attachment(parent.Conditions))
		for _, c := range parent.Conditions {
			if c.Type == gwsync.ConsulAcceptedCondition {
				p.line(2, "Consul: %s (%s): %s", verdictWord(c.Status), c.Reason, c.Message)
			}
		}
	}
	if len(ours) == 0 {
		p.line(1, "none of this controller's: no parentRef names a Gateway of a class of %s, or the controller has not judged it yet", controller)
	}
}

// rules prints what becomes of each rule and where each of its backendRefs sends
// traffic.
func (p *printer) rules(ctx context.Context, c connections, kind gatewayv1.Kind, key cache.ObjectName, route runtime.Object, explanation routeExplanation) {
	p.line(0, "")
	if explanation.HostnameProblem != "" {
		p.line(0, "Hostnames: refused on every parent: %s", explanation.HostnameProblem)
	}
	p.line(0, "Rules:")
	for i, rule := range explanation.Rules {
		state := "served"
		if rule.Problem != "" {
			state = "dropped: " + rule.Problem
			if kind == gatewayapi.HTTPRouteKind {
				state += "; its requests are answered with " + p.errorAnswer
			}
		}
		p.line(1, "rule %d%s: %s", i, describeMatches(route, i), state)
		for _, b := range rule.Backends {
			p.backend(ctx, c, key.Namespace, b)
		}
	}
}

// backend prints where one backendRef of a route in namespace sends traffic.
func (p *printer) backend(ctx context.Context, c connections, namespace string, b backendExplanation) {
	ref := backendName(namespace, b.Ref)
	switch {
	case b.Problem != "":
		p.line(2, "backendRef %s: not resolved: %s; its share of the requests is answered with %s", ref, b.Problem, p.errorAnswer)
	case b.OnlyNamespace:
		ns := gatewayapi.Referent(namespace, b.Ref.Namespace, b.Ref.Name).Namespace
		p.line(2, "backendRef %s: the Consul service %q, only its instances of namespace %s (pods of other namespaces register it too)%s", ref, b.ConsulService, ns, healthyInstances(ctx, c.reader, b.ConsulService, ns, ns))
	default:
		p.line(2, "backendRef %s: the Consul service %q%s", ref, b.ConsulService, healthyInstances(ctx, c.reader, b.ConsulService, gatewayapi.Referent(namespace, b.Ref.Namespace, b.Ref.Name).Namespace, ""))
	}
}

// entries prints the Consul entries written for the route, and Consul's conditions on
// them.
func (p *printer) entries(written []EntryReport, f statusFlags, consulErr error) {
	p.line(0, "")
	p.line(0, "Consul entries:")
	if consulErr != nil {
		p.line(1, "%v", consulErr)
		return
	}
	if len(written) == 0 {
		p.line(1, "none written for it (by %s, cluster %s)", f.controller, f.clusterID)
	}
	for _, e := range written {
		p.line(1, "%s %s:", e.Kind, e.Name)
		if len(e.Conditions) == 0 {
			p.line(2, "not judged by Consul yet")
		}
		for _, c := range e.Conditions {
			on := ""
			if c.On != "" {
				on = " on " + c.On
			}
			p.line(2, "%s=%s%s (%s): %s", c.Type, c.Status, on, c.Reason, c.Message)
		}
	}
}

// precedence prints how Consul 1.15 orders the route's matches against the Gateway
// API's precedence, per parent.
func (p *printer) precedence(ours []gatewayv1.RouteParentStatus) {
	p.line(0, "")
	p.line(0, "Precedence (Consul 1.15 against the Gateway API, docs/consul.md):")
	for _, parent := range ours {
		for _, c := range parent.Conditions {
			if strings.HasSuffix(c.Type, "/RoutedAsSpecified") {
				p.line(1, "%s: %s", gatewayapi.ParentName(parent.ParentRef), c.Message)
			}
		}
	}
}

// connect builds a read-only command's clients, takes an unset namespace from the
// kubeconfig's context (unless all namespaces are asked for), and derives an unset
// cluster id. The Consul client comes first: the controller's check refuses a
// plaintext Consul before the command reads anything.
func connect(ctx context.Context, f *statusFlags) (connections, error) {
	var c connections
	var err error
	if c.consul, err = f.consul.Client(); err != nil {
		return c, err
	}
	c.reader = &consulReader{client: c.consul, naming: f.consulNaming, timeout: f.consulTimeout}
	cfg, err := kubeConfig(f.kubeconfig)
	if err != nil {
		return c, err
	}
	if f.namespace == "" && !f.allNamespaces {
		if f.namespace, err = contextNamespace(f.kubeconfig); err != nil {
			return c, err
		}
	}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return c, err
	}
	if c.gateway, err = gatewayclient.NewForConfig(cfg); err != nil {
		return c, err
	}
	if f.clusterID == "" {
		if f.clusterID, err = deriveClusterID(ctx, c.kube); err != nil {
			return c, err
		}
	}
	return c, nil
}

// deriveClusterID is the cluster id the controller derives when --cluster-id is
// empty: from the kube-system Namespace's UID, read with a list.
func deriveClusterID(ctx context.Context, kube kubernetes.Interface) (string, error) {
	list, err := kube.CoreV1().Namespaces().List(ctx, byName(metav1.NamespaceSystem))
	if err == nil {
		var ns *corev1.Namespace
		if ns, err = onlyItem(list.Items, corev1.Resource("namespaces"), metav1.NamespaceSystem); err == nil {
			return options.ClusterIDOf(ns.UID), nil
		}
	}
	return "", fmt.Errorf("derive the cluster id from the %s Namespace (or give --cluster-id): %w", metav1.NamespaceSystem, err)
}

// getRouteOf reads the route and its status.parents, with a list (byName).
func getRouteOf(ctx context.Context, gw gatewayclient.Interface, kind gatewayv1.Kind, key cache.ObjectName) (runtime.Object, []gatewayv1.RouteParentStatus, error) {
	switch kind {
	case gatewayapi.TCPRouteKind:
		list, err := gw.GatewayV1().TCPRoutes(key.Namespace).List(ctx, byName(key.Name))
		if err != nil {
			return nil, nil, fmt.Errorf("read TCPRoute %s: %w", key, err)
		}
		r, err := onlyItem(list.Items, gatewayv1.Resource("tcproutes"), key.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("read TCPRoute %s: %w", key, err)
		}
		return r, r.Status.Parents, nil
	default:
		list, err := gw.GatewayV1().HTTPRoutes(key.Namespace).List(ctx, byName(key.Name))
		if err != nil {
			return nil, nil, fmt.Errorf("read HTTPRoute %s: %w", key, err)
		}
		r, err := onlyItem(list.Items, gatewayv1.Resource("httproutes"), key.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("read HTTPRoute %s: %w", key, err)
		}
		return r, r.Status.Parents, nil
	}
}

// backendObjects reads what backend resolution reads: Services, ReferenceGrants,
// Namespaces and the pods consul-k8s injected (which may rename a backend). Pods the
// caller may not list are left out, with a note.
func backendObjects(ctx context.Context, c connections) ([]runtime.Object, []string, error) {
	var objs []runtime.Object
	var notes []string
	services, err := c.kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list Services: %w", err)
	}
	for i := range services.Items {
		objs = append(objs, &services.Items[i])
	}
	grants, err := c.gateway.GatewayV1().ReferenceGrants(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list ReferenceGrants: %w", err)
	}
	for i := range grants.Items {
		objs = append(objs, &grants.Items[i])
	}
	pods, err := c.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: backends.InjectStatusLabel + "=" + backends.Injected})
	switch {
	case apierrors.IsForbidden(err):
		notes = append(notes, "pods may not be listed: a backend is taken to be the Consul service of its Service's name")
	case err != nil:
		return nil, nil, fmt.Errorf("list injected pods: %w", err)
	default:
		for i := range pods.Items {
			objs = append(objs, &pods.Items[i])
		}
	}
	return objs, notes, nil
}

// attachment says in words whether a parent status says the route is attached.
func attachment(conds []metav1.Condition) string {
	for _, c := range conds {
		if c.Type != string(gatewayv1.RouteConditionAccepted) {
			continue
		}
		if c.Status == metav1.ConditionTrue {
			return "attached (" + c.Message + ")"
		}
		return fmt.Sprintf("not attached: %s: %s", c.Reason, c.Message)
	}
	return "not judged yet"
}

func verdictWord(s metav1.ConditionStatus) string {
	switch s {
	case metav1.ConditionTrue:
		return "accepted"
	case metav1.ConditionFalse:
		return "not accepted"
	}
	return "unknown"
}

// describeMatches names an HTTPRoute rule's matches, briefly.
func describeMatches(route runtime.Object, i int) string {
	r, ok := route.(*gatewayv1.HTTPRoute)
	if !ok || i >= len(r.Spec.Rules) {
		return ""
	}
	var parts []string
	for _, m := range r.Spec.Rules[i].Matches {
		var s []string
		if m.Path != nil && m.Path.Value != nil {
			t := gatewayv1.PathMatchPathPrefix
			if m.Path.Type != nil {
				t = *m.Path.Type
			}
			s = append(s, fmt.Sprintf("%s %s", t, *m.Path.Value))
		}
		if m.Method != nil {
			s = append(s, string(*m.Method))
		}
		if n := len(m.Headers); n > 0 {
			s = append(s, fmt.Sprintf("%d header match(es)", n))
		}
		if n := len(m.QueryParams); n > 0 {
			s = append(s, fmt.Sprintf("%d query match(es)", n))
		}
		parts = append(parts, strings.Join(s, " "))
	}
	if len(parts) == 0 {
		return " (every request)"
	}
	return " (" + strings.Join(parts, " | ") + ")"
}

func backendName(routeNamespace string, ref gatewayv1.BackendObjectReference) string {
	name := gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name).String()
	if ref.Port != nil {
		name += fmt.Sprintf(":%d", *ref.Port)
	}
	return name
}

// healthyInstances says how many passing instances Consul has of service (in the
// Consul namespace of serviceNamespace's services; only those of onlyNamespace
// unless it is empty), or why it cannot tell.
func healthyInstances(ctx context.Context, r *consulReader, service, serviceNamespace, onlyNamespace string) string {
	var instances []*consulapi.ServiceEntry
	var meta *consulapi.QueryMeta
	err := r.do(ctx, func(ctx context.Context) error {
		q := serviceQuery(r.naming, serviceNamespace)
		if onlyNamespace != "" {
			q.Filter = translate.KubeNamespaceFilter(onlyNamespace)
		}
		var err error
		instances, meta, err = r.client.Health().Service(service, "", true, q.WithContext(ctx))
		return err
	})
	switch {
	case err != nil:
		return "; its instances are unknown: Consul was not read"
	case meta.ResultsFilteredByACLs:
		return ", whose instances the Consul token may not read all of (service:read and node:read)"
	}
	switch len(instances) {
	case 0:
		return ", of which Consul has no healthy instance: its requests get HTTP 503"
	case 1:
		return ", with 1 healthy instance in Consul"
	}
	return fmt.Sprintf(", with %d healthy instances in Consul", len(instances))
}

// printer writes indented lines, keeping the first error.
type printer struct {
	w   io.Writer
	err error
	// errorAnswer is how the requests Gateway API answers with an error are answered.
	errorAnswer string
}

// errorAnswer is how the requests Gateway API answers with an error are answered: by
// the responder (500) when the controller has one, else by the blackhole (503).
func errorAnswer(responderService string) string {
	if responderService != "" {
		return "HTTP 500 (the responder)"
	}
	return "HTTP 503 (the blackhole)"
}

func (p *printer) line(indent int, format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, "%s%s\n", strings.Repeat("  ", indent), fmt.Sprintf(format, args...))
}
