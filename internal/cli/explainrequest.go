package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	configclient "github.com/consul-gateway-controller/consul-gateway-controller/api/client"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

const explainRequestUsage = `Usage: consul-gateway-controller explain request METHOD URL [-H 'Name: value' ...] [--gateway NAMESPACE/NAME] [-o yaml|json] [flags]

Says where one HTTP request goes: the Gateway and listener that take it (by the URL's
port and host, or a Host header; --gateway names the Gateway), then the route, rule
and backends that serve it, in the Gateway API's precedence and in Consul 1.15's,
and when the two differ; the rewrites and header changes the rule applies, and the
responder when it redirects or answers 500. The routes are judged with the
controller's own decisions, from the cluster; Consul's entries for them and the
backends' compiled discovery chains say what Consul holds. It only reads.

Flags:
`

// RequestReport is what explain request prints.
type RequestReport struct {
	Request string `json:"request"`
	Gateway string `json:"gateway,omitempty"`
	// Listener is the Gateway listener that takes the request, ConsulListener the
	// api-gateway entry's listener serving its port.
	Listener       string `json:"listener,omitempty"`
	ListenerSet    string `json:"listenerSet,omitempty"`
	ConsulListener string `json:"consulListener,omitempty"`
	// NoListener says why no Gateway takes the request.
	NoListener string `json:"noListener,omitempty"`
	// Spec is the rule Gateway API sends the request to; nil is a 404.
	Spec *RuleReport `json:"spec,omitempty"`
	// Consul are the rules Consul 1.15 may send it to (several when the order Consul
	// bound the routes in decides); none is a 404.
	ConsulVirtualHost string       `json:"consulVirtualHost,omitempty"`
	Consul            []RuleReport `json:"consul,omitempty"`
	// Agreement says whether the two agree, in words.
	Agreement string   `json:"agreement,omitempty"`
	Sources   []string `json:"sources"`
	Notes     []string `json:"notes,omitempty"`
}

// RuleReport is one rule that serves the request, and what it does to it.
type RuleReport struct {
	Route   string `json:"route"`
	Rule    int    `json:"rule"`
	Matches string `json:"matches"`
	// Answer is "forwarded", or how the request is answered instead.
	Answer   string          `json:"answer"`
	Filters  []string        `json:"filters,omitempty"`
	Backends []BackendReport `json:"backends,omitempty"`
	// Entry is the route's Consul entry and Consul's verdict on it.
	Entry string `json:"entry,omitempty"`
}

// BackendReport is one backendRef of a rule and where Consul sends its share.
type BackendReport struct {
	Ref           string   `json:"ref"`
	Weight        int32    `json:"weight"`
	ConsulService string   `json:"consulService,omitempty"`
	Problem       string   `json:"problem,omitempty"`
	Filters       []string `json:"filters,omitempty"`
	// Chain is Consul's compiled discovery chain for the service, in words.
	Chain string `json:"chain,omitempty"`
}

// requestFlags are explain request's own flags.
type requestFlags struct {
	headers []string
	gateway string
	output  string
}

// explainRequestCommand runs explain request and returns its exit code.
func explainRequestCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f statusFlags
	var rf requestFlags
	fs := requestFlagSet(stderr, &f, &rf)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "explain request: %v\n", err)
		return 2
	}
	req, gateway, err := parseRequestArgs(fs.Args(), rf)
	if err != nil {
		fmt.Fprintf(stderr, "explain request: %v\n", err)
		return 2
	}
	if !slices.Contains([]string{"", "yaml", "json"}, rf.output) {
		fmt.Fprintf(stderr, "explain request: -o %s: want yaml or json\n", rf.output)
		return 2
	}
	c, err := connect(ctx, &f)
	if err != nil {
		fmt.Fprintf(stderr, "explain request: %v\n", err)
		return 1
	}
	rep, err := explainRequest(ctx, c, f, req, gateway)
	if err != nil {
		fmt.Fprintf(stderr, "explain request: %v\n", err)
		return 1
	}
	if err := writeRequestReport(stdout, rep, rf.output); err != nil {
		fmt.Fprintf(stderr, "explain request: %v\n", err)
		return 1
	}
	if c.reader.err != nil {
		fmt.Fprintln(stderr, c.reader.err)
		return ExitConsulNotRead
	}
	return 0
}

