package sync

import (
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// acceptanceSummary is a route's Accepted and PartiallyInvalid conditions on one
// parent, as testdata/envoyrefused/*.out.yaml holds them.
type acceptanceSummary struct {
	Route            string `json:"route"`
	Parent           string `json:"parent"`
	Accepted         string `json:"accepted"`
	PartiallyInvalid string `json:"partiallyInvalid,omitempty"`
}

// TestEnvoyRefusedRules judges the routes of each testdata/envoyrefused/<case>.in.yaml,
// whose rules carry values Consul would copy into the gateway's route configuration
// and Envoy would refuse, and compares each parent's Accepted and PartiallyInvalid
// conditions ("Status/Reason: message") with <case>.out.yaml. -update rewrites the
// .out.yaml files; review them as code.
func TestEnvoyRefusedRules(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "envoyrefused", "*.in.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata/envoyrefused/*.in.yaml (%v)", err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := acceptanceSummaries(t, readPrecedenceObjects(t, path))
			compareSummaries(t, "TestEnvoyRefusedRules", path, got)
		})
	}
}

// acceptanceSummaries decides the status of every route among objs, in their order.
func acceptanceSummaries(t *testing.T, objs []runtime.Object) []acceptanceSummary {
	t.Helper()
	d := newTestDecider(t, objs...)
	var out []acceptanceSummary
	for _, obj := range objs {
		kind, ok := gatewayapi.RouteOf(obj)
		if !ok {
			continue
		}
		view, rules, err := d.viewRoute(obj)
		if err != nil {
			t.Fatal(err)
		}
		parents, _, err := d.routeParentStatuses(view, rules, nil, 1, metav1.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parents {
			out = append(out, acceptanceSummary{
				Route:            string(kind.Kind) + " " + view.namespace + "/" + view.name,
				Parent:           gatewayapi.ParentName(p.ParentRef),
				Accepted:         conditionSummary(p.Conditions, string(gatewayv1.RouteConditionAccepted)),
				PartiallyInvalid: conditionSummary(p.Conditions, string(gatewayv1.RouteConditionPartiallyInvalid)),
			})
		}
	}
	return out
}

// conditionSummary is "Status/Reason: message", or "" when there is no such condition.
func conditionSummary(conds []metav1.Condition, condType string) string {
	c := findCondition(conds, condType)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}
