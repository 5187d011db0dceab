package sync

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// fixedDataPlane answers the same verdict for every object.
type fixedDataPlane struct{ v Verdict }

func (f fixedDataPlane) Verdict(gatewayv1.Kind, cache.ObjectName) Verdict { return f.v }
func (f fixedDataPlane) HasSynced() bool                                  { return true }

func TestDataPlaneVerdictsReachStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		verdict          Verdict
		gatewayProgram   summary
		listenerProgram  summary
		routeConsulState summary
	}{
		{"no answer yet", Verdict{},
			summary{"Programmed", "False", "Pending"}, summary{"Programmed", "False", "Pending"}, summary{ConsulAcceptedCondition, "False", "Pending"}},
		{"Consul accepted", Verdict{Known: true, Programmed: true, Reason: "Accepted"},
			summary{"Programmed", "True", "Programmed"}, summary{"Programmed", "True", "Programmed"}, summary{ConsulAcceptedCondition, "True", "Accepted"}},
		{"Consul refused", Verdict{Known: true, Reason: "InvalidDiscoveryChain", Message: "no http protocol"},
			summary{"Programmed", "False", "InvalidDiscoveryChain"}, summary{"Programmed", "False", "InvalidDiscoveryChain"}, summary{ConsulAcceptedCondition, "False", "InvalidDiscoveryChain"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := gateway("infra", "gw", httpListener("http", 80, ""))
			route := httpRoute("infra", "r", nil, parentRef("", "gw", ""))
			d := newTestDecider(t, ourClass(), gw, service("infra", "echo", 8080), route)
			d.dataPlane = fixedDataPlane{tt.verdict}

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
			conds := summarize(parents[0].Conditions)
			if diff := cmp.Diff(tt.routeConsulState, conds[len(conds)-1]); diff != "" {
				t.Errorf("route %s (-want +got):\n%s", ConsulAcceptedCondition, diff)
			}
		})
	}
}
