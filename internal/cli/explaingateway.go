package cli

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/intentions"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

const explainGatewayUsage = `Usage: consul-gateway-controller explain gateway NAMESPACE/NAME [-o yaml|json] [flags]

Explains one Gateway: its listeners (port, protocol, hostname, attached routes,
conditions); for each HTTPS listener its certificates as Consul holds them in the
inline-certificate entries (Secret, subject, SANs, validity, expired or expiring
soon; never the key); its pods and why they are not Ready; its Consul identity (the
ACL policy, role and binding rule the controller keeps); and, for every service its
routes send to, whether an intention lets the gateway's Consul service reach it ("why
403"). It only reads, with the controller's flags and environment (see status); the
identity needs acl:read, the intentions intentions:read on the backends.

Flags:
`

// expiringSoon is how close to its notAfter a certificate is called expiring soon.
const expiringSoon = 30 * 24 * time.Hour

// GatewayReport is what explain gateway prints.
type GatewayReport struct {
	Gateway    string            `json:"gateway"`
	Class      string            `json:"class"`
	Conditions []Condition       `json:"conditions,omitempty"`
	Addresses  []string          `json:"addresses,omitempty"`
	Entry      string            `json:"entry,omitempty"`
	Listeners  []ListenerReport  `json:"listeners"`
	Pods       []PodReport       `json:"pods,omitempty"`
	Identity   *IdentityReport   `json:"identity,omitempty"`
	Intentions []IntentionReport `json:"intentions,omitempty"`
	Notes      []string          `json:"notes,omitempty"`
}

// ListenerReport is one listener of the Gateway.
type ListenerReport struct {
	Name           string              `json:"name"`
	Port           int32               `json:"port"`
	Protocol       string              `json:"protocol"`
	Hostname       string              `json:"hostname,omitempty"`
	AttachedRoutes int32               `json:"attachedRoutes"`
	Routes         []string            `json:"routes,omitempty"`
	Conditions     []Condition         `json:"conditions,omitempty"`
	Certificates   []CertificateReport `json:"certificates,omitempty"`
}

// CertificateReport is one certificateRef of an HTTPS listener: its Secret, and the
// certificate Consul holds for it. The key is never read.
type CertificateReport struct {
	Secret    string    `json:"secret"`
	Entry     string    `json:"entry"`
	Subject   string    `json:"subject,omitempty"`
	Issuer    string    `json:"issuer,omitempty"`
	SANs      []string  `json:"sans,omitempty"`
	NotBefore time.Time `json:"notBefore,omitzero"`
	NotAfter  time.Time `json:"notAfter,omitzero"`
	// State is "valid", "expiring soon", "expired", "not yet valid", or why Consul's
	// certificate cannot be told.
	State string `json:"state"`
}

// PodReport is one gateway pod.
type PodReport struct {
	Name    string `json:"name"`
	Phase   string `json:"phase"`
	Ready   bool   `json:"ready"`
	Problem string `json:"problem,omitempty"`
}

// IdentityReport is the Gateway's Consul identity: the ACL objects the controller
// keeps for it, and whether Consul holds them.
type IdentityReport struct {
	Service     string `json:"service"`
	Policy      string `json:"policy"`
	Role        string `json:"role"`
	BindingRule string `json:"bindingRule"`
}

// IntentionReport says whether the gateway's service may reach one destination.
type IntentionReport struct {
	Destination string `json:"destination"`
	// Allowed is Consul's own answer (its intention check); nil when not read.
	Allowed *bool `json:"allowed,omitempty"`
	// Why names the intention source that decides, or its absence.
	Why string `json:"why"`
}

