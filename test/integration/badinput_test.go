package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The bad-input corpus: testdata/badinput/*.yaml, each a case of malformed or hostile
// objects with its expectations (see the README there). Every case gets a namespace
// with a valid neighbour Gateway and HTTPRoute; one controller judges them all.

const (
	badInputDir         = "testdata/badinput"
	badInputClass       = "badinput"
	badInputParallel    = 8
	badInputCaseTimeout = 2 * time.Minute
	neighbourHost       = "neighbour.example.com"
	// badInputCases is the number of case files in badInputDir. It is pinned here,
	// not counted from the directory, so that a case lost from the corpus (deleted,
	// renamed out of the *.yaml glob) fails the test instead of shrinking it: adding
	// or removing a case means changing this number too.
	badInputCases = 124
)

// badCase is one parsed case file.
type badCase struct {
	file    string
	ns      string
	expect  badExpectations
	objects []*unstructured.Unstructured
}

type badExpectations struct {
	Description string         `json:"description"`
	Objects     []objectExpect `json:"objects"`
	Consul      []entryExpect  `json:"consul"`
}

// objectExpect is what one object must come to: refused by the API server, or these
// conditions (Gateway and GatewayClass), per listener (Gateway, ListenerSet), per
// parent (routes).
type objectExpect struct {
	Kind           string              `json:"kind"`
	Namespace      string              `json:"namespace"`
	Name           string              `json:"name"`
	Refused        string              `json:"refused"`
	Conditions     []string            `json:"conditions"`
	Listeners      map[string][]string `json:"listeners"`
	AttachedRoutes map[string]int32    `json:"attachedRoutes"`
	Parents        []parentExpect      `json:"parents"`
	NoParents      bool                `json:"noParents"`
}

type parentExpect struct {
	Ref        parentRefExpect `json:"ref"`
	Conditions []string        `json:"conditions"`
}

type parentRefExpect struct {
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	SectionName string `json:"sectionName"`
	Port        int32  `json:"port"`
}

// entryExpect is a Consul entry of the object kind/name: absent, or present with these
// contents where given.
type entryExpect struct {
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Absent    bool      `json:"absent"`
	Hostnames *[]string `json:"hostnames"`
	Rules     *int      `json:"rules"`
	Parents   *int      `json:"parents"`
	Listeners *[]string `json:"listeners"`
}

// badInputEnv is what every case shares.
type badInputEnv struct {
	dyn        dynamic.Interface
	mapper     *restmapper.DeferredDiscoveryRESTMapper
	controller gatewayv1.GatewayController
	naming     translate.Naming
	// published is what the controller published, in order: the proof that it judged
	// an object whose expectations are only absences (checkJudged).
	published *confirmations
	// cleanup registers with the whole test, not the case.
	cleanup func(func())
}

func TestBadInputCorpus(t *testing.T) {
	cases := loadBadCases(t)
	if len(cases) != badInputCases {
		t.Fatalf("the corpus has %d cases, want %d (badInputCases): a case was lost, or one was added without counting it", len(cases), badInputCases)
	}
	b := newBadInputEnv(t)
	env.Create(t, testenv.GatewayClass(badInputClass, b.controller))
	// Registered before the controller, so it runs after the controller stopped: what
	// it wrote leaves Consul, which every later test in the package shares (Consul's
	// own gateway controller otherwise goes on reconciling hundreds of routes).
	t.Cleanup(func() { deleteOwnedEntries(t, string(b.controller), "bad") })
	b.published = startController(t, b.controller, controllerOptions{consul: &consulOptions{clusterID: "bad",
		translation: translate.Options{ManageServiceDefaults: true}}}).published

	// Namespaces and cluster-scoped objects outlive their case, for the last checks.
	b.cleanup = t.Cleanup
	for _, c := range cases {
		env.Create(t, testenv.Namespace(c.ns, nil))
	}

	start := time.Now()
	sem := make(chan struct{}, badInputParallel)
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(strings.TrimSuffix(c.file, ".yaml"), func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				b.run(t, c)
			})
		}
	})
	t.Logf("%d cases in %s", len(cases), time.Since(start).Round(time.Second))
	if t.Failed() {
		return
	}

	// Nothing flapped back: every case still holds once all are done.
	for _, c := range cases {
		if err := b.checkJudged(t.Context(), c); err != nil {
			t.Errorf("%s no longer holds: %v", c.file, err)
		}
	}
	b.stillProcesses(t, cases[0].ns)
}

func newBadInputEnv(t *testing.T) *badInputEnv {
	t.Helper()
	cfg := env.Kube.Config(testenv.AdminUser)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &badInputEnv{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
		controller: "test.example.com/" + badInputClass}
}

// loadBadCases reads every case file; the first document is its expectations. Every
// file of the directory but the README must be a case: one the loader would pass over
// (another extension, a directory) is an error, not a smaller corpus.
func loadBadCases(t *testing.T) []badCase {
	t.Helper()
	entries, err := os.ReadDir(badInputDir)
	if err != nil {
		t.Fatal(err)
	}
	var cases []badCase
	for _, e := range entries {
		if e.Name() == "README.md" {
			continue
		}
		f := filepath.Join(badInputDir, e.Name())
		if e.IsDir() || filepath.Ext(f) != ".yaml" {
			t.Fatalf("%s: not a case file (*.yaml)", f)
		}
		c, err := parseBadCase(f, fmt.Sprintf("bad-%03d", len(cases)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cases = append(cases, c)
	}
	return cases
}

func parseBadCase(path, ns string) (badCase, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return badCase{}, err
	}
	text := strings.NewReplacer("${NS}", ns, "${CLASS}", badInputClass).Replace(string(raw))
	c := badCase{file: filepath.Base(path), ns: ns}
	objects, err := decodeObjects(text)
	if err != nil {
		return c, err
	}
	for _, obj := range objects {
		if obj.GetKind() != "Expectations" {
			c.objects = append(c.objects, obj)
			continue
		}
		doc, err := yaml.Marshal(obj.Object)
		if err != nil {
			return c, err
		}
		if err := yaml.UnmarshalStrict(doc, &struct {
			Kind string `json:"kind"`
			*badExpectations
		}{badExpectations: &c.expect}); err != nil {
			return c, fmt.Errorf("expectations: %w", err)
		}
	}
	if len(c.objects) == 0 || len(c.expect.Objects)+len(c.expect.Consul) == 0 {
		return c, errors.New("a case needs objects and expectations")
	}
	return c, nil
}

// run creates the case's valid neighbour and its objects in its namespace, and waits
// for every expectation.
func (b *badInputEnv) run(t *testing.T, c badCase) {
	s := testenv.Stack{Namespace: c.ns, Class: badInputClass, Controller: b.controller, GatewayName: "neighbour", Backend: c.ns + "-echo"}
	env.Create(t, testenv.Service(s.Namespace, s.Backend, testenv.BackendPort))
	env.Create(t, s.Gateway(s.GatewayName, testenv.HTTPListener("http", 8080)))
	env.Create(t, s.Route("neighbour", neighbourHost))

	for _, obj := range c.objects {
		b.create(t, c, obj)
	}
	testenv.Eventually(t, badInputCaseTimeout, c.file+": "+c.expect.Description, func(context.Context) error {
		return b.checkJudged(t.Context(), c)
	})
}

// create applies one object of the case and checks the API server's answer.
func (b *badInputEnv) create(t *testing.T, c badCase, obj *unstructured.Unstructured) {
	t.Helper()
	want := c.expect.object(obj.GetKind(), obj.GetName())
	res, namespaced, err := b.resource(obj)
	if err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	var client dynamic.ResourceInterface = b.dyn.Resource(res)
	if namespaced {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(c.ns)
		}
		client = b.dyn.Resource(res).Namespace(obj.GetNamespace())
	}
	_, err = client.Create(t.Context(), obj, metav1.CreateOptions{})
	switch {
	case want != nil && want.Refused != "":
		if err == nil || !strings.Contains(err.Error(), want.Refused) {
			t.Fatalf("%s %s: create error %v, want one containing %q", obj.GetKind(), obj.GetName(), err, want.Refused)
		}
		return
	case err != nil:
		t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	if !namespaced {
		b.cleanup(func() { _ = client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	}
}

func (b *badInputEnv) resource(obj *unstructured.Unstructured) (schema.GroupVersionResource, bool, error) {
	gvk := obj.GroupVersionKind()
	m, err := b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return m.Resource, m.Scope.Name() == "namespace", nil
}

func (e badExpectations) object(kind, name string) *objectExpect {
	for i := range e.Objects {
		if e.Objects[i].Kind == kind && e.Objects[i].Name == name {
			return &e.Objects[i]
		}
	}
	return nil
}

// stillProcesses edits a valid route after the corpus: the controller must still judge
// it (observedGeneration catches up) and write it to Consul.
func (b *badInputEnv) stillProcesses(t *testing.T, ns string) {
	t.Helper()
	const host = "edited.example.com"
	gen := setHostnames(t, ns, "neighbour", host).Generation

	testenv.Eventually(t, badInputCaseTimeout, "the edited route's status catches up", func(context.Context) error {
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(ns).Get(t.Context(), "neighbour", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p := testenv.ParentOf(r.Status.Parents, b.controller)
		if p == nil {
			return errors.New("no parent status of ours")
		}
		return wantConditions(p.Conditions, []string{"Accepted=True/Accepted"}, gen)
	})
	testenv.Eventually(t, badInputCaseTimeout, "the edited route reaches Consul", func(context.Context) error {
		return b.checkEntry(ns, entryExpect{Kind: consulapi.HTTPRoute, Name: "neighbour", Hostnames: &[]string{host}})
	})
}

// deleteOwnedEntries deletes the Consul entries written with this ownership, routes
// before what they refer to.
func deleteOwnedEntries(t *testing.T, controller, cluster string) {
	t.Helper()
	entries := env.ConsulClient.ConfigEntries()
	for _, kind := range []string{consulapi.HTTPRoute, consulapi.TCPRoute, consulapi.APIGateway, consulapi.InlineCertificate, consulapi.ServiceDefaults} {
		list, _, err := entries.List(kind, nil)
		if err != nil {
			t.Errorf("list %s entries: %v", kind, err)
			continue
		}
		for _, e := range list {
			meta := e.GetMeta()
			if meta["gateway-controller"] != controller || meta["gateway-controller-cluster"] != cluster {
				continue
			}
			if _, err := entries.Delete(kind, e.GetName(), nil); err != nil {
				t.Errorf("delete %s %s: %v", kind, e.GetName(), err)
			}
		}
	}
}

// checkJudged is check, once the controller has judged every object of the case that
// the expectations check only by absence. No parent status and no Consul entry is
// also what an object has before the controller has seen it, so without this such a
// case passes on the first poll however the controller would judge the object.
func (b *badInputEnv) checkJudged(ctx context.Context, c badCase) error {
	for _, obj := range c.absentOnly() {
		if err := b.judgedNotServed(obj); err != nil {
			return err
		}
	}
	return b.check(ctx, c)
}

// judgedNotServed requires the controller's last confirmation of obj to carry no
// object: it judged obj and left nothing of it to serve (not ours, or withheld).
//
// Why a confirmation proves the judgment: the controller publishes one only at the end
// of a sync of the key, and a key reaches the status queues only from the informers'
// events, lookups in their caches and Enqueue (for keys already published). The case
// namespace is new and nothing in it is deleted, so a confirmation of one of its
// objects comes from a sync that found the object in the controller's cache. The last
// one counts because confirmations of a key arrive in the order of its syncs.
func (b *badInputEnv) judgedNotServed(obj judgedObject) error {
	confs := b.published.of(obj.kind, obj.key)
	if len(confs) == 0 {
		return fmt.Errorf("%s %s: not judged yet (the controller published nothing of it)", obj.kind, obj.key)
	}
	if last := confs[len(confs)-1]; last.Object != nil {
		return fmt.Errorf("%s %s: published to be served, want nothing of it served", obj.kind, obj.key)
	}
	return nil
}

// judgedObject is an object of a case the controller must have judged.
type judgedObject struct {
	kind gatewayv1.Kind
	key  cache.ObjectName
}

// gatewayKindOfEntry is the Gateway API kind a Consul entry kind is written from; the
// other kinds (inline-certificate, service-defaults) come from no object the status
// controller confirms.
var gatewayKindOfEntry = map[string]gatewayv1.Kind{
	consulapi.APIGateway: "Gateway",
	consulapi.HTTPRoute:  "HTTPRoute",
	consulapi.TCPRoute:   "TCPRoute",
}

// absentOnly are the objects the case creates whose expectations are all absences:
// noParents, or an absent Consul entry, and no condition, listener or parent to find
// in their status (finding one, at the object's generation, proves the judgment).
func (c badCase) absentOnly() []judgedObject {
	var out []judgedObject
	add := func(kind gatewayv1.Kind, ns, name string) {
		if ns == "" {
			ns = c.ns
		}
		obj := judgedObject{kind, cache.ObjectName{Namespace: ns, Name: name}}
		if !c.creates(obj) || slices.Contains(out, obj) {
			return
		}
		if want := c.expect.object(string(kind), name); want != nil && want.checksStatus() {
			return
		}
		out = append(out, obj)
	}
	for _, want := range c.expect.Objects {
		if want.NoParents && !want.checksStatus() {
			add(gatewayv1.Kind(want.Kind), want.Namespace, want.Name)
		}
	}
	for _, want := range c.expect.Consul {
		if kind, ok := gatewayKindOfEntry[want.Kind]; ok && want.Absent {
			add(kind, want.Namespace, want.Name)
		}
	}
	return out
}

// checksStatus reports whether the expectation finds something in the object's status,
// or the object is refused and never judged.
func (o objectExpect) checksStatus() bool {
	return o.Refused != "" || len(o.Conditions)+len(o.Listeners)+len(o.AttachedRoutes)+len(o.Parents) > 0
}

// creates reports whether the case creates obj.
func (c badCase) creates(obj judgedObject) bool {
	return slices.ContainsFunc(c.objects, func(u *unstructured.Unstructured) bool {
		ns := u.GetNamespace()
		if ns == "" {
			ns = c.ns
		}
		return u.GetKind() == string(obj.kind) && u.GetName() == obj.key.Name && ns == obj.key.Namespace
	})
}