// requestFlagSet is explain request's flag set, filling f and rf.
func requestFlagSet(stderr io.Writer, f *statusFlags, rf *requestFlags) *pflag.FlagSet {
	fs := readerFlags("explain request", stderr, f)
	options.AddResponderFlag(fs, &f.responderService)
	fs.StringArrayVarP(&rf.headers, "header", "H", nil, "a request header, 'Name: value' (repeatable); Host sets the host")
	fs.StringVar(&rf.gateway, "gateway", "", "the Gateway, NAMESPACE/NAME; empty: the Gateway whose address or listeners take the URL")
	fs.StringVarP(&rf.output, "output", "o", "", "output format: empty (text), yaml or json")
	fs.Usage = func() {
		fmt.Fprint(stderr, explainRequestUsage)
		fs.PrintDefaults()
	}
	return fs
}

// parseRequestArgs reads METHOD URL and the headers into a request, and the
// --gateway flag (nil when unset).
func parseRequestArgs(args []string, rf requestFlags) (gwsync.Request, *cache.ObjectName, error) {
	if len(args) != 2 {
		return gwsync.Request{}, nil, errors.New("want: explain request METHOD URL")
	}
	u, err := url.Parse(args[1])
	if err != nil || u.Host == "" {
		return gwsync.Request{}, nil, fmt.Errorf("%q: want an absolute URL, http://HOST[:PORT]/PATH", args[1])
	}
	req := gwsync.Request{Method: strings.ToUpper(args[0]), Host: u.Hostname(), Path: u.EscapedPath(), Headers: map[string]string{}, Query: map[string]string{}}
	if req.Path == "" {
		req.Path = "/"
	}
	if req.Port, err = urlPort(u); err != nil {
		return gwsync.Request{}, nil, err
	}
	for name, values := range u.Query() {
		req.Query[name] = values[0]
	}
	for _, h := range rf.headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return gwsync.Request{}, nil, fmt.Errorf("-H %q: want 'Name: value'", h)
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if strings.EqualFold(name, "host") {
			req.Host = hostWithoutPort(value)
			continue
		}
		req.Headers[strings.ToLower(name)] = value
	}
	if rf.gateway == "" {
		return req, nil, nil
	}
	ns, name, ok := strings.Cut(rf.gateway, "/")
	if !ok || ns == "" || name == "" {
		return gwsync.Request{}, nil, fmt.Errorf("--gateway %q: want NAMESPACE/NAME", rf.gateway)
	}
	return req, &cache.ObjectName{Namespace: ns, Name: name}, nil
}

func urlPort(u *url.URL) (gatewayv1.PortNumber, error) {
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("port %q: want 1-65535", p)
		}
		return gatewayv1.PortNumber(n), nil
	}
	switch u.Scheme {
	case "http":
		return 80, nil
	case "https":
		return 443, nil
	}
	return 0, fmt.Errorf("scheme %q: want http or https, or a port", u.Scheme)
}

func hostWithoutPort(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}

// explainRequest reads what the decision needs from the cluster, decides where req
// goes, and adds what Consul holds: the routes' entries and the backends' chains.
func explainRequest(ctx context.Context, c connections, f statusFlags, req gwsync.Request, gateway *cache.ObjectName) (RequestReport, error) {
	objects, notes, err := requestObjects(ctx, c)
	if err != nil {
		return RequestReport{}, err
	}
	configs, note, err := gatewayConfigs(ctx, f)
	if err != nil {
		return RequestReport{}, err
	}
	objects = append(objects, configs...)
	if note != "" {
		notes = append(notes, note)
	}
	rep, err := routeRequest(decisionConfig(f), objects, req, gateway, errorAnswer(f.responderService))
	if err != nil {
		return RequestReport{}, err
	}
	rep.Notes = append(notes, rep.Notes...)
	addConsulView(ctx, &rep, c, f)
	return rep, nil
}