// explainGatewayCommand runs explain gateway and returns its exit code.
func explainGatewayCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f statusFlags
	fs := readerFlags("explain gateway", stderr, &f)
	fs.StringVarP(&f.output, "output", "o", "", "output format: empty (text), yaml or json")
	fs.Usage = func() {
		fmt.Fprint(stderr, explainGatewayUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "explain gateway: %v\n", err)
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "explain gateway: want: explain gateway NAMESPACE/NAME")
		return 2
	}
	ns, name, ok := strings.Cut(fs.Arg(0), "/")
	if !ok || ns == "" || name == "" {
		fmt.Fprintf(stderr, "explain gateway: %q: want NAMESPACE/NAME\n", fs.Arg(0))
		return 2
	}
	if !slices.Contains([]string{"", "yaml", "json"}, f.output) {
		fmt.Fprintf(stderr, "explain gateway: -o %s: want yaml or json\n", f.output)
		return 2
	}
	c, err := connect(ctx, &f)
	if err != nil {
		fmt.Fprintf(stderr, "explain gateway: %v\n", err)
		return 1
	}
	rep, err := explainGateway(ctx, c, f, cache.ObjectName{Namespace: ns, Name: name}, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "explain gateway: %v\n", err)
		return 1
	}
	if err := writeGatewayReport(stdout, rep, f.output); err != nil {
		fmt.Fprintf(stderr, "explain gateway: %v\n", err)
		return 1
	}
	if c.reader.err != nil {
		fmt.Fprintln(stderr, c.reader.err)
		return ExitConsulNotRead
	}
	return 0
}

// explainGateway gathers the report: the Gateway and its routes from the cluster,
// its entries, identity and intentions from Consul.
func explainGateway(ctx context.Context, c connections, f statusFlags, key cache.ObjectName, now time.Time) (GatewayReport, error) {
	gw, err := listGateway(ctx, c, key)
	if err != nil {
		return GatewayReport{}, err
	}
	rep := GatewayReport{Gateway: key.String(), Class: string(gw.Spec.GatewayClassName), Conditions: allConditions("", gw.Status.Conditions)}
	for _, a := range gw.Status.Addresses {
		rep.Addresses = append(rep.Addresses, a.Value)
	}
	routes, err := listRoutes(ctx, c.gateway, metav1.NamespaceAll)
	if err != nil {
		return GatewayReport{}, err
	}
	rep.Listeners = listenerReports(gw, routes, gatewayv1.GatewayController(f.controller))
	rep.Pods, rep.Notes = gatewayPods(ctx, c, key)
	own := translate.Ownership{Controller: f.controller, ClusterID: f.clusterID}
	entry, err := gatewayEntry(ctx, c, own, key)
	if err != nil {
		// The reader keeps the failure: the command says it and exits accordingly.
		rep.Notes = append(rep.Notes, "Consul not read: "+err.Error())
		return rep, nil
	}
	if entry == nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("Consul holds no api-gateway entry of %s (cluster %s) for the Gateway", f.controller, f.clusterID))
		return rep, nil
	}
	rep.Entry = entry.Name
	addCertificates(&rep, c, entry, now)
	prefix := strings.TrimSuffix(entry.Name, key.Name+"."+key.Namespace)
	id, note := gatewayIdentity(c, identity.Namer{Prefix: prefix, Ownership: own}, key, entry.Name)
	rep.Identity = &id
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	rep.Intentions, note = gatewayIntentions(c, own, entry.Name)
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	return rep, nil
}

// listGateway reads one Gateway with a list, which the controller's own RBAC allows.
func listGateway(ctx context.Context, c connections, key cache.ObjectName) (*gatewayv1.Gateway, error) {
	list, err := c.gateway.GatewayV1().Gateways(key.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name).String()})
	if err != nil {
		return nil, fmt.Errorf("list Gateway %s: %w", key, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no Gateway %s", key)
	}
	return &list.Items[0], nil
}

