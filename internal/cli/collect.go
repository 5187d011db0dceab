package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

const collectUsage = `Usage: consul-gateway-controller collect --out DIR|FILE.tar.gz|- [-A | -n NAMESPACE] [flags]

Writes a support bundle: a directory, or a gzipped tar (a name ending in .tar.gz, or
"-" for stdout, as from kubectl exec). It holds:

  status.yaml               what status -o yaml says (ConsulError when Consul was not read)
  versions.yaml             this binary's build, Kubernetes', Consul's, the controller pods' images and build_info
  kubernetes/<kind>.yaml    the objects of this controller's classes, with their status
  kubernetes/events/<namespace>.yaml   the Events of those namespaces and the controller's
  logs/<namespace>/<pod>/<container>.log   the controller replicas' and the gateway pods' logs
  metrics/<namespace>/<pod>.txt        the controller replicas' /metrics, through the API server
  consul/entries.json       the Consul config entries of this controller and the intentions naming its gateways, private keys redacted
  consul/gateway-instances.json        the gateways' instances in Consul's catalog
  consul/acl.json           the gateways' ACL identities: names, descriptions, selectors; no token secret
  errors.txt                what could not be read, and why

Nothing is written to the cluster or to Consul. What cannot be read (a log the node
does not serve, a grant the caller lacks, Consul down) is recorded in errors.txt, not
fatal. Private keys (PEM blocks), the Consul token and the Kubernetes bearer token in
use are replaced by REDACTED in every file; ACL tokens are listed by accessor only.

Exit codes: 0, also when parts are recorded in errors.txt; 1 when the bundle cannot
be written or the cluster's objects cannot be listed; 2 for bad flags.

Flags:
`

// redacted replaces what a bundle must not hold.
const redacted = "REDACTED"

// collectFlags are collect's own settings.
type collectFlags struct {
	out                                 string
	controllerNamespace, controllerPods string
	logLines                            int64
	podLogs                             bool
	// build is the version line of the binary that collects (not a flag).
	build string
	statusFlags
}

// Collect runs the collect command and returns its exit code (see collectUsage). build
// is the collecting binary's version line, which the bundle records.
func Collect(ctx context.Context, build string, args []string, stdout, stderr io.Writer) int {
	f := collectFlags{build: build}
	fs := readerFlags("collect", stderr, &f.statusFlags)
	addNamespaceFlags(fs, &f.statusFlags)
	fs.StringVar(&f.out, "out", "", `where to write the bundle: a directory (created), a file ending in .tar.gz, or "-" (a .tar.gz on stdout)`)
	fs.StringVar(&f.controllerNamespace, "controller-namespace", "consul-gateway-controller", "namespace of the controller's pods")
	fs.StringVar(&f.controllerPods, "controller-selector", "app.kubernetes.io/name=consul-gateway-controller", "label selector of the controller's pods")
	fs.Int64Var(&f.logLines, "log-lines", 2000, "how many of the last lines of each container's log to keep")
	fs.BoolVar(&f.podLogs, "pod-logs", true, "read the pods' logs (the API server asks each pod's node for them); false records that they were not read")
	fs.Usage = func() {
		fmt.Fprint(stderr, collectUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "collect: %v\n", err)
		return 2
	}
	if f.out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "collect: want --out DIR, --out FILE.tar.gz or --out - and no arguments")
		return 2
	}
	b, err := openBundle(f.out, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "collect: %v\n", err)
		return 1
	}
	err = collect(ctx, &f, b)
	if cerr := b.close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(stderr, "collect: %v\n", err)
		return 1
	}
	if f.out != "-" {
		fmt.Fprintf(stderr, "collect: wrote %s (%d problems recorded in errors.txt)\n", f.out, b.problems)
	}
	return 0
}

// collector gathers one bundle.
type collector struct {
	f *collectFlags
	c connections
	b *bundle
}