// requestObjects reads the objects the decision reads: GatewayClasses, Gateways,
// ListenerSets, HTTPRoutes and what backend resolution reads (backendObjects); Namespaces (for
// allowedRoutes selectors) and TLS Secrets (for HTTPS listeners) where the caller may
// list them, with a note where it may not.
func requestObjects(ctx context.Context, c connections) ([]runtime.Object, []string, error) {
	objs, notes, err := backendObjects(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	classes, err := c.gateway.GatewayV1().GatewayClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list GatewayClasses: %w", err)
	}
	for i := range classes.Items {
		objs = append(objs, &classes.Items[i])
	}
	gateways, err := c.gateway.GatewayV1().Gateways(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list Gateways: %w", err)
	}
	for i := range gateways.Items {
		objs = append(objs, &gateways.Items[i])
	}
	sets, err := c.gateway.GatewayV1().ListenerSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list ListenerSets: %w", err)
	}
	for i := range sets.Items {
		objs = append(objs, &sets.Items[i])
	}
	routes, err := c.gateway.GatewayV1().HTTPRoutes(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list HTTPRoutes: %w", err)
	}
	for i := range routes.Items {
		objs = append(objs, &routes.Items[i])
	}
	namespaces, err := c.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		notes = append(notes, "namespaces may not be listed: a listener's allowedRoutes namespace selector selects none")
	case err != nil:
		return nil, nil, fmt.Errorf("list Namespaces: %w", err)
	default:
		for i := range namespaces.Items {
			objs = append(objs, &namespaces.Items[i])
		}
	}
	secrets, err := c.kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "type=kubernetes.io/tls"})
	switch {
	case apierrors.IsForbidden(err):
		notes = append(notes, "TLS Secrets may not be listed: HTTPS listeners are judged without their certificates, and take no request")
	case err != nil:
		return nil, nil, fmt.Errorf("list TLS Secrets: %w", err)
	default:
		for i := range secrets.Items {
			objs = append(objs, &secrets.Items[i])
		}
	}
	return objs, notes, nil
}

// gatewayConfigs lists the GatewayConfigs, which a class or Gateway may take its
// parameters from; a note when they may not be listed or are not served.
func gatewayConfigs(ctx context.Context, f statusFlags) ([]runtime.Object, string, error) {
	cfg, err := kubeConfig(f.kubeconfig)
	if err != nil {
		return nil, "", err
	}
	client, err := configclient.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	list, err := client.GatewayConfigs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		return nil, "GatewayConfigs not listed (" + err.Error() + "): a class or Gateway that names one is judged without it", nil
	case err != nil:
		return nil, "", fmt.Errorf("list GatewayConfigs: %w", err)
	}
	out := make([]runtime.Object, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, "", nil
}

// routeRequest decides, from objects alone, where req goes: on gateway, or on the
// Gateways of the controller whose address or listeners take it. errorAnswer is how a
// dropped rule's requests are answered. It is pure.
func routeRequest(cfg gwsync.OfflineConfig, objects []runtime.Object, req gwsync.Request, gateway *cache.ObjectName, errorAnswer string) (RequestReport, error) {
	rep := RequestReport{Request: describeRequest(req), Sources: []string{"Kubernetes: the Gateway and its HTTPRoutes, judged with the controller's own decisions"}}
	d, err := gwsync.NewOfflineDecider(cfg, objects)
	if err != nil {
		return rep, err
	}
	candidates, err := requestGateways(d, req, gateway)
	if err != nil {
		return rep, err
	}
	var why []string
	for _, cand := range candidates {
		routing, err := d.RouteRequest(cand.gw, cand.class, req)
		if err != nil {
			return rep, err
		}
		key := cache.MetaObjectToName(cand.gw).String()
		if routing.Listener == "" {
			why = append(why, key+": "+routing.NoListener)
			continue
		}
		if rep.Gateway != "" {
			rep.Notes = append(rep.Notes, fmt.Sprintf("Gateway %s takes the request too (listener %s); give --gateway to explain it there", key, routing.Listener))
			continue
		}
		rep.Gateway = key
		if err := fillRouting(&rep, d, cfg, objects, routing, errorAnswer); err != nil {
			return rep, err
		}
	}
	if rep.Gateway == "" {
		rep.NoListener = "no Gateway of this controller takes it"
		if len(why) > 0 {
			rep.NoListener += ": " + strings.Join(why, "; ")
		}
	}
	return rep, nil
}

type gatewayOfClass struct {
	gw    *gatewayv1.Gateway
	class *gatewayv1.GatewayClass
}