// allConditions are conds, each as Type=Status(Reason): message, on where they sit.
func allConditions(on string, conds []metav1.Condition) []Condition {
	out := make([]Condition, 0, len(conds))
	for _, c := range conds {
		out = append(out, Condition{On: on, Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return out
}

// listenerReports are gw's listeners from its spec and status, each with the routes
// of controller that say they are attached to it. It is pure.
func listenerReports(gw *gatewayv1.Gateway, routes []listedRoute, controller gatewayv1.GatewayController) []ListenerReport {
	out := make([]ListenerReport, 0, len(gw.Spec.Listeners))
	for _, l := range gw.Spec.Listeners {
		r := ListenerReport{Name: string(l.Name), Port: l.Port, Protocol: string(l.Protocol)}
		if l.Hostname != nil {
			r.Hostname = string(*l.Hostname)
		}
		if i := slices.IndexFunc(gw.Status.Listeners, func(s gatewayv1.ListenerStatus) bool { return s.Name == l.Name }); i >= 0 {
			r.AttachedRoutes = gw.Status.Listeners[i].AttachedRoutes
			r.Conditions = allConditions("", gw.Status.Listeners[i].Conditions)
		}
		r.Routes = attachedTo(gw, l.Name, routes, controller)
		if l.TLS != nil {
			for _, ref := range l.TLS.CertificateRefs {
				r.Certificates = append(r.Certificates, CertificateReport{Secret: gatewayapi.Referent(gw.Namespace, ref.Namespace, ref.Name).String(), State: "not in Consul"})
			}
		}
		out = append(out, r)
	}
	return out
}

// attachedTo names the routes whose status, written by controller, says they are
// accepted on gw's listener.
func attachedTo(gw *gatewayv1.Gateway, listener gatewayv1.SectionName, routes []listedRoute, controller gatewayv1.GatewayController) []string {
	var out []string
	for _, r := range routes {
		for _, p := range r.parents {
			ref := p.ParentRef
			if p.ControllerName != controller || !gatewayapi.IsGateway(ref) || gatewayapi.Referent(r.namespace, ref.Namespace, ref.Name) != cache.MetaObjectToName(gw) {
				continue
			}
			if ref.SectionName != nil && *ref.SectionName != listener {
				continue
			}
			if metaConditionTrue(p.Conditions, string(gatewayv1.RouteConditionAccepted)) {
				out = append(out, fmt.Sprintf("%s %s/%s", r.kind, r.namespace, r.name))
				break
			}
		}
	}
	return out
}

func metaConditionTrue(conds []metav1.Condition, t string) bool {
	i := slices.IndexFunc(conds, func(c metav1.Condition) bool { return c.Type == t })
	return i >= 0 && conds[i].Status == metav1.ConditionTrue
}

// gatewayPods lists the Gateway's pods and says why each is not Ready, with the
// reasoning the Gateway's status uses; a note when they may not be listed.
func gatewayPods(ctx context.Context, c connections, key cache.ObjectName) ([]PodReport, []string) {
	list, err := c.kube.CoreV1().Pods(key.Namespace).List(ctx, metav1.ListOptions{LabelSelector: dataplane.PodSelector(key).String()})
	switch {
	case apierrors.IsForbidden(err):
		return nil, []string{"pods may not be listed: the gateway pods are not shown"}
	case err != nil:
		return nil, []string{"pods not listed: " + err.Error()}
	case len(list.Items) == 0:
		return nil, []string{"the Gateway has no pods (the controller deploys none, or has not yet)"}
	}
	out := make([]PodReport, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, podReport(&list.Items[i]))
	}
	slices.SortFunc(out, func(a, b PodReport) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func podReport(pod *corev1.Pod) PodReport {
	r := PodReport{Name: pod.Name, Phase: string(pod.Status.Phase), Problem: dataplane.PodProblem(pod)}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			r.Ready = c.Status == corev1.ConditionTrue
		}
	}
	if !r.Ready && r.Problem == "" && pod.DeletionTimestamp == nil {
		r.Problem = "not Ready yet, with no problem reported (starting, or its readiness probe fails)"
	}
	return r
}

// gatewayEntry is the Gateway's api-gateway entry as Consul holds it, found by its
// ownership meta; nil when Consul holds none. It is the first read of Consul, bounded
// by the reader: a Consul that does not answer it is asked nothing more.
func gatewayEntry(ctx context.Context, c connections, own translate.Ownership, key cache.ObjectName) (*consulapi.APIGatewayConfigEntry, error) {
	var list []consulapi.ConfigEntry
	err := c.reader.do(ctx, func(ctx context.Context) error {
		var err error
		list, _, err = c.consul.ConfigEntries().List(consulapi.APIGateway, c.reader.entriesQuery(ctx))
		if err != nil {
			return fmt.Errorf("list Consul's %s entries: %w", consulapi.APIGateway, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, e := range list {
		owner := translate.OwnerOf(e.GetMeta())
		if own.Owns(e.GetMeta()) && owner.Kind == gatewayapi.GatewayKind && owner.Namespace == key.Namespace && owner.Name == key.Name {
			return e.(*consulapi.APIGatewayConfigEntry), nil
		}
	}
	return nil, nil
}

// addCertificates fills each HTTPS listener's certificates from the inline-certificate
// entries Consul's listener on its port names.
func addCertificates(rep *GatewayReport, c connections, entry *consulapi.APIGatewayConfigEntry, now time.Time) {
	for i := range rep.Listeners {
		l := &rep.Listeners[i]
		if len(l.Certificates) == 0 {
			continue
		}
		j := slices.IndexFunc(entry.Listeners, func(cl consulapi.APIGatewayListener) bool { return int32(cl.Port) == l.Port })
		if j < 0 {
			for k := range l.Certificates {
				l.Certificates[k].State = "not served: Consul's api-gateway entry has no listener on its port"
			}
			continue
		}
		held := map[string]*consulapi.InlineCertificateConfigEntry{}
		for _, ref := range entry.Listeners[j].TLS.Certificates {
			e, _, err := c.consul.ConfigEntries().Get(consulapi.InlineCertificate, ref.Name, nil)
			if err != nil {
				continue
			}
			if cert, ok := e.(*consulapi.InlineCertificateConfigEntry); ok {
				owner := translate.OwnerOf(cert.Meta)
				held[owner.Namespace+"/"+owner.Name] = cert
			}
		}
		for k := range l.Certificates {
			cert, ok := held[l.Certificates[k].Secret]
			if !ok {
				l.Certificates[k].State = "not served: Consul's listener names no inline-certificate entry of this Secret"
				continue
			}
			l.Certificates[k] = certificateReport(l.Certificates[k].Secret, cert.Name, cert.Certificate, now)
		}
	}
}

// certificateReport reads the leaf certificate of certPEM, the public part of an
// inline-certificate entry. It is pure.
func certificateReport(secret, entry, certPEM string, now time.Time) CertificateReport {
	r := CertificateReport{Secret: secret, Entry: entry}
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil || block.Type != "CERTIFICATE" {
		r.State = "Consul's entry holds no PEM certificate"
		return r
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		r.State = "Consul's certificate does not parse: " + err.Error()
		return r
	}
	r.Subject, r.Issuer = cert.Subject.String(), cert.Issuer.String()
	r.SANs = append(r.SANs, cert.DNSNames...)
	for _, ip := range cert.IPAddresses {
		r.SANs = append(r.SANs, ip.String())
	}
	r.NotBefore, r.NotAfter = cert.NotBefore.UTC(), cert.NotAfter.UTC()
	switch {
	case now.After(cert.NotAfter):
		r.State = "expired"
	case now.Before(cert.NotBefore):
		r.State = "not yet valid"
	case cert.NotAfter.Sub(now) < expiringSoon:
		r.State = "expiring soon: in " + strings.TrimSuffix(cert.NotAfter.Sub(now).Round(time.Hour).String(), "0m0s")
	default:
		r.State = "valid"
	}
	return r
}

// gatewayIdentity names the ACL policy, role and binding rule the controller keeps
// for the Gateway, and whether Consul holds them; a note when the token may not read
// them.
func gatewayIdentity(c connections, namer identity.Namer, key cache.ObjectName, service string) (IdentityReport, string) {
	name := namer.Name(key)
	r := IdentityReport{Service: service, Policy: name + ": not read", Role: name + ": not read", BindingRule: "not read"}
	acl := c.consul.ACL()
	policy, _, err := acl.PolicyReadByName(name, nil)
	if err != nil {
		return r, "the Consul token may not read ACLs (acl:read), or ACLs are off: " + err.Error()
	}
	r.Policy = held(name, policy != nil)
	role, _, err := acl.RoleReadByName(name, nil)
	if err != nil {
		return r, "ACL roles not read: " + err.Error()
	}
	r.Role = held(name, role != nil)
	rules, _, err := acl.BindingRuleList("", nil)
	if err != nil {
		return r, "ACL binding rules not read: " + err.Error()
	}
	r.BindingRule = "missing: no binding rule binds the gateway pods' logins to the role"
	description := namer.Description(key)
	for _, b := range rules {
		if b.Description == description {
			r.BindingRule = fmt.Sprintf("%s (auth method %s, selector %s)", b.ID, b.AuthMethod, b.Selector)
		}
	}
	return r, ""
}

func held(name string, ok bool) string {
	if ok {
		return name
	}
	return name + ": missing in Consul (the controller keeps it only for Gateways whose pods it deploys with an ACL auth method)"
}

// gatewayIntentions says, for every service the routes bound to the gateway send to
// (as Consul holds the route entries, through each service's discovery chain),
// whether the gateway's service may reach it.
func gatewayIntentions(c connections, own translate.Ownership, gatewayService string) ([]IntentionReport, string) {
	destinations := map[intentions.Service]bool{}
	for _, kind := range []string{consulapi.HTTPRoute, consulapi.TCPRoute} {
		list, _, err := c.consul.ConfigEntries().List(kind, nil)
		if err != nil {
			return nil, "route entries not read: " + err.Error()
		}
		for _, e := range list {
			route, ok := intentions.RouteOf(e)
			if !ok || !own.Owns(e.GetMeta()) || !slices.ContainsFunc(route.Gateways, func(s intentions.Service) bool { return s.Name == gatewayService }) {
				continue
			}
			for _, s := range route.Services {
				for _, target := range chainTargets(c, s) {
					destinations[target] = true
				}
			}
		}
	}
	var out []IntentionReport
	for _, dest := range slices.SortedFunc(maps.Keys(destinations), func(a, b intentions.Service) int { return strings.Compare(a.String(), b.String()) }) {
		out = append(out, intentionReport(c, gatewayService, dest))
	}
	return out, ""
}

// chainTargets are the services s's compiled discovery chain sends to (a resolver's
// redirect, a splitter's services), as the intentions keeper reads them: those are
// what the gateway's connections reach. s itself when the chain cannot be read.
func chainTargets(c connections, s intentions.Service) []intentions.Service {
	resp, _, err := c.consul.DiscoveryChain().Get(s.Name, nil, &consulapi.QueryOptions{Namespace: s.Namespace, Partition: s.Partition})
	if err != nil || resp == nil || resp.Chain == nil || len(resp.Chain.Targets) == 0 {
		return []intentions.Service{s}
	}
	var out []intentions.Service
	for _, t := range resp.Chain.Targets {
		out = append(out, intentions.NewService(t.Service, t.Namespace, s.Partition))
	}
	return out
}

// intentionReport asks Consul whether gateway may reach dest, and names the source
// of dest's service-intentions entry that decides.
func intentionReport(c connections, gateway string, dest intentions.Service) IntentionReport {
	r := IntentionReport{Destination: dest.String()}
	allowed, _, err := c.consul.Connect().IntentionCheck(&consulapi.IntentionCheck{Source: gateway, Destination: dest.Name, SourceType: consulapi.IntentionSourceConsul}, nil)
	if err == nil {
		r.Allowed = &allowed
	}
	entry, _, getErr := c.consul.ConfigEntries().Get(consulapi.ServiceIntentions, dest.Name, nil)
	var current *consulapi.ServiceIntentionsConfigEntry
	if getErr == nil {
		current, _ = entry.(*consulapi.ServiceIntentionsConfigEntry)
	}
	r.Why = intentionWhy(current, gateway, r.Allowed)
	if err != nil {
		r.Why += " (Consul's intention check not read: " + err.Error() + ")"
	}
	return r
}

// intentionWhy says which source of dest's entry decides for gateway, or that none
// does and Consul's default applies. It is pure.
func intentionWhy(entry *consulapi.ServiceIntentionsConfigEntry, gateway string, allowed *bool) string {
	refused := allowed != nil && !*allowed
	if entry != nil {
		for _, name := range []string{gateway, "*"} {
			i := slices.IndexFunc(entry.Sources, func(s *consulapi.SourceIntention) bool { return s.Name == name && s.Peer == "" })
			if i < 0 {
				continue
			}
			src := entry.Sources[i]
			action := string(src.Action)
			if action == "" {
				action = fmt.Sprintf("%d L7 permissions", len(src.Permissions))
			}
			why := fmt.Sprintf("source %q of the service-intentions entry: %s", src.Name, action)
			if refused {
				why += "; the backend's sidecar refuses the gateway's requests (HTTP 403, RBAC: access denied)"
			}
			return why
		}
	}
	why := "missing: no service-intentions source names the gateway or *"
	if refused {
		why += ", and Consul's default refuses it (ACLs default deny): the backend's sidecar answers the gateway's requests HTTP 403 (RBAC: access denied)"
	}
	return why
}

// writeGatewayReport prints rep as text, or as yaml or json.
func writeGatewayReport(w io.Writer, rep GatewayReport, format string) error {
	if format != "" {
		return writeStructured(w, rep, format)
	}
	p := printer{w: w}
	p.line(0, "Gateway %s (class %s)", rep.Gateway, rep.Class)
	p.line(1, "conditions: %s", summarize(rep.Conditions, false))
	p.line(1, "addresses: %s", dash(strings.Join(rep.Addresses, ", ")))
	p.line(1, "Consul entry: %s", dash(rep.Entry))
	for _, n := range rep.Notes {
		p.line(1, "note: %s", n)
	}
	p.line(0, "")
	p.line(0, "Listeners:")
	for _, l := range rep.Listeners {
		p.listenerReport(l)
	}
	p.line(0, "")
	p.line(0, "Pods:")
	if len(rep.Pods) == 0 {
		p.line(1, "none listed")
	}
	for _, pod := range rep.Pods {
		state := "Ready"
		if !pod.Ready {
			state = "not Ready: " + pod.Problem
		}
		p.line(1, "%s (%s): %s", pod.Name, pod.Phase, state)
	}
	if rep.Identity != nil {
		p.line(0, "")
		p.line(0, "Identity (Consul service %s):", rep.Identity.Service)
		p.line(1, "policy: %s", rep.Identity.Policy)
		p.line(1, "role: %s", rep.Identity.Role)
		p.line(1, "binding rule: %s", rep.Identity.BindingRule)
	}
	if rep.Entry != "" {
		p.line(0, "")
		p.line(0, "Intentions (the gateway's service to each backend its routes send to):")
		if len(rep.Intentions) == 0 {
			p.line(1, "no route entry bound to the gateway sends anywhere")
		}
		for _, in := range rep.Intentions {
			verdict := "unknown"
			if in.Allowed != nil && *in.Allowed {
				verdict = "allowed"
			} else if in.Allowed != nil {
				verdict = "DENIED"
			}
			p.line(1, "%s: %s: %s", in.Destination, verdict, in.Why)
		}
	}
	return p.err
}

func (p *printer) listenerReport(l ListenerReport) {
	host := ""
	if l.Hostname != "" {
		host = ", hostname " + l.Hostname
	}
	p.line(1, "%s: %s port %d%s, %d attached route(s)", l.Name, l.Protocol, l.Port, host, l.AttachedRoutes)
	p.line(2, "conditions: %s", summarize(l.Conditions, false))
	for _, r := range l.Routes {
		p.line(2, "route: %s", r)
	}
	for _, c := range l.Certificates {
		p.line(2, "certificate from Secret %s: %s", c.Secret, c.State)
		if c.Subject == "" {
			continue
		}
		p.line(3, "Consul entry %s: subject %q, issuer %q", c.Entry, c.Subject, c.Issuer)
		p.line(3, "SANs: %s", dash(strings.Join(c.SANs, ", ")))
		p.line(3, "valid %s to %s", c.NotBefore.Format(time.RFC3339), c.NotAfter.Format(time.RFC3339))
	}
}
