// Package cli holds the subcommands of the one binary besides the controller itself:
// translate, which runs the controller's decisions and translation on objects read
// from files, with no cluster and no Consul.
package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/gateway-api/pkg/consts"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/manifests"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// translateUsage heads the translate command's help.
const translateUsage = `Usage: consul-gateway-controller translate [-f FILE]... [-o yaml|json] [flags]

Reads GatewayClasses, Gateways, ListenerSets, routes, ReferenceGrants, Namespaces,
Services, Secrets and GatewayConfigs (multi-document YAML or JSON; "-" or no -f reads
stdin), judges them as the controller's status workers would, and prints the status
each object of this controller would get and the Consul config entries it would
write, as the controller encodes them for Consul 1.15. No cluster and no Consul are
contacted: Programmed waits for Consul's verdict, and Gateways are judged as by a
controller that does not deploy gateway pods. The private keys of inline-certificate
entries are printed as REDACTED unless --show-secrets is given.

Each Gateway API object and GatewayConfig is first validated as the API server
validates it (its CRD's schema, defaults and CEL rules, unknown fields refused): an
object the API server would refuse is left out and listed under "refused" with the
API server's message, the rest is translated, and the exit code is 1.

Flags:
`

// Translate runs the translate command with args (after the word translate) and
// returns its exit code: 0; 1 when the input cannot be read (nothing is printed) or
// the API server would refuse an object of it (the rest is printed); 2 for bad flags.
func Translate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("translate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	files := fs.StringArrayP("filename", "f", nil, `file or directory of objects to read, repeatable; "-" is stdin (the default)`)
	output := fs.StringP("output", "o", "yaml", "output format: yaml or json")
	controller := fs.String("controller-name", string(gwsync.DefaultControllerName), "the GatewayClass controllerName judged as this controller's")
	clusterID := fs.String("cluster-id", "local", "the cluster id recorded in the entries' ownership meta")
	var naming translate.Naming
	var opts translate.Options
	fs.StringVar(&naming.Prefix, "consul-entry-prefix", "", "prefix of every Consul config entry name")
	fs.StringVar(&naming.Partition, "consul-partition", "", "Consul Enterprise admin partition of every entry")
	fs.StringVar(&naming.DestinationNamespace, "consul-destination-namespace", "", "Consul Enterprise namespace of every entry")
	fs.BoolVar(&naming.MirrorNamespaces, "consul-mirror-namespaces", false, "put entries into the Consul namespace named like their Kubernetes namespace")
	fs.StringVar(&naming.MirrorPrefix, "consul-mirror-namespaces-prefix", "", "prefix of mirrored Consul namespaces")
	fs.BoolVar(&opts.ManageServiceDefaults, "manage-service-defaults", false, "write service-defaults with protocol http for HTTP backends")
	var responderService string
	options.AddResponderFlag(fs, &responderService)
	showSecrets := fs.Bool("show-secrets", false, "print the private keys of inline-certificate entries; without it they are replaced by "+redactedPrivateKey)
	fs.Usage = func() {
		fmt.Fprint(stderr, translateUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "translate: %v\n", err)
		return 2
	}
	if *output != "yaml" && *output != "json" {
		fmt.Fprintf(stderr, "translate: -o %s: want yaml or json\n", *output)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "translate: unexpected arguments %v; name files with -f\n", fs.Args())
		return 2
	}
	if len(*files) == 0 {
		*files = []string{"-"}
	}
	objects, refused, err := readObjects(*files, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "translate: %v\n", err)
		return 1
	}
	opts.Responder = naming.Responder(responderService)
	result, err := translateObjects(objects, translation{
		ownership:   translate.Ownership{Controller: *controller, ClusterID: *clusterID},
		naming:      naming,
		options:     opts,
		showSecrets: *showSecrets,
	})
	if err != nil {
		fmt.Fprintf(stderr, "translate: %v\n", err)
		return 1
	}
	result.Refused = refused
	if err := writeResult(stdout, result, *output); err != nil {
		fmt.Fprintf(stderr, "translate: %v\n", err)
		return 1
	}
	// As kubectl apply of a file of several objects: the others are judged and
	// printed, each refusal is told, and the exit status says there was one.
	for _, r := range refused {
		fmt.Fprintf(stderr, "translate: %s: refused as the API server refuses it: %s\n", r.Source, r.Message)
	}
	if len(refused) > 0 {
		return 1
	}
	return 0
}

// translation is what translateObjects judges and translates with.
type translation struct {
	ownership translate.Ownership // its Controller is the controllerName judged as ours
	naming    translate.Naming
	options   translate.Options
	// showSecrets prints the private keys of inline-certificate entries as written;
	// without it they are redacted, so that output pasted into an issue or a log
	// does not carry a Gateway's key.
	showSecrets bool
}

// redactedPrivateKey stands for an inline-certificate's private key in translate's
// output without --show-secrets.
const redactedPrivateKey = "REDACTED"