// requestGateways are the Gateways of the controller to try: the one named; else
// those with req's host among their addresses; else all.
func requestGateways(d *gwsync.OfflineDecider, req gwsync.Request, named *cache.ObjectName) ([]gatewayOfClass, error) {
	var all, byAddress []gatewayOfClass
	for _, gw := range d.Gateways() {
		class, ours, err := d.OurClass(gw.Spec.GatewayClassName)
		if err != nil {
			return nil, err
		}
		if !ours {
			continue
		}
		g := gatewayOfClass{gw, class}
		if named != nil && cache.MetaObjectToName(gw) == *named {
			return []gatewayOfClass{g}, nil
		}
		all = append(all, g)
		if slices.ContainsFunc(gw.Status.Addresses, func(a gatewayv1.GatewayStatusAddress) bool { return a.Value == req.Host }) {
			byAddress = append(byAddress, g)
		}
	}
	if named != nil {
		return nil, fmt.Errorf("--gateway %s: no such Gateway of a class of %s", named, d.ControllerName())
	}
	if len(byAddress) > 0 {
		return byAddress, nil
	}
	return all, nil
}

// fillRouting spells routing out: each rule with its matches, filters and backends.
func fillRouting(rep *RequestReport, d *gwsync.OfflineDecider, cfg gwsync.OfflineConfig, objects []runtime.Object, routing gwsync.RequestRouting, errorAnswer string) error {
	rep.Listener, rep.ConsulListener, rep.ListenerSet = string(routing.Listener), string(routing.ConsulListener), routing.ListenerSet
	if routing.RegexPath {
		rep.Agreement = "a RegularExpression path match selects the request: its precedence is implementation-specific, and neither answer is given"
		return nil
	}
	rep.ConsulVirtualHost = routing.ConsulHost
	if routing.Spec != nil {
		r, err := ruleReport(d, cfg, objects, *routing.Spec, errorAnswer)
		if err != nil {
			return err
		}
		rep.Spec = &r
	}
	for _, ref := range routing.Consul {
		r, err := ruleReport(d, cfg, objects, ref, errorAnswer)
		if err != nil {
			return err
		}
		rep.Consul = append(rep.Consul, r)
	}
	rep.Agreement = agreement(routing)
	return nil
}

// agreement says in words whether Consul 1.15 sends the request where Gateway API does.
func agreement(routing gwsync.RequestRouting) string {
	switch {
	case routing.Spec == nil && len(routing.Consul) == 0:
		return "agree: no rule matches; the request is answered 404"
	case routing.Spec == nil:
		return "disagree: Gateway API matches no rule (404), Consul 1.15 sends it to a rule"
	case len(routing.Consul) == 0:
		return "disagree: Consul 1.15 answers it 404 (its virtual host for the host holds no matching rule)"
	case len(routing.Consul) == 1 && routing.Consul[0] == *routing.Spec:
		return "agree: Consul 1.15 sends it to the same rule"
	case slices.Contains(routing.Consul, *routing.Spec):
		return "may disagree: Consul 1.15 ranks these rules alike and takes the one of the route it bound first"
	}
	return "disagree: Consul 1.15 ranks matches by path length, then header count, then query param count, and sends it to another rule"
}

