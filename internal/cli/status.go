package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

const statusUsage = `Usage: consul-gateway-controller status [-A | -n NAMESPACE] [--problems] [-o wide|yaml|json] [flags]

Lists this controller's GatewayClasses, Gateways, ListenerSets and routes with their
key conditions, the Consul config entries written for each and Consul's own status on
them, and flags where the two disagree (the status says accepted, Consul has not
accepted or bound the entry; an accepted object has no entry). It only reads: list on
the Gateway API kinds and Namespaces (the controller's own ClusterRole is enough), and
a Consul token with mesh:read. -n defaults to the kubeconfig context's namespace.

--problems lists only the objects with a condition not in its good state (Accepted,
Programmed, ResolvedRefs False or Unknown; Conflicted True; on the object or on its
Consul entries) or a disagreement with Consul.

Exit codes: 0; 1 when the cluster cannot be read; 2 for bad flags; 3 when Consul was
not reached or refused the query (the Kubernetes half is printed, then a line
"Consul not reached: ..." or "Consul refused the query: ..." on stderr); 4 with
--problems when a problem was listed (and Consul was read).

The Kubernetes and Consul flags and environment are the controller's
(KUBECONFIG, CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN_FILE, CONSUL_CACERT), and so is its
check: a Consul not on loopback is refused without TLS, before anything is sent to
it, unless --consul-allow-plaintext.

Flags:
`

// ExitProblems is status --problems' exit code when it listed a problem.
const ExitProblems = 4

// statusFlags are the status command's settings.
type statusFlags struct {
	kubeconfig string
	consul     options.ConsulConnection
	// consulNaming says where in Consul Enterprise the controller's entries are.
	consulNaming  translate.Naming
	consulTimeout time.Duration
	// namespace, when empty and not allNamespaces, is the kubeconfig context's.
	controller, clusterID, namespace, output string
	allNamespaces                            bool
	// problems keeps only the objects with a problem (status --problems).
	problems bool
	// responderService is the controller's --responder-service (explain).
	responderService string
}

// readerFlags is the flag set of a read-only command named name, with the flags that
// reach the cluster and Consul as the controller does.
func readerFlags(name string, stderr io.Writer, f *statusFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty: $KUBECONFIG, then the in-cluster configuration")
	f.consul.AddReaderFlags(fs)
	addConsulNamingFlags(fs, &f.consulNaming)
	fs.DurationVar(&f.consulTimeout, "consul-timeout", defaultConsulTimeout, "how long to wait for each answer of Consul; without one the Kubernetes half is printed and the command exits 3")
	fs.StringVar(&f.controller, "controller-name", string(gwsync.DefaultControllerName), "the GatewayClass controllerName of the controller")
	fs.StringVar(&f.clusterID, "cluster-id", "", "the controller's --cluster-id; empty derives it as the controller does")
	return fs
}

// addNamespaceFlags adds -n and -A, filling f.
func addNamespaceFlags(fs *pflag.FlagSet, f *statusFlags) {
	fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace of the objects to list; default: the kubeconfig context's")
	fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "list the objects of every namespace")
}

// Status runs the status command and returns its exit code (see statusUsage).
func Status(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f statusFlags
	fs := readerFlags("status", stderr, &f)
	addNamespaceFlags(fs, &f)
	fs.StringVarP(&f.output, "output", "o", "", "output format: empty (a table), wide (the table with messages), yaml or json")
	fs.BoolVar(&f.problems, "problems", false, "list only objects with a condition not in its good state or a disagreement with Consul; exit 4 when there is one")
	fs.Usage = func() {
		fmt.Fprint(stderr, statusUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "status: %v\n", err)
		return 2
	}
	if !slices.Contains([]string{"", "wide", "yaml", "json"}, f.output) {
		fmt.Fprintf(stderr, "status: -o %s: want wide, yaml or json\n", f.output)
		return 2
	}
	rep, err := gatherStatus(ctx, &f)
	if err != nil {
		fmt.Fprintf(stderr, "status: %v\n", err)
		return 1
	}
	if f.problems {
		rep.Objects = slices.DeleteFunc(rep.Objects, func(o ObjectReport) bool { return !o.HasProblem() })
	}
	if err := writeStatus(stdout, rep, f.output); err != nil {
		fmt.Fprintf(stderr, "status: %v\n", err)
		return 1
	}
	switch {
	case rep.ConsulError != "":
		fmt.Fprintln(stderr, rep.ConsulError)
		return ExitConsulNotRead
	case f.problems && len(rep.Objects) > 0:
		return ExitProblems
	}
	return 0
}