// Result is the translate command's output.
type Result struct {
	// Objects are this controller's objects with the status it would write, in the
	// order GatewayClasses, Gateways, ListenerSets, routes; each by namespace and name.
	Objects []ObjectStatus `json:"objects"`
	// Entries are the Consul config entries it would write, as written (the encoding
	// Consul 1.15 accepts), by kind and name.
	Entries []json.RawMessage `json:"entries"`
	// Problems are what the translation could not express; the controller reports each
	// in its object's status once the entries are written.
	Problems []translate.Problem `json:"problems,omitempty"`
	// Refused are the objects the API server would refuse (their CRD's schema or CEL
	// rules): never judged, no entry written, as in a cluster where they do not exist.
	Refused []Refusal `json:"refused,omitempty"`
}

// Refusal is one object the API server would refuse, and why.
type Refusal struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Source is where it was read: the file (<stdin>) and the document.
	Source string `json:"source"`
	// Message is the API server's answer, naming each field and rule.
	Message string `json:"message"`
}

// ObjectStatus is one object's computed status.
type ObjectStatus struct {
	Kind      gatewayv1.Kind `json:"kind"`
	Namespace string         `json:"namespace,omitempty"`
	Name      string         `json:"name"`
	// Withheld says the object is kept from Consul whatever its status (see its
	// conditions).
	Withheld bool `json:"withheld,omitempty"`
	Status   any  `json:"status"`
}

// translateObjects judges objects and translates what the status workers would
// confirm, as the controller does.
func translateObjects(objects []runtime.Object, t translation) (Result, error) {
	confirmations, err := judgeOffline(gwsync.OfflineConfig{
		ControllerName: gatewayv1.GatewayController(t.ownership.Controller),
		Capabilities:   consullimits.Consul115.WithResponder(t.options.Responder.Name),
		// The Gateway API release this binary is built with stands for the bundle
		// version of a cluster's CRDs.
		BundleVersion:     consts.BundleVersion,
		Now:               time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		SharedConsulNames: !t.naming.MirrorNamespaces,
	}, objects)
	if err != nil {
		return Result{}, err
	}
	snap := translate.NewSnapshot()
	var result Result
	for _, c := range confirmations {
		result.Objects = append(result.Objects, objectStatus(c, objects))
		addConfirmed(snap, c)
	}
	for _, obj := range objects {
		switch o := obj.(type) {
		case *corev1.Secret:
			snap.Secrets[cache.MetaObjectToName(o)] = o
		}
	}
	desired := translate.Translate(snap, t.naming, t.ownership, t.options)
	keys := make([]translate.EntryKey, 0, len(desired.Entries))
	for key := range desired.Entries {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b translate.EntryKey) int {
		return strings.Compare(a.Kind+"/"+a.Partition+"/"+a.Namespace+"/"+a.Name, b.Kind+"/"+b.Partition+"/"+b.Namespace+"/"+b.Name)
	})
	for _, key := range keys {
		entry := desired.Entries[key]
		if !t.showSecrets {
			entry = redactSecrets(entry)
		}
		raw, err := json.Marshal(consul.Compact(entry))
		if err != nil {
			return Result{}, fmt.Errorf("encode %s %s: %w", key.Kind, key.Name, err)
		}
		result.Entries = append(result.Entries, raw)
	}
	result.Problems = desired.Problems
	return result, nil
}

// redactSecrets is entry with its private key replaced by redactedPrivateKey; the
// entry itself is left as it is.
func redactSecrets(entry consulapi.ConfigEntry) consulapi.ConfigEntry {
	cert, ok := entry.(*consulapi.InlineCertificateConfigEntry)
	if !ok || cert.PrivateKey == "" {
		return entry
	}
	redacted := *cert
	redacted.PrivateKey = redactedPrivateKey
	return &redacted
}

// addConfirmed puts a confirmed object into the snapshot as the Consul syncer holds it.
func addConfirmed(snap translate.Snapshot, c contract.Confirmation) {
	switch o := c.Object.(type) {
	case *gatewayv1.Gateway:
		snap.Gateways[c.Key] = o
	case *gatewayv1.ListenerSet:
		snap.ListenerSets[c.Key] = o
	case gatewayapi.Object:
		if translate.TranslatesRoutes(c.Kind) && c.Route != nil {
			snap.Routes[c.Kind][c.Key] = translate.ConfirmedRoute{Route: o, Decision: *c.Route}
		}
	}
}

// objectStatus is c's object and status; a withheld object's status is read from the
// judged copy the confirmation no longer carries.
func objectStatus(c contract.Confirmation, objects []runtime.Object) ObjectStatus {
	s := ObjectStatus{Kind: c.Kind, Namespace: c.Key.Namespace, Name: c.Key.Name, Withheld: c.Object == nil}
	switch o := c.Object.(type) {
	case *gatewayv1.GatewayClass:
		s.Status = o.Status
	case *gatewayv1.Gateway:
		s.Status = o.Status
	case *gatewayv1.ListenerSet:
		s.Status = o.Status
	case runtime.Object:
		if kind, ok := gatewayapi.RouteOf(o); ok {
			s.Status = map[string]any{"parents": kind.Parents(o)}
		}
	}
	return s
}