// ruleReport is one rule of a route: its matches, filters and backends as the
// workers decide them.
func ruleReport(d *gwsync.OfflineDecider, cfg gwsync.OfflineConfig, objects []runtime.Object, ref gwsync.RuleRef, errorAnswer string) (RuleReport, error) {
	route := findHTTPRoute(d, ref.Route)
	if route == nil || ref.Rule >= len(route.Spec.Rules) {
		return RuleReport{}, fmt.Errorf("HTTPRoute %s rule %d: not found", ref.Route, ref.Rule)
	}
	explanation, err := decideRoute(cfg, route, others(objects, route))
	if err != nil {
		return RuleReport{}, err
	}
	rule := route.Spec.Rules[ref.Rule]
	out := RuleReport{
		Route:   ref.Route.String(),
		Rule:    ref.Rule,
		Matches: strings.TrimSuffix(strings.TrimPrefix(describeMatches(route, ref.Rule), " ("), ")"),
		Answer:  "forwarded to its backends",
		Filters: describeFilters(rule.Filters),
	}
	decided := explanation.Rules[ref.Rule]
	switch {
	case decided.Problem != "":
		out.Answer = "answered with " + errorAnswer + ": the rule is dropped: " + decided.Problem
	case hasFilterType(rule.Filters, gatewayv1.HTTPRouteFilterRequestRedirect):
		out.Answer = "redirected by the responder (HTTP " + redirectCode(rule.Filters) + ")"
	case len(rule.BackendRefs) == 0:
		out.Answer = "answered with " + errorAnswer + ": the rule has no backendRefs"
	}
	resolved := 0
	for i, b := range rule.BackendRefs {
		br := BackendReport{Ref: backendName(route.Namespace, b.BackendObjectReference), Weight: 1, Filters: describeFilters(b.Filters)}
		if b.Weight != nil {
			br.Weight = *b.Weight
		}
		if i < len(decided.Backends) {
			br.ConsulService, br.Problem = decided.Backends[i].ConsulService, decided.Backends[i].Problem
		}
		if br.Problem != "" {
			br.Problem += "; its share of the requests is answered with " + errorAnswer
		} else {
			resolved++
		}
		out.Backends = append(out.Backends, br)
	}
	if decided.Problem == "" && len(rule.BackendRefs) > 0 && resolved == 0 {
		out.Answer = "answered with " + errorAnswer + ": no backendRef of the rule resolves"
	}
	return out, nil
}

func findHTTPRoute(d *gwsync.OfflineDecider, key cache.ObjectName) *gatewayv1.HTTPRoute {
	for _, obj := range d.Routes(gatewayapi.HTTPRouteKind) {
		if r, ok := obj.(*gatewayv1.HTTPRoute); ok && cache.MetaObjectToName(r) == key {
			return r
		}
	}
	return nil
}

// others are objects without route.
func others(objects []runtime.Object, route *gatewayv1.HTTPRoute) []runtime.Object {
	out := make([]runtime.Object, 0, len(objects))
	for _, obj := range objects {
		if r, ok := obj.(*gatewayv1.HTTPRoute); ok && r.Namespace == route.Namespace && r.Name == route.Name {
			continue
		}
		out = append(out, obj)
	}
	return out
}

func hasFilterType(filters []gatewayv1.HTTPRouteFilter, t gatewayv1.HTTPRouteFilterType) bool {
	return slices.ContainsFunc(filters, func(f gatewayv1.HTTPRouteFilter) bool { return f.Type == t })
}

func redirectCode(filters []gatewayv1.HTTPRouteFilter) string {
	for _, f := range filters {
		if f.Type == gatewayv1.HTTPRouteFilterRequestRedirect && f.RequestRedirect != nil && f.RequestRedirect.StatusCode != nil {
			return strconv.Itoa(*f.RequestRedirect.StatusCode)
		}
	}
	return "302"
}

// describeFilters says what each filter does to the request or its response.
func describeFilters(filters []gatewayv1.HTTPRouteFilter) []string {
	var out []string
	for _, f := range filters {
		switch {
		case f.RequestHeaderModifier != nil:
			out = append(out, "request headers: "+describeHeaderFilter(f.RequestHeaderModifier))
		case f.ResponseHeaderModifier != nil:
			out = append(out, "response headers: "+describeHeaderFilter(f.ResponseHeaderModifier))
		case f.URLRewrite != nil:
			out = append(out, "rewrite: "+describeRewrite(f.URLRewrite.Hostname, f.URLRewrite.Path))
		case f.RequestRedirect != nil:
			out = append(out, "redirect: "+describeRedirect(f.RequestRedirect))
		default:
			out = append(out, string(f.Type))
		}
	}
	return out
}

func describeHeaderFilter(h *gatewayv1.HTTPHeaderFilter) string {
	var parts []string
	for _, s := range h.Set {
		parts = append(parts, fmt.Sprintf("set %s: %s", s.Name, s.Value))
	}
	for _, a := range h.Add {
		parts = append(parts, fmt.Sprintf("add %s: %s", a.Name, a.Value))
	}
	for _, r := range h.Remove {
		parts = append(parts, "remove "+r)
	}
	return strings.Join(parts, ", ")
}

func describeRewrite(hostname *gatewayv1.PreciseHostname, path *gatewayv1.HTTPPathModifier) string {
	var parts []string
	if hostname != nil {
		parts = append(parts, "host to "+string(*hostname))
	}
	if path != nil {
		switch {
		case path.ReplaceFullPath != nil:
			parts = append(parts, "path to "+*path.ReplaceFullPath)
		case path.ReplacePrefixMatch != nil:
			parts = append(parts, "the matched path prefix to "+*path.ReplacePrefixMatch)
		}
	}
	return strings.Join(parts, ", ")
}

