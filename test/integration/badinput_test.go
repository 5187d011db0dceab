package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
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
	// cleanup registers with the whole test, not the case.
	cleanup func(func())
}

func TestBadInputCorpus(t *testing.T) {
	cases := loadBadCases(t)
	if len(cases) < 60 {
		t.Fatalf("the corpus has %d cases, want at least 60", len(cases))
	}
	b := newBadInputEnv(t)
	createObject(t, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: badInputClass},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: b.controller}})
	// Registered before the controller, so it runs after the controller stopped: what
	// it wrote leaves Consul, which every later test in the package shares (Consul's
	// own gateway controller otherwise goes on reconciling hundreds of routes).
	t.Cleanup(func() { deleteOwnedEntries(t, string(b.controller), "bad") })
	startController(t, b.controller, controllerOptions{consul: &consulOptions{clusterID: "bad",
		translation: translate.Options{ManageServiceDefaults: true}}})

	// Namespaces and cluster-scoped objects outlive their case, for the last checks.
	b.cleanup = t.Cleanup
	for _, c := range cases {
		createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}})
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
		if err := b.check(t.Context(), c); err != nil {
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

// loadBadCases reads every case file; the first document is its expectations.
func loadBadCases(t *testing.T) []badCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(badInputDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []badCase
	for i, f := range files {
		c, err := parseBadCase(f, fmt.Sprintf("bad-%03d", i))
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
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return c, err
		}
		if len(obj.Object) == 0 {
			continue
		}
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
	createObject(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.ns + "-echo"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
	s := consulStack{ns: c.ns, controller: b.controller}
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "neighbour"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: badInputClass, Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType},
		}},
	}
	createObject(t, gw)
	neighbour := s.route("neighbour", neighbourHost)
	neighbour.Spec.ParentRefs[0].Name = "neighbour"
	createObject(t, neighbour)

	for _, obj := range c.objects {
		b.create(t, c, obj)
	}
	eventually(t, badInputCaseTimeout, c.file+": "+c.expect.Description, func() (bool, error) {
		return true, b.check(t.Context(), c)
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

// check compares the servers' state with the case's expectations and the neighbour's.
func (b *badInputEnv) check(ctx context.Context, c badCase) error {
	if err := b.checkNeighbour(ctx, c.ns); err != nil {
		return fmt.Errorf("the valid neighbour: %w", err)
	}
	for _, want := range c.expect.Objects {
		if want.Refused != "" {
			continue
		}
		if err := b.checkObject(ctx, c, want); err != nil {
			return fmt.Errorf("%s %s: %w", want.Kind, want.Name, err)
		}
	}
	for _, want := range c.expect.Consul {
		if err := b.checkEntry(c.ns, want); err != nil {
			return fmt.Errorf("consul %s %s: %w", want.Kind, want.Name, err)
		}
	}
	return nil
}

func (b *badInputEnv) checkNeighbour(ctx context.Context, ns string) error {
	c := badCase{ns: ns}
	gw := objectExpect{Kind: "Gateway", Name: "neighbour", Conditions: []string{"Accepted=True/Accepted", "Programmed=True/Programmed"}}
	route := objectExpect{Kind: "HTTPRoute", Name: "neighbour", Parents: []parentExpect{{Ref: parentRefExpect{Name: "neighbour"},
		Conditions: []string{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs", "ConsulAccepted=True/Accepted"}}}}
	for _, want := range []objectExpect{gw, route} {
		if err := b.checkObject(ctx, c, want); err != nil {
			return fmt.Errorf("%s: %w", want.Kind, err)
		}
	}
	return b.checkEntry(ns, entryExpect{Kind: consulapi.HTTPRoute, Name: "neighbour", Hostnames: &[]string{neighbourHost}})
}

// badStatus is the part of any Gateway API object's status the corpus checks.
type badStatus struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Status   struct {
		Conditions []metav1.Condition            `json:"conditions"`
		Listeners  []gatewayv1.ListenerStatus    `json:"listeners"`
		Parents    []gatewayv1.RouteParentStatus `json:"parents"`
	} `json:"status"`
}

func (b *badInputEnv) checkObject(ctx context.Context, c badCase, want objectExpect) error {
	var st badStatus
	ns := want.Namespace
	if ns == "" {
		ns = c.ns
	}
	if err := b.get(ctx, ns, want.Kind, want.Name, &st); err != nil {
		return err
	}
	gen := st.Metadata.Generation
	if err := wantConditions(st.Status.Conditions, want.Conditions, gen); err != nil {
		return err
	}
	if err := wantListeners(st.Status.Listeners, want, gen); err != nil {
		return err
	}
	return b.wantParents(st.Status.Parents, ns, want, gen)
}

// get reads an object of namespace ns (or a cluster-scoped one) into out.
func (b *badInputEnv) get(ctx context.Context, ns, kind, name string, out any) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: kind})
	res, namespaced, err := b.resource(obj)
	if err != nil {
		return err
	}
	client := dynamic.ResourceInterface(b.dyn.Resource(res))
	if namespaced {
		client = b.dyn.Resource(res).Namespace(ns)
	}
	got, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, out)
}

func wantListeners(got []gatewayv1.ListenerStatus, want objectExpect, gen int64) error {
	byName := map[string]gatewayv1.ListenerStatus{}
	for _, l := range got {
		byName[string(l.Name)] = l
	}
	for name, conds := range want.Listeners {
		l, ok := byName[name]
		if !ok {
			return fmt.Errorf("no status for listener %s", name)
		}
		if err := wantConditions(l.Conditions, conds, gen); err != nil {
			return fmt.Errorf("listener %s: %w", name, err)
		}
	}
	for name, n := range want.AttachedRoutes {
		if l, ok := byName[name]; !ok || l.AttachedRoutes != n {
			return fmt.Errorf("listener %s: attachedRoutes %d, want %d", name, l.AttachedRoutes, n)
		}
	}
	return nil
}

func (b *badInputEnv) wantParents(got []gatewayv1.RouteParentStatus, ns string, want objectExpect, gen int64) error {
	var ours []gatewayv1.RouteParentStatus
	for _, p := range got {
		if p.ControllerName == b.controller {
			ours = append(ours, p)
		}
	}
	if want.NoParents && len(ours) > 0 {
		return fmt.Errorf("%d parent statuses of ours, want none", len(ours))
	}
	for _, wp := range want.Parents {
		p := findParent(ours, wp.Ref, ns)
		if p == nil {
			return fmt.Errorf("no status for parent %+v", wp.Ref)
		}
		if err := wantConditions(p.Conditions, wp.Conditions, gen); err != nil {
			return fmt.Errorf("parent %+v: %w", wp.Ref, err)
		}
	}
	return nil
}

func findParent(parents []gatewayv1.RouteParentStatus, want parentRefExpect, ns string) *gatewayv1.RouteParentStatus {
	for i, p := range parents {
		r := p.ParentRef
		if string(r.Name) == want.Name && deref(r.SectionName) == gatewayv1.SectionName(want.SectionName) &&
			deref(r.Port) == want.Port && sameOr(string(deref(r.Kind)), want.Kind, "Gateway") &&
			sameOr(string(deref(r.Namespace)), want.Namespace, ns) {
			return &parents[i]
		}
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// sameOr compares a parentRef field with the expected one, an unset side meaning def.
func sameOr(got, want, def string) bool {
	if got == "" {
		got = def
	}
	if want == "" {
		want = def
	}
	return got == want
}

// wantConditions checks each "Type=Status/Reason" (ConsulAccepted short for ours) is
// present, and written for generation gen.
func wantConditions(got []metav1.Condition, want []string, gen int64) error {
	for _, w := range want {
		condType, statusReason, _ := strings.Cut(w, "=")
		if condType == "ConsulAccepted" {
			condType = gwsync.ConsulAcceptedCondition
		}
		c := findCondition(got, condType)
		if c == nil {
			return fmt.Errorf("no %s condition, want %s", condType, statusReason)
		}
		if have := string(c.Status) + "/" + c.Reason; have != statusReason {
			return fmt.Errorf("%s is %s (%q), want %s", condType, have, c.Message, statusReason)
		}
		if c.ObservedGeneration != gen {
			return fmt.Errorf("%s observedGeneration %d, want %d", condType, c.ObservedGeneration, gen)
		}
	}
	return nil
}

// checkEntry reads the Consul entry of the case object kind/name.
func (b *badInputEnv) checkEntry(ns string, want entryExpect) error {
	name := b.entryName(ns, want)
	entry, _, err := env.ConsulClient.ConfigEntries().Get(want.Kind, name, nil)
	if err != nil && !strings.Contains(err.Error(), "404") {
		return err
	}
	if want.Absent {
		if entry != nil {
			return fmt.Errorf("entry %s present, want none", name)
		}
		return nil
	}
	if entry == nil {
		return fmt.Errorf("no entry %s", name)
	}
	return wantEntryContent(entry, want)
}

func (b *badInputEnv) entryName(ns string, want entryExpect) string {
	if want.Namespace != "" {
		ns = want.Namespace
	}
	switch want.Kind {
	case consulapi.InlineCertificate:
		return b.naming.CertificateName(ns, want.Name)
	case consulapi.ServiceDefaults:
		return want.Name
	}
	return b.naming.EntryName(ns, want.Name)
}

func wantEntryContent(entry consulapi.ConfigEntry, want entryExpect) error {
	var hostnames, listeners []string
	rules, parents := 0, 0
	switch e := entry.(type) {
	case *consulapi.HTTPRouteConfigEntry:
		hostnames, rules, parents = e.Hostnames, len(e.Rules), len(e.Parents)
	case *consulapi.TCPRouteConfigEntry:
		parents = len(e.Parents)
	case *consulapi.APIGatewayConfigEntry:
		for _, l := range e.Listeners {
			listeners = append(listeners, l.Name)
		}
	}
	if want.Hostnames != nil && !sameSet(hostnames, *want.Hostnames) {
		return fmt.Errorf("hostnames %q, want %q", hostnames, *want.Hostnames)
	}
	if want.Rules != nil && rules != *want.Rules {
		return fmt.Errorf("%d rules, want %d", rules, *want.Rules)
	}
	if want.Parents != nil && parents != *want.Parents {
		return fmt.Errorf("%d parents, want %d", parents, *want.Parents)
	}
	if want.Listeners != nil && !sameSet(listeners, *want.Listeners) {
		return fmt.Errorf("listeners %q, want %q", listeners, *want.Listeners)
	}
	return nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

// stillProcesses edits a valid route after the corpus: the controller must still judge
// it (observedGeneration catches up) and write it to Consul.
func (b *badInputEnv) stillProcesses(t *testing.T, ns string) {
	t.Helper()
	const host = "edited.example.com"
	var gen int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(ns).Get(t.Context(), "neighbour", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r.Spec.Hostnames = []gatewayv1.Hostname{host}
		r, err = env.GatewayClient.GatewayV1().HTTPRoutes(ns).Update(t.Context(), r, metav1.UpdateOptions{})
		if err == nil {
			gen = r.Generation
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, badInputCaseTimeout, "the edited route's status catches up", func() (bool, error) {
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(ns).Get(t.Context(), "neighbour", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p := ourParent(r.Status.Parents, b.controller)
		return p != nil && wantConditions(p.Conditions, []string{"Accepted=True/Accepted"}, gen) == nil, nil
	})
	eventually(t, badInputCaseTimeout, "the edited route reaches Consul", func() (bool, error) {
		return b.checkEntry(ns, entryExpect{Kind: consulapi.HTTPRoute, Name: "neighbour", Hostnames: &[]string{host}}) == nil, nil
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