func collect(ctx context.Context, f *collectFlags, b *bundle) error {
	c, err := connect(ctx, &f.statusFlags)
	if err != nil {
		return err
	}
	for _, secret := range credentials(f.statusFlags) {
		b.redact.addSecret(secret)
	}
	col := collector{f: f, c: c, b: b}
	rep, err := gatherStatusWith(ctx, c, &f.statusFlags)
	if err != nil {
		return err
	}
	if err := b.addYAML("status.yaml", rep); err != nil {
		return err
	}
	if rep.ConsulError != "" {
		b.record("consul", errors.New(rep.ConsulError))
	}
	steps := []func(context.Context, StatusReport) error{col.objects, col.events, col.pods, col.consulEntries, col.consulInstances, col.consulIdentities, col.versions}
	for _, step := range steps {
		if err := step(ctx, rep); err != nil {
			return err
		}
	}
	return b.addErrors()
}

// credentials are the Consul token and the Kubernetes bearer token the command
// uses, so that no file of the bundle holds them.
func credentials(f statusFlags) []string {
	var out []string
	consulConfig := f.consul.Config()
	out = append(out, consulConfig.Token)
	if data, err := os.ReadFile(consulConfig.TokenFile); consulConfig.TokenFile != "" && err == nil {
		out = append(out, string(data))
	}
	if kube, err := kubeConfig(f.kubeconfig); err == nil {
		out = append(out, kube.BearerToken)
		if data, err := os.ReadFile(kube.BearerTokenFile); kube.BearerTokenFile != "" && err == nil {
			out = append(out, string(data))
		}
	}
	return out
}

// ours is the set of objects a status report lists, by kind.
func ours(rep StatusReport) map[gatewayv1.Kind]sets.Set[cache.ObjectName] {
	out := map[gatewayv1.Kind]sets.Set[cache.ObjectName]{}
	for _, o := range rep.Objects {
		if out[o.Kind] == nil {
			out[o.Kind] = sets.New[cache.ObjectName]()
		}
		out[o.Kind].Insert(cache.ObjectName{Namespace: o.Namespace, Name: o.Name})
	}
	return out
}

// objects writes the objects status lists, whole, with their status.
func (col collector) objects(ctx context.Context, rep StatusReport) error {
	mine := ours(rep)
	namespace := col.namespace()
	v1 := col.c.gateway.GatewayV1()
	lists := []struct {
		kind gatewayv1.Kind
		file string
		list func() (runtime.Object, error)
	}{
		{gatewayapi.GatewayClassKind, "gatewayclasses", func() (runtime.Object, error) { return v1.GatewayClasses().List(ctx, metav1.ListOptions{}) }},
		{gatewayapi.GatewayKind, "gateways", func() (runtime.Object, error) { return v1.Gateways(namespace).List(ctx, metav1.ListOptions{}) }},
		{gatewayapi.ListenerSetKind, "listenersets", func() (runtime.Object, error) { return v1.ListenerSets(namespace).List(ctx, metav1.ListOptions{}) }},
		{gatewayapi.HTTPRouteKind, "httproutes", func() (runtime.Object, error) { return v1.HTTPRoutes(namespace).List(ctx, metav1.ListOptions{}) }},
		{gatewayapi.TCPRouteKind, "tcproutes", func() (runtime.Object, error) { return v1.TCPRoutes(namespace).List(ctx, metav1.ListOptions{}) }},
		{gatewayapi.GRPCRouteKind, "grpcroutes", func() (runtime.Object, error) { return v1.GRPCRoutes(namespace).List(ctx, metav1.ListOptions{}) }},
		{gatewayapi.TLSRouteKind, "tlsroutes", func() (runtime.Object, error) { return v1.TLSRoutes(namespace).List(ctx, metav1.ListOptions{}) }},
		{gatewayapi.UDPRouteKind, "udproutes", func() (runtime.Object, error) { return v1.UDPRoutes(namespace).List(ctx, metav1.ListOptions{}) }},
	}
	for _, l := range lists {
		list, err := l.list()
		if err != nil {
			col.b.record("list "+string(l.kind)+"s", err)
			continue
		}
		items, err := metaItems(list)
		if err != nil {
			return err
		}
		var keep []any
		for _, item := range items {
			if mine[l.kind].Has(cache.MetaObjectToName(item)) {
				item.SetManagedFields(nil)
				keep = append(keep, item)
			}
		}
		if err := col.b.addYAML(path.Join("kubernetes", l.file+".yaml"), keep); err != nil {
			return err
		}
	}
	return nil
}