func writeResult(w io.Writer, r Result, format string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	}
	_, err = w.Write(append(bytes.TrimRight(data, "\n"), '\n'))
	return err
}

// decoder decodes the kinds translate reads, strictly: an unknown field is an error.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(gatewayv1.Install(scheme))
	utilruntime.Must(gatewayv1beta1.Install(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// readObjects reads every document of files ("-" is stdin), naming the file and
// document of anything it cannot read, and sets apart the objects the API server
// would refuse: one refused object refuses itself, not the input.
func readObjects(files []string, stdin io.Reader) ([]runtime.Object, []Refusal, error) {
	var objects []runtime.Object
	var refused []Refusal
	files, err := expandDirectories(files)
	if err != nil {
		return nil, nil, err
	}
	for _, file := range files {
		data, err := readFile(file, stdin)
		if err != nil {
			return nil, nil, err
		}
		name := file
		if file == "-" {
			name = "<stdin>"
		}
		docs, err := documents(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		for i, doc := range docs {
			source := fmt.Sprintf("%s, document %d", name, i+1)
			obj, err := decodeObject(doc)
			var refusal *refusedError
			switch {
			case errors.As(err, &refusal):
				refused = append(refused, Refusal{Kind: refusal.gvk.Kind, Namespace: refusal.namespace, Name: refusal.name, Source: source, Message: refusal.Error()})
			case err != nil:
				return nil, nil, fmt.Errorf("%s: %w", source, err)
			default:
				objects = append(objects, obj)
			}
		}
	}
	return objects, refused, nil
}

// expandDirectories replaces each directory of files by its .yaml, .yml and .json
// files, in name order, as kubectl -f does.
func expandDirectories(files []string) ([]string, error) {
	var out []string
	for _, file := range files {
		info, err := os.Stat(file)
		if file == "-" || err != nil || !info.IsDir() {
			out = append(out, file) // a missing file is reported when it is read
			continue
		}
		entries, err := os.ReadDir(file)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				out = append(out, filepath.Join(file, e.Name()))
			}
		}
	}
	return out, nil
}

func readFile(file string, stdin io.Reader) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(file)
}

// documents splits a YAML or JSON stream into its documents, and a List into its
// items.
func documents(data []byte) ([][]byte, error) {
	all, err := manifests.Documents(data)
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	for _, doc := range all {
		var probe struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return nil, err
		}
		if probe.Kind != "List" {
			docs = append(docs, doc)
			continue
		}
		for _, item := range probe.Items { // kubectl get -o yaml of several objects
			docs = append(docs, item)
		}
	}
	return docs, nil
}

// decodeObject decodes one document into its typed object, a v1beta1 Gateway API
// object as its v1 twin (the same type under another name), without TypeMeta, as an
// informer's cache holds it. A custom resource is first admitted as the API server
// admits it (admit): a refused one is a *refusedError, and the others are read with
// their CRD's defaults, as the controller reads them from the API server.
func decodeObject(doc []byte) (runtime.Object, error) {
	doc, err := admit(doc)
	if err != nil {
		return nil, err
	}
	obj, gvk, err := decoder.Decode(doc, nil, nil)
	if err != nil {
		return nil, err
	}
	switch o := obj.(type) {
	case *gatewayv1beta1.ReferenceGrant:
		obj = (*gatewayv1.ReferenceGrant)(o)
	case *gatewayv1beta1.Gateway:
		obj = (*gatewayv1.Gateway)(o)
	case *gatewayv1beta1.GatewayClass:
		obj = (*gatewayv1.GatewayClass)(o)
	case *gatewayv1beta1.HTTPRoute:
		obj = (*gatewayv1.HTTPRoute)(o)
	case *corev1.Namespace, *corev1.Service, *corev1.Secret, *v1alpha1.GatewayConfig,
		*gatewayv1.GatewayClass, *gatewayv1.Gateway, *gatewayv1.ListenerSet, *gatewayv1.ReferenceGrant:
	default:
		if _, ok := gatewayapi.RouteOf(obj); !ok {
			return nil, fmt.Errorf("%s is not a kind translate reads", gvk.Kind)
		}
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if m.GetName() == "" {
		return nil, fmt.Errorf("%s without metadata.name", gvk.Kind)
	}
	if m.GetNamespace() == "" && !clusterScoped(gvk) {
		m.SetNamespace("default")
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return obj, nil
}

func clusterScoped(gvk *schema.GroupVersionKind) bool {
	return gvk.Kind == "GatewayClass" || gvk.Kind == "Namespace"
}