// StatusReport is what status prints.
type StatusReport struct {
	Objects []ObjectReport `json:"objects"`
	// ConsulError says why Consul was not read; the objects' entries are then
	// unknown, not absent.
	ConsulError string `json:"consulError,omitempty"`
}

// ObjectReport is one object of ours, its key conditions, its entries in Consul and
// where the two disagree.
type ObjectReport struct {
	Kind          gatewayv1.Kind `json:"kind"`
	Namespace     string         `json:"namespace,omitempty"`
	Name          string         `json:"name"`
	Conditions    []Condition    `json:"conditions"`
	Entries       []EntryReport  `json:"entries,omitempty"`
	Disagreements []string       `json:"disagreements,omitempty"`
}

// HasProblem reports whether a condition of the object or of its entries is not in
// its good state, or the object disagrees with Consul.
func (o ObjectReport) HasProblem() bool {
	if len(o.Disagreements) > 0 || slices.ContainsFunc(o.Conditions, Condition.bad) {
		return true
	}
	return slices.ContainsFunc(o.Entries, func(e EntryReport) bool { return slices.ContainsFunc(e.Conditions, Condition.bad) })
}

// Condition is one condition of an object, of one of its listeners or of one of a
// route's parents (On names which).
type Condition struct {
	On      string `json:"on,omitempty"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// bad reports whether the condition is not in its good state: True, but False for
// Conflicted (Gateway API's and Consul's).
func (c Condition) bad() bool {
	return c.Status != string(goodStatus(c.Type))
}

// goodStatus is the status a condition of type t has when all is well.
func goodStatus(t string) metav1.ConditionStatus {
	if t == string(gatewayv1.ListenerConditionConflicted) {
		return metav1.ConditionFalse
	}
	return metav1.ConditionTrue
}

// EntryReport is a Consul config entry written for an object, and Consul's status on
// it (none before Consul judged it).
type EntryReport struct {
	Kind       string      `json:"kind"`
	Name       string      `json:"name"`
	Conditions []Condition `json:"conditions,omitempty"`
}

// consulGroupPrefix is left off this controller's own condition types in the table.
var consulGroupPrefix = gwsync.ConsulAcceptedCondition[:strings.LastIndex(gwsync.ConsulAcceptedCondition, "/")+1]

// keyConditions are the conditions status lists, by where they sit; a Conflicted
// condition is listed too when it is not in its good state.
var keyConditions = []string{"Accepted", "Programmed", "ResolvedRefs", gwsync.ConsulAcceptedCondition}

// gatherStatus reads the objects of f's namespace and their entries; a Consul that
// cannot be read leaves ConsulError set, and no entry or disagreement.
func gatherStatus(ctx context.Context, f *statusFlags) (StatusReport, error) {
	c, err := connect(ctx, f)
	if err != nil {
		return StatusReport{}, err
	}
	return gatherStatusWith(ctx, c, f)
}

// gatherStatusWith is gatherStatus with the clients c.
func gatherStatusWith(ctx context.Context, c connections, f *statusFlags) (StatusReport, error) {
	namespace := f.namespace
	if f.allNamespaces {
		namespace = metav1.NamespaceAll
	}
	objects, err := listOurObjects(ctx, c.gateway, gatewayv1.GatewayController(f.controller), namespace)
	if err != nil {
		return StatusReport{}, err
	}
	entries, err := ownedEntries(ctx, c.reader, translate.Ownership{Controller: f.controller, ClusterID: f.clusterID})
	if err != nil {
		return StatusReport{Objects: objects, ConsulError: err.Error()}, nil
	}
	for i := range objects {
		o := &objects[i]
		o.Entries = entries[ownerName{o.Kind, cache.ObjectName{Namespace: o.Namespace, Name: o.Name}}]
		o.Disagreements = disagreements(*o)
	}
	return StatusReport{Objects: objects}, nil
}

type ownerName struct {
	kind gatewayv1.Kind
	name cache.ObjectName
}

// ownedEntries lists the entries of the kinds the controller writes for Gateways and
// routes, keeping those of this controller and cluster, by owner.
func ownedEntries(ctx context.Context, r *consulReader, own translate.Ownership) (map[ownerName][]EntryReport, error) {
	out := map[ownerName][]EntryReport{}
	for _, kind := range []string{consulapi.APIGateway, consulapi.HTTPRoute, consulapi.TCPRoute} {
		var list []consulapi.ConfigEntry
		err := r.do(ctx, func(ctx context.Context) error {
			var err error
			list, _, err = r.client.ConfigEntries().List(kind, r.entriesQuery(ctx))
			if err != nil {
				return fmt.Errorf("list Consul's %s entries: %w", kind, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, entry := range list {
			if !own.Owns(entry.GetMeta()) {
				continue
			}
			owner := translate.OwnerOf(entry.GetMeta())
			key := ownerName{gatewayv1.Kind(owner.Kind), cache.ObjectName{Namespace: owner.Namespace, Name: owner.Name}}
			out[key] = append(out[key], entryReport(entry))
		}
	}
	return out, nil
}

// entryReport is entry with Consul's conditions on it.
func entryReport(entry consulapi.ConfigEntry) EntryReport {
	report := EntryReport{Kind: entry.GetKind(), Name: entry.GetName()}
	for _, c := range consul.EntryStatus(entry).Conditions {
		on := ""
		if c.Resource != nil && c.Resource.Name != "" {
			on = c.Resource.Kind + " " + c.Resource.Name
			if c.Resource.SectionName != "" {
				on += "/" + c.Resource.SectionName
			}
		}
		report.Conditions = append(report.Conditions, Condition{On: on, Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return report
}

// listOurObjects lists the objects of controller's classes in namespace ("" for all),
// each with its key conditions.
func listOurObjects(ctx context.Context, gw gatewayclient.Interface, controller gatewayv1.GatewayController, namespace string) ([]ObjectReport, error) {
	var out []ObjectReport
	classes, err := gw.GatewayV1().GatewayClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list GatewayClasses: %w", err)
	}
	ours := map[string]bool{}
	for _, c := range classes.Items {
		if c.Spec.ControllerName == controller {
			ours[c.Name] = true
			out = append(out, ObjectReport{Kind: gatewayapi.GatewayClassKind, Name: c.Name, Conditions: conditions("", c.Status.Conditions)})
		}
	}
	// Every namespace's Gateways, to know a ListenerSet's parent; those of namespace
	// are listed.
	gateways, err := gw.GatewayV1().Gateways(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Gateways: %w", err)
	}
	ourGateways := map[cache.ObjectName]bool{}
	listed := func(ns string) bool { return namespace == metav1.NamespaceAll || ns == namespace }
	for _, g := range gateways.Items {
		if !ours[string(g.Spec.GatewayClassName)] {
			continue
		}
		ourGateways[cache.MetaObjectToName(&g)] = true
		if !listed(g.Namespace) {
			continue
		}
		r := ObjectReport{Kind: gatewayapi.GatewayKind, Namespace: g.Namespace, Name: g.Name, Conditions: conditions("", g.Status.Conditions)}
		for _, l := range g.Status.Listeners {
			r.Conditions = append(r.Conditions, conditions("listener "+string(l.Name), l.Conditions)...)
		}
		out = append(out, r)
	}
	sets, err := gw.GatewayV1().ListenerSets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ListenerSets: %w", err)
	}
	for _, s := range sets.Items {
		parent := cache.ObjectName{Namespace: s.Namespace, Name: string(s.Spec.ParentRef.Name)}
		if s.Spec.ParentRef.Namespace != nil {
			parent.Namespace = string(*s.Spec.ParentRef.Namespace)
		}
		if !ourGateways[parent] {
			continue
		}
		r := ObjectReport{Kind: gatewayapi.ListenerSetKind, Namespace: s.Namespace, Name: s.Name, Conditions: conditions("", s.Status.Conditions)}
		for _, l := range s.Status.Listeners {
			r.Conditions = append(r.Conditions, conditions("listener "+string(l.Name), l.Conditions)...)
		}
		out = append(out, r)
	}
	routes, err := listRoutes(ctx, gw, namespace)
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		report := ObjectReport{Kind: r.kind, Namespace: r.namespace, Name: r.name}
		for _, p := range r.parents {
			if p.ControllerName == controller {
				report.Conditions = append(report.Conditions, conditions("parent "+gatewayapi.ParentName(p.ParentRef), p.Conditions)...)
			}
		}
		if len(report.Conditions) > 0 {
			out = append(out, report)
		}
	}
	return out, nil
}

type listedRoute struct {
	kind            gatewayv1.Kind
	namespace, name string
	parents         []gatewayv1.RouteParentStatus
}

// listRoutes lists the routes of every kind the controller judges.
func listRoutes(ctx context.Context, gw gatewayclient.Interface, namespace string) ([]listedRoute, error) {
	var out []listedRoute
	v1, opts := gw.GatewayV1(), metav1.ListOptions{}
	add := func(kind gatewayv1.Kind, err error, items func(func(ns, name string, parents []gatewayv1.RouteParentStatus))) error {
		if err != nil {
			return fmt.Errorf("list %ss: %w", kind, err)
		}
		items(func(ns, name string, parents []gatewayv1.RouteParentStatus) {
			out = append(out, listedRoute{kind, ns, name, parents})
		})
		return nil
	}
	http, err := v1.HTTPRoutes(namespace).List(ctx, opts)
	if err := add(gatewayapi.HTTPRouteKind, err, func(f func(string, string, []gatewayv1.RouteParentStatus)) {
		for _, r := range http.Items {
			f(r.Namespace, r.Name, r.Status.Parents)
		}
	}); err != nil {
		return nil, err
	}
	tcp, err := v1.TCPRoutes(namespace).List(ctx, opts)
	if err := add(gatewayapi.TCPRouteKind, err, func(f func(string, string, []gatewayv1.RouteParentStatus)) {
		for _, r := range tcp.Items {
			f(r.Namespace, r.Name, r.Status.Parents)
		}
	}); err != nil {
		return nil, err
	}
	grpc, err := v1.GRPCRoutes(namespace).List(ctx, opts)
	if err := add(gatewayapi.GRPCRouteKind, err, func(f func(string, string, []gatewayv1.RouteParentStatus)) {
		for _, r := range grpc.Items {
			f(r.Namespace, r.Name, r.Status.Parents)
		}
	}); err != nil {
		return nil, err
	}
	tls, err := v1.TLSRoutes(namespace).List(ctx, opts)
	if err := add(gatewayapi.TLSRouteKind, err, func(f func(string, string, []gatewayv1.RouteParentStatus)) {
		for _, r := range tls.Items {
			f(r.Namespace, r.Name, r.Status.Parents)
		}
	}); err != nil {
		return nil, err
	}
	udp, err := v1.UDPRoutes(namespace).List(ctx, opts)
	if err := add(gatewayapi.UDPRouteKind, err, func(f func(string, string, []gatewayv1.RouteParentStatus)) {
		for _, r := range udp.Items {
			f(r.Namespace, r.Name, r.Status.Parents)
		}
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// conditions keeps the key conditions of conds, on where they sit.
func conditions(on string, conds []metav1.Condition) []Condition {
	var out []Condition
	for _, c := range conds {
		bad := Condition{Type: c.Type, Status: string(c.Status)}.bad()
		if slices.Contains(keyConditions, c.Type) || (c.Type == string(gatewayv1.ListenerConditionConflicted) && bad) {
			out = append(out, Condition{On: on, Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
		}
	}
	return out
}

// disagreements says where an object's status and Consul disagree: the status says
// Consul accepted what Consul holds no entry for, has not judged, or refused; or a
// route says Consul accepted it on a parent whose gateway Consul did not bind it to.
func disagreements(o ObjectReport) []string {
	var out []string
	claimsConsul := false
	for _, c := range o.Conditions {
		consulSays := (o.Kind == gatewayapi.GatewayKind && c.On == "" && c.Type == "Programmed") || c.Type == gwsync.ConsulAcceptedCondition
		if consulSays && c.Status == string(metav1.ConditionTrue) {
			claimsConsul = true
		}
	}
	if !claimsConsul {
		return nil
	}
	if len(o.Entries) == 0 {
		return []string{"the status says Consul accepted it, but Consul holds no entry for it"}
	}
	for _, e := range o.Entries {
		accepted := slices.IndexFunc(e.Conditions, func(c Condition) bool { return c.Type == "Accepted" && c.On == "" })
		switch {
		case accepted < 0:
			out = append(out, fmt.Sprintf("the status says Consul accepted it, but Consul has not judged %s %s", e.Kind, e.Name))
		case e.Conditions[accepted].Status != string(metav1.ConditionTrue):
			out = append(out, fmt.Sprintf("the status says Consul accepted it, but Consul did not accept %s %s: %s", e.Kind, e.Name, e.Conditions[accepted].Message))
		}
		for _, c := range e.Conditions {
			if c.Type == "Bound" && c.Status != string(metav1.ConditionTrue) {
				out = append(out, fmt.Sprintf("Consul has not bound %s %s to %s: %s", e.Kind, e.Name, c.On, c.Message))
			}
		}
	}
	return out
}

func writeStatus(w io.Writer, rep StatusReport, format string) error {
	switch format {
	case "yaml", "json":
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if format == "yaml" {
			if data, err = yaml.JSONToYAML(data); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintf(w, "%s\n", strings.TrimRight(string(data), "\n"))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tCONDITIONS\tCONSUL\tDISAGREEMENT")
	for _, o := range rep.Objects {
		entries := summarizeEntries(o.Entries, format == "wide")
		if rep.ConsulError != "" {
			entries = "(Consul not read)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Kind, dash(o.Namespace), o.Name,
			summarize(o.Conditions, format == "wide"), entries, dash(strings.Join(o.Disagreements, "; ")))
	}
	return tw.Flush()
}

// summarize is conditions as Type=Status (with the reason when not True), on the
// object first; wide adds the messages.
func summarize(conds []Condition, wide bool) string {
	var parts []string
	for _, c := range conds {
		s := strings.TrimPrefix(c.Type, consulGroupPrefix) + "=" + c.Status
		if c.Status != string(metav1.ConditionTrue) || wide {
			s += "(" + c.Reason + ")"
		}
		if c.On != "" {
			s = c.On + ": " + s
		}
		if wide && c.Message != "" {
			s += " " + c.Message
		}
		parts = append(parts, s)
	}
	return dash(strings.Join(parts, ", "))
}

func summarizeEntries(entries []EntryReport, wide bool) string {
	var parts []string
	for _, e := range entries {
		s := e.Kind + " " + e.Name
		if len(e.Conditions) == 0 {
			s += " (not judged)"
		} else {
			s += " " + summarize(e.Conditions, wide)
		}
		parts = append(parts, s)
	}
	return dash(strings.Join(parts, "; "))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
