package integration

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// How TestBadInputCorpus reads the servers' state against a case's expectations.

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
		c := meta.FindStatusCondition(got, condType)
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
	entry, err := env.ConsulEntry(want.Kind, name)
	if err != nil {
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
