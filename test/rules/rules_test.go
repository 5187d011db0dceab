// Package rules checks what the chart ships for Prometheus and Grafana
// (deploy/helm/consul-gateway-controller/files): the alert rules parse as Prometheus
// parses a rule file, every expression of the rules and the dashboard parses as PromQL,
// and every series they read is one docs/metrics.md documents (which
// TestMetricsAreDocumented ties to what /metrics serves) or one of the few named here
// that other exporters serve. test/integration's TestRulesReadServedSeries checks the
// same names against a running controller's /metrics.
package rules

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

var filesDir = filepath.Join("..", "..", "deploy", "helm", "consul-gateway-controller", "files")

// external are the series the rules read that the controller does not serve, and who
// does: docs/observability.md says what each needs.
var external = map[string]string{
	"up": "Prometheus, for every target it scrapes",
	"kube_deployment_status_replicas_unavailable": "kube-state-metrics",
	"kube_deployment_labels":                      "kube-state-metrics, with the managed-by label allowed",
}

var promql = parser.NewParser(parser.Options{})

func TestAlertRules(t *testing.T) {
	groups, errs := rulefmt.ParseFile(filepath.Join(filesDir, "prometheus-rules.yaml"), false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("rule file: %v", err)
	}
	if groups == nil {
		t.FailNow()
	}
	documented := documentedSeries(t)
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" {
				t.Errorf("group %s: a recording rule %q; the file holds alerts only", g.Name, r.Record)
				continue
			}
			if time.Duration(r.For) < time.Minute {
				t.Errorf("alert %s fires after %v: want at least a minute, so a blip does not page", r.Alert, r.For)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s has severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a summary or a description", r.Alert)
			}
			for _, name := range seriesOf(t, r.Alert, r.Expr) {
				if !documented[baseName(name, documented)] && external[name] == "" {
					t.Errorf("alert %s reads %s, which neither docs/metrics.md nor the external list names", r.Alert, name)
				}
			}
		}
	}
	// The alerts docs/observability.md promises.
	for _, want := range []string{
		"ConsulGatewayControllerDown", "ConsulGatewayControllerNoLeader", "ConsulGatewayControllerQueueBacklog",
		"ConsulGatewayControllerQueueRetries", "ConsulGatewayControllerConsulWritesFailing",
		"ConsulGatewayControllerObjectsNotAccepted", "ConsulGatewayControllerObjectsNotProgrammed", "ConsulGatewayPodsNotReady",
	} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s", want)
		}
	}
}

// dashboard is what this test reads of a Grafana dashboard.
type dashboard struct {
	UID    string `json:"uid"`
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(filesDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard uid %q, title %q, %d panels: want all three", d.UID, d.Title, len(d.Panels))
	}
	documented := documentedSeries(t)
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			for _, name := range seriesOf(t, p.Title, target.Expr) {
				if !documented[baseName(name, documented)] {
					t.Errorf("panel %q reads %s, which docs/metrics.md does not name", p.Title, name)
				}
			}
		}
	}
}

// seriesOf parses expr as PromQL and returns the metric names it selects.
func seriesOf(t *testing.T, what, expr string) []string {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", what, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				t.Errorf("%s: a selector without a metric name in %q", what, expr)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: %q reads no series", what, expr)
	}
	return names
}

// baseName is a histogram's name for its _bucket, _sum and _count series when
// documented holds it, and name otherwise.
func baseName(name string, documented map[string]bool) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && documented[base] {
			return base
		}
	}
	return name
}

// documentedSeries are the series names docs/metrics.md writes in backticks, and the
// process collectors' process_* and go_* series it documents as a group.
func documentedSeries(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{"process_resident_memory_bytes": true}
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(string(doc), -1) {
		names[m[1]] = true
	}
	return names
}
