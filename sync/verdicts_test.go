package sync

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// fixedVerdicts answers the same verdict for every object, and the bindings it holds
// by "gateway namespace/name/listener" (unreported for the others).
type fixedVerdicts struct {
	v        contract.Verdict
	bindings map[string]contract.Binding
}

func (f fixedVerdicts) Verdict(gatewayv1.Kind, cache.ObjectName) contract.Verdict { return f.v }
func (f fixedVerdicts) Binding(_ gatewayv1.Kind, _ cache.ObjectName, gateway cache.ObjectName, listener, _ gatewayv1.SectionName) contract.Binding {
	return f.bindings[gateway.String()+"/"+string(listener)]
}
func (f fixedVerdicts) HasSynced() bool { return true }

func TestConsulVerdictsReachStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		verdict          contract.Verdict
		gatewayProgram   summary
		listenerProgram  summary
		routeConsulState summary
	}{
		{"no answer yet", contract.Verdict{},
			summary{"Programmed", "False", "Pending"}, summary{"Programmed", "False", "Pending"}, summary{ConsulAcceptedCondition, "False", "Pending"}},
		{"Consul accepted", contract.Verdict{Known: true, Programmed: true, Reason: "Accepted"},
			summary{"Programmed", "True", "Programmed"}, summary{"Programmed", "True", "Programmed"}, summary{ConsulAcceptedCondition, "True", "Accepted"}},
		{"Consul refused", contract.Verdict{Known: true, Reason: "InvalidDiscoveryChain", Message: "no http protocol"},
			summary{"Programmed", "False", "InvalidDiscoveryChain"}, summary{"Programmed", "False", "InvalidDiscoveryChain"}, summary{ConsulAcceptedCondition, "False", "InvalidDiscoveryChain"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := gateway("infra", "gw", httpListener("http", 80, ""))
			route := httpRoute("infra", "r", nil, parentRef("", "gw", ""))
			d := newTestDecider(t, ourClass(), gw, service("infra", "echo", 8080), route)
			d.verdicts = fixedVerdicts{v: tt.verdict}

			status, err := d.gatewayStatus(gw, ourClass(), metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.gatewayProgram, summarize(status.Conditions)[1]); diff != "" {
				t.Errorf("Gateway Programmed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.listenerProgram, summarize(status.Listeners[0].Conditions)[1]); diff != "" {
				t.Errorf("listener Programmed (-want +got):\n%s", diff)
			}
			view, rules, err := d.viewRoute(route)
			if err != nil {
				t.Fatal(err)
			}
			parents, _, err := d.routeParentStatuses(view, rules, nil, 1, metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			consul := findCondition(parents[0].Conditions, ConsulAcceptedCondition)
			if consul == nil {
				t.Fatalf("no %s condition", ConsulAcceptedCondition)
			}
			if diff := cmp.Diff(tt.routeConsulState, summarize([]metav1.Condition{*consul})[0]); diff != "" {
				t.Errorf("route %s (-want +got):\n%s", ConsulAcceptedCondition, diff)
			}
		})
	}
}

// Consul may refuse to bind a route it accepted to some of its parents: each parent's
// ConsulAccepted says what Consul said about the listeners the route is written to on
// that parent.
func TestConsulBindingsPerParent(t *testing.T) {
	t.Parallel()
	accepted := contract.Verdict{Known: true, Programmed: true, Reason: "Accepted", Message: "route is valid"}
	bound := contract.Binding{State: contract.BindingBound, Reason: "Bound"}
	refused := contract.Binding{State: contract.BindingRefused, Reason: "FailedToBind", Message: "Consul http-route r.infra: listener http is not a http listener"}
	pending := contract.Binding{State: contract.BindingPending, Reason: "GatewayNotFound", Message: "Consul http-route r.infra: gateway was not found"}
	consulTrue := summary{ConsulAcceptedCondition, "True", "Accepted"}
	tests := []struct {
		name     string
		verdict  contract.Verdict
		bindings map[string]contract.Binding
		// want is the ConsulAccepted condition on the parents "one", "two" (no
		// sectionName: its listeners a and b) and their messages.
		want     []summary
		messages []string
	}{
		{"both bound", accepted, map[string]contract.Binding{"infra/one/http": bound, "infra/two/a": bound, "infra/two/b": bound},
			[]summary{consulTrue, consulTrue}, []string{"Consul accepted the route", "Consul accepted the route"}},
		{"no Bound condition follows the route's verdict", accepted, nil,
			[]summary{consulTrue, consulTrue}, nil},
		{"refused on one listener of the second parent", accepted, map[string]contract.Binding{"infra/one/http": bound, "infra/two/a": bound, "infra/two/b": refused},
			[]summary{consulTrue, {ConsulAcceptedCondition, "False", "FailedToBind"}}, []string{"Consul accepted the route", refused.Message}},
		{"pending on the first parent", accepted, map[string]contract.Binding{"infra/one/http": pending, "infra/two/a": bound, "infra/two/b": bound},
			[]summary{{ConsulAcceptedCondition, "False", "Pending"}, consulTrue}, []string{"Waiting for Consul to accept the route", "Consul accepted the route"}},
		{"a refusal wins over pending", accepted, map[string]contract.Binding{"infra/two/a": pending, "infra/two/b": refused},
			[]summary{consulTrue, {ConsulAcceptedCondition, "False", "FailedToBind"}}, []string{"Consul accepted the route", refused.Message}},
		{"the route's refusal wins over bindings", contract.Verdict{Known: true, Reason: "InvalidDiscoveryChain", Message: "no http protocol"}, map[string]contract.Binding{"infra/one/http": bound, "infra/two/b": refused},
			[]summary{{ConsulAcceptedCondition, "False", "InvalidDiscoveryChain"}, {ConsulAcceptedCondition, "False", "InvalidDiscoveryChain"}}, []string{"no http protocol", "no http protocol"}},
		{"not judged yet stays pending", contract.Verdict{}, map[string]contract.Binding{"infra/two/b": refused},
			[]summary{{ConsulAcceptedCondition, "False", "Pending"}, {ConsulAcceptedCondition, "False", "Pending"}}, []string{"Waiting for Consul to accept the route", "Waiting for Consul to accept the route"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			route := httpRoute("infra", "r", nil, parentRef("", "one", ""), parentRef("", "two", ""))
			d := newTestDecider(t, ourClass(), service("infra", "echo", 8080), route,
				gateway("infra", "one", httpListener("http", 80, "")),
				gateway("infra", "two", httpListener("a", 80, ""), httpListener("b", 81, "")))
			d.verdicts = fixedVerdicts{v: tt.verdict, bindings: tt.bindings}

			view, rules, err := d.viewRoute(route)
			if err != nil {
				t.Fatal(err)
			}
			parents, _, err := d.routeParentStatuses(view, rules, nil, 1, metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			var got []summary
			var messages []string
			for _, p := range parents {
				c := findCondition(p.Conditions, ConsulAcceptedCondition)
				if c == nil {
					t.Fatalf("parent %s: no %s condition", p.ParentRef.Name, ConsulAcceptedCondition)
				}
				got = append(got, summarize([]metav1.Condition{*c})[0])
				messages = append(messages, c.Message)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s per parent (-want +got):\n%s", ConsulAcceptedCondition, diff)
			}
			if tt.messages != nil {
				if diff := cmp.Diff(tt.messages, messages); diff != "" {
					t.Errorf("messages per parent (-want +got):\n%s", diff)
				}
			}
		})
	}
}