// metaItems are the items of a typed list.
func metaItems(list runtime.Object) ([]metav1.Object, error) {
	objects, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, 0, len(objects))
	for _, o := range objects {
		item, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, nil
}

// namespace is the namespace the command lists in ("" for all).
func (col collector) namespace() string {
	if col.f.allNamespaces {
		return metav1.NamespaceAll
	}
	return col.f.namespace
}

// namespaces are the namespaces of the objects status lists, and the controller's.
func (col collector) namespaces(rep StatusReport) []string {
	ns := sets.New(col.f.controllerNamespace)
	for _, o := range rep.Objects {
		if o.Namespace != "" {
			ns.Insert(o.Namespace)
		}
	}
	return sets.List(ns)
}

// events writes the Events of the namespaces of our objects and of the controller.
func (col collector) events(ctx context.Context, rep StatusReport) error {
	for _, ns := range col.namespaces(rep) {
		list, err := col.c.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			col.b.record("list the Events of namespace "+ns, err)
			continue
		}
		for i := range list.Items {
			list.Items[i].ManagedFields = nil
		}
		if err := col.b.addYAML(path.Join("kubernetes", "events", ns+".yaml"), list.Items); err != nil {
			return err
		}
	}
	return nil
}

// pods writes the logs of the controller replicas and of our Gateways' pods, and the
// replicas' /metrics.
func (col collector) pods(ctx context.Context, rep StatusReport) error {
	controllers, err := col.c.kube.CoreV1().Pods(col.f.controllerNamespace).List(ctx, metav1.ListOptions{LabelSelector: col.f.controllerPods})
	if err != nil {
		col.b.record("list the controller's pods", err)
	} else {
		if len(controllers.Items) == 0 {
			col.b.record("the controller's pods", fmt.Errorf("none in namespace %s with labels %s (--controller-namespace, --controller-selector)", col.f.controllerNamespace, col.f.controllerPods))
		}
		for i := range controllers.Items {
			if err := col.podLogs(ctx, &controllers.Items[i]); err != nil {
				return err
			}
			if err := col.metrics(ctx, &controllers.Items[i]); err != nil {
				return err
			}
		}
	}
	for gw := range ours(rep)[gatewayapi.GatewayKind] {
		selector := dataplane.GatewayNameLabel + "=" + gw.Name + "," + dataplane.ManagedByLabel + "=" + dataplane.ManagedByValue
		list, err := col.c.kube.CoreV1().Pods(gw.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			col.b.record("list the pods of Gateway "+gw.String(), err)
			continue
		}
		for i := range list.Items {
			if err := col.podLogs(ctx, &list.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// podLogs writes the last lines of each container's log of pod, read through the API
// server (pods/log), which asks the kubelet of the pod's node for them.
func (col collector) podLogs(ctx context.Context, pod *corev1.Pod) error {
	for _, container := range pod.Spec.Containers {
		name := path.Join("logs", pod.Namespace, pod.Name, container.Name+".log")
		if !col.f.podLogs {
			col.b.record(name, errors.New("not read (--pod-logs=false)"))
			continue
		}
		data, err := col.c.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container.Name, TailLines: &col.f.logLines}).DoRaw(ctx)
		if err != nil {
			col.b.record(name, withBody(err, data))
			continue
		}
		if err := col.b.add(name, data); err != nil {
			return err
		}
	}
	return nil
}

// metrics writes a controller replica's /metrics, through the API server's pod
// proxy: never to the pod's address. A replica serving /metrics only to scrapers it
// authorizes (--metrics-auth=kubernetes) refuses the proxied request, which carries
// no token; that is recorded.
func (col collector) metrics(ctx context.Context, pod *corev1.Pod) error {
	name := path.Join("metrics", pod.Namespace, pod.Name+".txt")
	port := containerPort(pod, "metrics")
	if port == "" {
		col.b.record(name, errors.New("the pod has no container port named metrics"))
		return nil
	}
	data, err := col.c.kube.CoreV1().Pods(pod.Namespace).ProxyGet("", pod.Name, port, "metrics", nil).DoRaw(ctx)
	if err != nil {
		col.b.record(name, withBody(err, data))
		return nil
	}
	return col.b.add(name, data)
}

// withBody is err in the API server's words when its answer's body has them (a
// Status with a message): client-go says "unknown" for a refused log or proxy
// request.
func withBody(err error, body []byte) error {
	const most = 300
	var status metav1.Status
	if json.Unmarshal(body, &status) == nil && status.Message != "" {
		return errors.New(status.Message)
	}
	text := strings.TrimSpace(string(body))
	if text == "" || strings.Contains(err.Error(), text) {
		return err
	}
	if len(text) > most {
		text = text[:most] + "..."
	}
	return fmt.Errorf("%w: %s", err, text)
}

// containerPort is the number of pod's container port called name, "" without one.
func containerPort(pod *corev1.Pod, name string) string {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return strconv.Itoa(int(p.ContainerPort))
			}
		}
	}
	return ""
}