func describeRedirect(r *gatewayv1.HTTPRequestRedirectFilter) string {
	var parts []string
	if r.Scheme != nil {
		parts = append(parts, "scheme "+*r.Scheme)
	}
	if r.Hostname != nil {
		parts = append(parts, "host "+string(*r.Hostname))
	}
	if r.Port != nil {
		parts = append(parts, fmt.Sprintf("port %d", *r.Port))
	}
	if r.Path != nil {
		parts = append(parts, describeRewrite(nil, r.Path))
	}
	code := 302
	if r.StatusCode != nil {
		code = *r.StatusCode
	}
	return strings.Join(append(parts, fmt.Sprintf("status %d", code)), ", ")
}

// describeRequest is req as a request line with its headers.
func describeRequest(req gwsync.Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s:%d%s", req.Method, req.Host, req.Port, req.Path)
	sep := "?"
	for _, name := range slices.Sorted(maps.Keys(req.Query)) {
		b.WriteString(sep + name + "=" + req.Query[name])
		sep = "&"
	}
	for _, name := range slices.Sorted(maps.Keys(req.Headers)) {
		fmt.Fprintf(&b, " (%s: %s)", name, req.Headers[name])
	}
	return b.String()
}

// addConsulView adds what Consul holds: each rule's route entry with Consul's
// verdict, and each backend's compiled discovery chain. A Consul that cannot be read
// leaves the answer the Kubernetes objects', and says so.
func addConsulView(ctx context.Context, rep *RequestReport, c connections, f statusFlags) {
	if rep.Spec == nil && len(rep.Consul) == 0 {
		return
	}
	entries, err := ownedEntries(ctx, c.reader, translate.Ownership{Controller: f.controller, ClusterID: f.clusterID})
	if err != nil {
		rep.Sources = append(rep.Sources, "Consul: not reached ("+err.Error()+"); the answer is the Kubernetes objects' alone")
		return
	}
	rep.Sources = append(rep.Sources, "Consul: the routes' http-route entries and the backends' compiled discovery chains, as Consul holds them")
	chains := map[string]string{}
	fill := func(r *RuleReport) {
		ns, name, _ := strings.Cut(r.Route, "/")
		r.Entry = describeEntries(entries[ownerName{gatewayapi.HTTPRouteKind, cache.ObjectName{Namespace: ns, Name: name}}], gatewayEntryName(entries, rep.Gateway))
		for i := range r.Backends {
			b := &r.Backends[i]
			if b.ConsulService == "" {
				continue
			}
			if _, ok := chains[b.ConsulService]; !ok {
				chains[b.ConsulService] = describeChain(ctx, c, b.ConsulService)
			}
			b.Chain = chains[b.ConsulService]
		}
	}
	if rep.Spec != nil {
		fill(rep.Spec)
	}
	for i := range rep.Consul {
		fill(&rep.Consul[i])
		if !strings.Contains(rep.Consul[i].Entry, "Accepted=True") || strings.Contains(rep.Consul[i].Entry, "Bound=False") {
			rep.Agreement += fmt.Sprintf("; but Consul does not serve HTTPRoute %s as written (its entry: %s)", rep.Consul[i].Route, rep.Consul[i].Entry)
		}
	}
}

// gatewayEntryName is the name of the api-gateway entry of the Gateway named
// "namespace/name" among entries; "" when Consul holds none.
func gatewayEntryName(entries map[ownerName][]EntryReport, gateway string) string {
	ns, name, _ := strings.Cut(gateway, "/")
	for _, e := range entries[ownerName{gatewayapi.GatewayKind, cache.ObjectName{Namespace: ns, Name: name}}] {
		if e.Kind == consulapi.APIGateway {
			return e.Name
		}
	}
	return ""
}

