package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The chart's alert rules and dashboard (files/), as test/rules parses them.
const (
	chartRulesFile     = "prometheus-rules.yaml"
	chartDashboardFile = "grafana-dashboard.json"
)

// ownSeries matches the names of the controller's own series in a PromQL expression;
// the rest (up, kube-state-metrics') other exporters serve.
var ownSeries = regexp.MustCompile(`\b(consul_gateway_controller_[a-z_]+|workqueue_[a-z_]+|rest_client_[a-z_]+|process_[a-z_]+|go_[a-z_]+)\b`)

// TestRulesReadServedSeries runs the controller binary and checks that every series
// of its own that the chart's alert rules and dashboard read is one its /metrics
// serves (a histogram's _bucket among them).
func TestRulesReadServedSeries(t *testing.T) {
	s := env.NewGatewayStack(t, "rules-served", "gw", 80, "echo")
	env.Create(t, s.Route("web"))
	p := env.RunController(t, testenv.ControllerOptions{Name: "rules-served", Args: []string{
		"--controller-name=" + string(s.Controller), "--cluster-id=rules-served", "--deploy-gateways=false", "--leader-elect=false",
	}})
	// Settled: every queue has synced a key, so each histogram has observations.
	body := testenv.Settled(t, p, "gatewayclass", "gateway", "httproute", "consul")
	if err := p.WaitReady(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for line := range strings.Lines(body) {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), "{"); ok && !strings.HasPrefix(name, "#") {
			served[name] = true
		} else if fields := strings.Fields(line); len(fields) == 2 && !strings.HasPrefix(line, "#") {
			served[fields[0]] = true
		}
	}
	exprs := chartExpressions(t)
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions in the chart's rules and dashboard", len(exprs))
	}
	checked := 0
	for what, expr := range exprs {
		for _, name := range ownSeries.FindAllString(expr, -1) {
			checked++
			if !served[name] {
				t.Errorf("%s reads %s, which the controller's /metrics does not serve", what, name)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d series names checked", checked)
	}
}

// chartExpressions are the PromQL expressions of the chart's alert rules and dashboard,
// by alert or panel.
func chartExpressions(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	readChartFile(t, chartRulesFile, &rules, func(b []byte, v any) error { return yaml.Unmarshal(b, v) })
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	var dashboard struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	readChartFile(t, chartDashboardFile, &dashboard, json.Unmarshal)
	for _, p := range dashboard.Panels {
		for i, target := range p.Targets {
			exprs["panel "+p.Title+" "+string(rune('A'+i))] = target.Expr
		}
	}
	return exprs
}

func readChartFile(t *testing.T, name string, into any, unmarshal func([]byte, any) error) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(t), "files", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// checkChartRulesRendered: the chart renders the rule file's groups as its
// PrometheusRule (the selector replaced) and the dashboard file as the JSON of its
// ConfigMap.
func checkChartRulesRendered(t *testing.T, r renderedDeploy, selector string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(t), "files", chartRulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	text := strings.ReplaceAll(string(data), `job="consul-gateway-controller-metrics"`, selector)
	if err := yaml.Unmarshal([]byte(text), &want); err != nil {
		t.Fatal(err)
	}
	rule := r.only(t, "PrometheusRule")
	if diff := cmp.Diff(want["groups"], rule.Object["spec"].(map[string]any)["groups"]); diff != "" {
		t.Errorf("PrometheusRule groups differ from %s (-file +rendered):\n%s", chartRulesFile, diff)
	}
	dashboard := r.named(t, "ConfigMap", "consul-gateway-controller-dashboard")
	if dashboard.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard: \"1\"", dashboard.GetLabels())
	}
	var rendered, file any
	jsonText, _ := dashboard.Object["data"].(map[string]any)["consul-gateway-controller.json"].(string)
	dashboardFile, err := os.ReadFile(filepath.Join(chartDir(t), "files", chartDashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(jsonText), &rendered); err != nil {
		t.Fatalf("the dashboard ConfigMap's JSON does not parse: %v", err)
	}
	if err := json.Unmarshal(dashboardFile, &file); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(file, rendered); diff != "" {
		t.Errorf("dashboard ConfigMap differs from %s (-file +rendered):\n%s", chartDashboardFile, diff)
	}
}