// entryKinds are the kinds of the entries the controller writes.
var entryKinds = []string{consulapi.APIGateway, consulapi.HTTPRoute, consulapi.TCPRoute, consulapi.InlineCertificate, consulapi.ServiceDefaults, consulapi.ServiceIntentions}

// consulEntries writes the entries of this controller and cluster, and the
// service-intentions entries of others that name one of its gateways as a source (the
// controller adds its sources to an existing entry), private keys redacted.
func (col collector) consulEntries(ctx context.Context, rep StatusReport) error {
	own := translate.Ownership{Controller: col.f.controller, ClusterID: col.f.clusterID}
	gateways := sets.New[string]()
	for _, o := range rep.Objects {
		for _, e := range o.Entries {
			if e.Kind == consulapi.APIGateway {
				gateways.Insert(e.Name)
			}
		}
	}
	ours := func(e consulapi.ConfigEntry) bool {
		if own.Owns(e.GetMeta()) {
			return true
		}
		intentions, ok := e.(*consulapi.ServiceIntentionsConfigEntry)
		return ok && slices.ContainsFunc(intentions.Sources, func(s *consulapi.SourceIntention) bool { return gateways.Has(s.Name) })
	}
	var out []consulapi.ConfigEntry
	r := col.c.reader
	for _, kind := range entryKinds {
		err := r.do(ctx, func(ctx context.Context) error {
			list, _, err := r.client.ConfigEntries().List(kind, r.entriesQuery(ctx))
			for _, e := range list {
				if ours(e) {
					out = append(out, redactSecrets(e))
				}
			}
			return err
		})
		if err != nil {
			col.b.record("consul/entries.json", err)
			return nil
		}
	}
	return col.b.addJSON("consul/entries.json", out)
}

// gatewayInstance is a gateway's instance in Consul's catalog.
type gatewayInstance struct {
	Service, ID, Node, Address, Health string
	Meta                               map[string]string `json:",omitempty"`
}

// consulInstances writes the catalog instances of our Gateways' Consul services.
func (col collector) consulInstances(ctx context.Context, rep StatusReport) error {
	r := col.c.reader
	var out []gatewayInstance
	for _, o := range rep.Objects {
		for _, e := range o.Entries {
			if e.Kind != consulapi.APIGateway {
				continue
			}
			err := r.do(ctx, func(ctx context.Context) error {
				list, _, err := r.client.Health().Service(e.Name, "", false, serviceQuery(r.naming, o.Namespace).WithContext(ctx))
				for _, s := range list {
					out = append(out, gatewayInstance{Service: s.Service.Service, ID: s.Service.ID, Node: s.Node.Node, Address: s.Service.Address,
						Health: s.Checks.AggregatedStatus(), Meta: s.Service.Meta})
				}
				return err
			})
			if err != nil {
				col.b.record("consul/gateway-instances.json", err)
				return nil
			}
		}
	}
	return col.b.addJSON("consul/gateway-instances.json", out)
}

// aclIdentities are the gateways' ACL objects, by name: never a token's secret.
type aclIdentities struct {
	Policies     []aclObject       `json:"policies"`
	Roles        []aclObject       `json:"roles"`
	BindingRules []aclBindingRule  `json:"bindingRules"`
	Tokens       []aclTokenSummary `json:"tokens"`
}

