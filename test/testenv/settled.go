package testenv

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SettleQuiet is how long a controller's queues must stay empty, with no key added,
// before Settled believes it has nothing left to do.
const SettleQuiet = 3 * time.Second

// Settled waits until c leads, each queue named in worked has taken keys and synced
// every one of them, and none of its queues has held or taken a key for SettleQuiet;
// it returns c's metrics then. A counter read before that proves nothing: a controller
// that has not looked at anything yet has written nothing either. A check that
// something did not happen ("a restart writes nothing") reads its counters from what
// Settled returns, and takes its independent evidence (Versions) around it.
func Settled(t testing.TB, c *Controller, worked ...string) string {
	t.Helper()
	return SettledScrape(t, c.Name(), c.Metrics, Scrape{Leader: true}, worked...)
}

// Scrape says how to read a process's metrics for SettledScrape.
type Scrape struct {
	// Leader: the process must report itself leader.
	Leader bool
	// Base is a scrape taken before the controller under test started, when the
	// process runs others too (the integration tests run theirs in the test process,
	// one after another, and the queue series are the process's): only what changed
	// since counts.
	Base string
}

// SettledScrape is Settled for metrics read by scrape: a controller process's, or an
// in-process controller's registry (see Scrape.Base).
func SettledScrape(t testing.TB, name string, scrape func(context.Context) (string, error), how Scrape, worked ...string) string {
	t.Helper()
	var text string
	var quietSince time.Time
	var adds float64
	Eventually(t, 60*time.Second, fmt.Sprintf("%s synced the keys of queues %v and stays idle for %s", name, worked, SettleQuiet), func(ctx context.Context) error {
		body, err := scrape(ctx)
		if err == nil {
			err = idleAfterWork(body, how, worked)
		}
		if err != nil {
			quietSince = time.Time{}
			return err
		}
		if now := MetricSum(body, "workqueue_adds_total"); quietSince.IsZero() || now != adds {
			quietSince, adds = time.Now(), now
		}
		if idle := time.Since(quietSince); idle < SettleQuiet {
			return fmt.Errorf("idle for %s only", idle.Round(time.Millisecond))
		}
		text = body
		return nil
	})
	return text
}

// IdleAfterWork reports, from a controller's metrics, why it is not yet idle after
// work: it does not lead, a queue named in worked took no key or has not synced each
// key it took, or some queue holds or works on a key.
func IdleAfterWork(metrics string, worked []string) error {
	return idleAfterWork(metrics, Scrape{Leader: true}, worked)
}

func idleAfterWork(metrics string, how Scrape, worked []string) error {
	since := func(name string, labels ...string) float64 {
		return MetricSum(metrics, name, labels...) - MetricSum(how.Base, name, labels...)
	}
	if how.Leader && MetricSum(metrics, "consul_gateway_controller_leader") != 1 {
		return fmt.Errorf("not leading")
	}
	for _, queue := range worked {
		// Adding a key already queued is not counted; adding one in work is, and the
		// key is synced again after: with the queue empty, syncs equal adds.
		adds := since("workqueue_adds_total", `name="`+queue+`"`)
		syncs := since("consul_gateway_controller_sync_duration_seconds_count", `queue="`+queue+`"`)
		if adds == 0 || syncs < adds {
			return fmt.Errorf("queue %s took %v keys and synced %v", queue, adds, syncs)
		}
	}
	if depth := since("workqueue_depth"); depth != 0 {
		return fmt.Errorf("%v keys queued", depth)
	}
	if working := unfinishedWork(metrics, how.Base); working != 0 {
		return fmt.Errorf("a key in work for %vs", working)
	}
	return nil
}

// unfinishedWork is the work in progress the metrics show beyond base, in seconds. A
// queue sets the gauge of its name to its own figure every half second, and controllers
// run one after the other in a test process share the gauges of a queue name: a
// gauge that differs from base is a running queue's, whole; one that does not is what
// a stopped controller left, or nothing.
func unfinishedWork(metrics, base string) float64 {
	const name = "workqueue_unfinished_work_seconds"
	var sum float64
	for line := range strings.Lines(metrics) {
		series, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !strings.HasPrefix(series, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || v == MetricSum(base, series) {
			continue
		}
		sum += v
	}
	return sum
}

// Versions is what the servers say of a set of objects, by a name that says what each
// is: an object's resourceVersion, a Consul entry's ModifyIndex. Two snapshots around
// a step that must write nothing are the servers' own evidence of it, apart from the
// controller's counters; equality is the only comparison made.
type Versions map[string]string

// Changes lists what differs between v and after: written, created or deleted.
func (v Versions) Changes(after Versions) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(v)) {
		got, ok := after[key]
		switch {
		case !ok:
			out = append(out, key+" was deleted")
		case got != v[key]:
			out = append(out, fmt.Sprintf("%s was written (%s, then %s)", key, v[key], got))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(after)) {
		if _, ok := v[key]; !ok {
			out = append(out, key+" was created")
		}
	}
	return out
}