// describeEntries names a route's entries, Consul's Accepted verdict on each, and
// whether Consul bound it to the api-gateway entry gatewayEntry.
func describeEntries(written []EntryReport, gatewayEntry string) string {
	if len(written) == 0 {
		return "none: Consul holds no entry for the route, so it serves none of its rules"
	}
	var parts []string
	for _, e := range written {
		verdicts := []string{"not judged by Consul yet"}
		if i := slices.IndexFunc(e.Conditions, func(c Condition) bool { return c.Type == "Accepted" && c.On == "" }); i >= 0 {
			verdicts = []string{"Accepted=" + e.Conditions[i].Status}
		}
		for _, c := range e.Conditions {
			if c.Type == "Bound" && gatewayEntry != "" && strings.HasPrefix(c.On, consulapi.APIGateway+" "+gatewayEntry) {
				verdicts = append(verdicts, fmt.Sprintf("Bound=%s on %s", c.Status, c.On))
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", e.Kind, e.Name, strings.Join(verdicts, ", ")))
	}
	return strings.Join(parts, "; ")
}

// describeChain says what Consul's compiled discovery chain for service resolves
// to: its protocol and its targets.
func describeChain(ctx context.Context, c connections, service string) string {
	var resp *consulapi.DiscoveryChainResponse
	err := c.reader.try(ctx, func(ctx context.Context) error {
		var err error
		q := &consulapi.QueryOptions{Partition: c.reader.naming.Partition}
		resp, _, err = c.consul.DiscoveryChain().Get(service, nil, q.WithContext(ctx))
		return err
	})
	if err != nil {
		return "not read: " + err.Error()
	}
	chain := resp.Chain
	targets := make([]string, 0, len(chain.Targets))
	for id := range chain.Targets {
		targets = append(targets, id)
	}
	slices.Sort(targets)
	return fmt.Sprintf("protocol %s, targets %s", chain.Protocol, strings.Join(targets, ", "))
}

// writeRequestReport prints rep as text, or as yaml or json.
func writeRequestReport(w io.Writer, rep RequestReport, format string) error {
	if format != "" {
		return writeStructured(w, rep, format)
	}
	p := printer{w: w}
	p.line(0, "Request: %s", rep.Request)
	if rep.Gateway == "" {
		p.line(0, "Not served: %s", rep.NoListener)
	} else {
		of := ""
		if rep.ListenerSet != "" {
			of = " of ListenerSet " + rep.ListenerSet
		}
		p.line(0, "Gateway: %s, listener %s%s (Consul listener %s)", rep.Gateway, rep.Listener, of, rep.ConsulListener)
	}
	for _, n := range rep.Notes {
		p.line(1, "note: %s", n)
	}
	if rep.Gateway != "" {
		p.line(0, "")
		p.line(0, "Gateway API precedence:")
		if rep.Spec == nil {
			p.line(1, "no rule matches: 404")
		} else {
			p.ruleReport(*rep.Spec)
		}
		p.line(0, "")
		p.line(0, "Consul 1.15 (virtual host %s):", dash(rep.ConsulVirtualHost))
		if len(rep.Consul) == 0 {
			p.line(1, "no rule matches: 404")
		}
		for _, r := range rep.Consul {
			p.ruleReport(r)
		}
		p.line(0, "")
		p.line(0, "Verdict: %s", rep.Agreement)
	}
	p.line(0, "")
	p.line(0, "Sources:")
	for _, s := range rep.Sources {
		p.line(1, "%s", s)
	}
	return p.err
}

func (p *printer) ruleReport(r RuleReport) {
	p.line(1, "HTTPRoute %s rule %d (%s): %s", r.Route, r.Rule, r.Matches, r.Answer)
	for _, f := range r.Filters {
		p.line(2, "%s", f)
	}
	for _, b := range r.Backends {
		switch {
		case b.Problem != "":
			p.line(2, "backendRef %s (weight %d): not resolved: %s", b.Ref, b.Weight, b.Problem)
		default:
			p.line(2, "backendRef %s (weight %d): the Consul service %q", b.Ref, b.Weight, b.ConsulService)
		}
		for _, f := range b.Filters {
			p.line(3, "%s", f)
		}
		if b.Chain != "" {
			p.line(3, "discovery chain: %s", b.Chain)
		}
	}
	if r.Entry != "" {
		p.line(2, "Consul entry: %s", r.Entry)
	}
}

// writeStructured prints v as yaml or json.
func writeStructured(w io.Writer, v any, format string) error {
	data, err := json.MarshalIndent(v, "", "  ")
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