type aclObject struct{ Name, Description string }

type aclBindingRule struct{ AuthMethod, BindType, BindName, Selector, Description string }

// aclTokenSummary is a login token of a gateway pod: its accessor, never its secret.
type aclTokenSummary struct {
	AccessorID, Description, AuthMethod string
	Roles                               []string
}

// consulIdentities writes the ACL policies, roles and binding rules of this
// controller's Gateways, and the tokens that hold those roles, without secrets.
func (col collector) consulIdentities(ctx context.Context, _ StatusReport) error {
	namer := identity.Namer{Ownership: translate.Ownership{Controller: col.f.controller, ClusterID: col.f.clusterID}}
	ourDescription := func(d string) bool { _, ok := namer.OwnerOf(d); return ok }
	var out aclIdentities
	roles := sets.New[string]()
	r := col.c.reader
	acl := r.client.ACL()
	// acl:read is a grant of its own: a token without it may read the rest.
	err := r.try(ctx, func(ctx context.Context) error {
		q := (&consulapi.QueryOptions{Partition: r.naming.Partition}).WithContext(ctx)
		policies, _, err := acl.PolicyList(q)
		if err != nil {
			return fmt.Errorf("list ACL policies: %w", err)
		}
		for _, p := range policies {
			if ourDescription(p.Description) {
				out.Policies = append(out.Policies, aclObject{p.Name, p.Description})
			}
		}
		roleList, _, err := acl.RoleList(q)
		if err != nil {
			return fmt.Errorf("list ACL roles: %w", err)
		}
		for _, role := range roleList {
			if ourDescription(role.Description) {
				out.Roles = append(out.Roles, aclObject{role.Name, role.Description})
				roles.Insert(role.Name)
			}
		}
		rules, _, err := acl.BindingRuleList("", q)
		if err != nil {
			return fmt.Errorf("list ACL binding rules: %w", err)
		}
		for _, b := range rules {
			if ourDescription(b.Description) {
				out.BindingRules = append(out.BindingRules, aclBindingRule{b.AuthMethod, string(b.BindType), b.BindName, b.Selector, b.Description})
			}
		}
		tokens, _, err := acl.TokenList(q)
		if err != nil {
			return fmt.Errorf("list ACL tokens: %w", err)
		}
		for _, t := range tokens {
			summary := aclTokenSummary{AccessorID: t.AccessorID, Description: t.Description, AuthMethod: t.AuthMethod}
			for _, link := range t.Roles {
				summary.Roles = append(summary.Roles, link.Name)
			}
			if slices.ContainsFunc(summary.Roles, roles.Has) {
				out.Tokens = append(out.Tokens, summary)
			}
		}
		return nil
	})
	if err != nil {
		// A token without acl:read reads none of it; the rest of the bundle stands.
		col.b.record("consul/acl.json", err)
		return nil
	}
	return col.b.addJSON("consul/acl.json", out)
}

// versions are the builds and servers a bundle was collected from.
type versions struct {
	Collect          string            `json:"collect"`
	Kubernetes       string            `json:"kubernetes,omitempty"`
	Consul           string            `json:"consul,omitempty"`
	ControllerImages map[string]string `json:"controllerImages,omitempty"`
	ControllerBuilds []string          `json:"controllerBuildInfo,omitempty"`
}

// buildInfoLine finds the build_info series in a replica's /metrics.
var buildInfoLine = regexp.MustCompile(`(?m)^consul_gateway_controller_build_info\{.*$`)