// GatewayAPIVersions are the resourceVersions of the Gateway API objects in ns that a
// controller writes status on (Gateways, HTTPRoutes, TCPRoutes, GRPCRoutes) and of the
// GatewayClasses named in classes. Only the controller under test writes their
// status, so a changed resourceVersion is a write of someone's.
func (e *Env) GatewayAPIVersions(ctx context.Context, ns string, classes ...string) (Versions, error) {
	out := Versions{}
	add := func(kind string, o metav1.Object) {
		out[kind+" "+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
	}
	gw := e.GatewayClient.GatewayV1()
	gateways, err := gw.Gateways(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Gateways: %w", err)
	}
	for i := range gateways.Items {
		add("Gateway", &gateways.Items[i])
	}
	httpRoutes, err := gw.HTTPRoutes(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list HTTPRoutes: %w", err)
	}
	for i := range httpRoutes.Items {
		add("HTTPRoute", &httpRoutes.Items[i])
	}
	tcpRoutes, err := gw.TCPRoutes(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list TCPRoutes: %w", err)
	}
	for i := range tcpRoutes.Items {
		add("TCPRoute", &tcpRoutes.Items[i])
	}
	grpcRoutes, err := gw.GRPCRoutes(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list GRPCRoutes: %w", err)
	}
	for i := range grpcRoutes.Items {
		add("GRPCRoute", &grpcRoutes.Items[i])
	}
	for _, name := range classes {
		c, err := gw.GatewayClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get GatewayClass %s: %w", name, err)
		}
		add("GatewayClass", c)
	}
	return out, nil
}

// GatewayObjectVersions are the resourceVersions of the Services and ServiceAccounts
// in ns and the generations of its Deployments: what a controller deploys for
// Gateways. A Deployment's status is written by kube-controller-manager, so its
// generation (which only a spec write moves) is the evidence for it.
func (e *Env) GatewayObjectVersions(ctx context.Context, ns string) (Versions, error) {
	out := Versions{}
	core := e.KubeClient.CoreV1()
	services, err := core.Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Services: %w", err)
	}
	for _, s := range services.Items {
		out["Service "+ns+"/"+s.Name] = s.ResourceVersion
	}
	accounts, err := core.ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ServiceAccounts: %w", err)
	}
	for _, s := range accounts.Items {
		out["ServiceAccount "+ns+"/"+s.Name] = s.ResourceVersion
	}
	deployments, err := e.KubeClient.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Deployments: %w", err)
	}
	for _, d := range deployments.Items {
		out["Deployment "+ns+"/"+d.Name+" generation"] = strconv.FormatInt(d.Generation, 10)
	}
	return out, nil
}

// EntryKinds are the config entry kinds the controller writes.
var EntryKinds = []string{
	consulapi.APIGateway, consulapi.HTTPRoute, consulapi.TCPRoute, consulapi.InlineCertificate,
	consulapi.ServiceDefaults, consulapi.ServiceResolver, consulapi.ServiceIntentions,
}

// ConsulEntryVersions are the ModifyIndexes of the config entries of EntryKinds that
// owned picks (by meta; nil picks all). Consul raises an entry's ModifyIndex on every
// write that changes it, whoever makes it.
func ConsulEntryVersions(ctx context.Context, client *consulapi.Client, owned func(meta map[string]string) bool) (Versions, error) {
	out := Versions{}
	for _, kind := range EntryKinds {
		entries, _, err := client.ConfigEntries().List(kind, (&consulapi.QueryOptions{RequireConsistent: true}).WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("list consul %s entries: %w", kind, err)
		}
		for _, entry := range entries {
			if owned == nil || owned(entry.GetMeta()) {
				out["consul "+kind+"/"+entry.GetName()] = strconv.FormatUint(entry.GetModifyIndex(), 10)
			}
		}
	}
	return out, nil
}

// OwnedBy picks the entries whose meta names controller and clusterID as their writer.
func OwnedBy(controller, clusterID string) func(map[string]string) bool {
	return func(meta map[string]string) bool {
		return meta["gateway-controller"] == controller && meta["gateway-controller-cluster"] == clusterID
	}
}

// Merge puts every version of others into v and returns v.
func (v Versions) Merge(others ...Versions) Versions {
	for _, o := range others {
		maps.Copy(v, o)
	}
	return v
}