func (col collector) versions(ctx context.Context, _ StatusReport) error {
	v := versions{Collect: col.f.build, ControllerImages: map[string]string{}}
	if server, err := col.c.kube.Discovery().ServerVersion(); err != nil {
		col.b.record("the Kubernetes version", err)
	} else {
		v.Kubernetes = server.GitVersion
	}
	r := col.c.reader
	// agent:read is a grant of its own: a token without it may read the rest.
	err := r.try(ctx, func(ctx context.Context) error {
		var self map[string]map[string]any
		if _, err := r.client.Raw().Query("/v1/agent/self", &self, (&consulapi.QueryOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("read the Consul agent's version: %w", err)
		}
		v.Consul = fmt.Sprint(self["Config"]["Version"])
		return nil
	})
	if err != nil {
		col.b.record("the Consul version", err)
	}
	if pods, err := col.c.kube.CoreV1().Pods(col.f.controllerNamespace).List(ctx, metav1.ListOptions{LabelSelector: col.f.controllerPods}); err == nil {
		for _, p := range pods.Items {
			for _, c := range p.Spec.Containers {
				v.ControllerImages[p.Name+"/"+c.Name] = c.Image
			}
		}
	}
	for _, metrics := range col.b.files("metrics/") {
		v.ControllerBuilds = append(v.ControllerBuilds, buildInfoLine.FindAllString(string(metrics), -1)...)
	}
	return col.b.addYAML("versions.yaml", v)
}

// bundle is a directory or a gzipped tar being written, redacting each file.
type bundle struct {
	dir      string       // a directory bundle's root
	tar      *tar.Writer  // a tarball's
	gz       *gzip.Writer //
	file     io.Closer    // the tarball's file, nil for stdout
	redact   redactor     //
	errs     []string     // what could not be read
	written  map[string][]byte
	problems int
}

// openBundle creates the bundle out names.
func openBundle(out string, stdout io.Writer) (*bundle, error) {
	b := &bundle{written: map[string][]byte{}}
	switch {
	case out == "-":
		b.gz = gzip.NewWriter(stdout)
	case strings.HasSuffix(out, ".tar.gz") || strings.HasSuffix(out, ".tgz"):
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create the bundle: %w", err)
		}
		b.file, b.gz = f, gzip.NewWriter(f)
	default:
		if err := os.Mkdir(out, 0o700); err != nil {
			return nil, fmt.Errorf("create the bundle's directory: %w", err)
		}
		b.dir = out
		return b, nil
	}
	b.tar = tar.NewWriter(b.gz)
	return b, nil
}

// add writes the file name, redacted.
func (b *bundle) add(name string, data []byte) error {
	data = b.redact.apply(data)
	b.written[name] = data
	if b.dir != "" {
		file := filepath.Join(b.dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return err
		}
		return os.WriteFile(file, data, 0o600)
	}
	hdr := &tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: time.Now(), Typeflag: tar.TypeReg}
	if err := b.tar.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := b.tar.Write(data)
	return err
}

func (b *bundle) addYAML(name string, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return b.add(name, data)
}

func (b *bundle) addJSON(name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return b.add(name, append(data, '\n'))
}

// record notes what could not be read.
func (b *bundle) record(what string, err error) {
	b.problems++
	b.errs = append(b.errs, fmt.Sprintf("%s: %v", what, err))
}

func (b *bundle) addErrors() error {
	text := "none\n"
	if len(b.errs) > 0 {
		text = strings.Join(b.errs, "\n") + "\n"
	}
	return b.add("errors.txt", []byte(text))
}

// files are the contents of the files written so far under prefix.
func (b *bundle) files(prefix string) [][]byte {
	var out [][]byte
	for name, data := range b.written {
		if strings.HasPrefix(name, prefix) {
			out = append(out, data)
		}
	}
	return out
}

func (b *bundle) close() error {
	if b.tar == nil {
		return nil
	}
	err := errors.Join(b.tar.Close(), b.gz.Close())
	if b.file != nil {
		err = errors.Join(err, b.file.Close())
	}
	return err
}

// redactor replaces, in every file of a bundle, PEM private key blocks and the
// credentials the command itself holds.
type redactor struct{ secrets [][]byte }

// privateKeyBlock is a PEM private key, of any type (RSA, EC, PKCS #8).
var privateKeyBlock = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`)

func (r *redactor) addSecret(s string) {
	if s = strings.TrimSpace(s); s != "" {
		r.secrets = append(r.secrets, []byte(s))
	}
}

func (r redactor) apply(data []byte) []byte {
	data = privateKeyBlock.ReplaceAll(data, []byte(redacted))
	for _, s := range r.secrets {
		data = bytes.ReplaceAll(data, s, []byte(redacted))
	}
	return data
}
