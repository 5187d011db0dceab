package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
)

// fault is one kind of trouble: inject starts it and returns what heals it. The
// scenario keeps editing while a fault is on.
type fault struct {
	name   string
	inject func(ctx context.Context, s *scenario) (heal func() error, err error)
	effect effect
}

// effect is what shows that a fault happened: count must grow between the fault's
// injection and the end of its settling time, or the run fails. A fault injected into
// nothing (no watch to expire, no entry to rewrite, no process to kill) proves
// nothing, and a run of such faults would pass without testing anything.
type effect struct {
	seen  string // what count counts, for the violation
	count func(s *scenario) int64
}

// window is how long a fault stays on while edits go on.
const window = 6 * time.Second

var faults = []fault{
	{"kube-apiserver-restart", func(ctx context.Context, s *scenario) (func() error, error) {
		if err := env.Kube.StopAPIServer(); err != nil {
			return nil, err
		}
		return env.Kube.StartAPIServer, nil
	}, proxyEffect("a replica's request to the API server went unanswered", "kube", func(p *faultProxy) *atomic.Int64 { return &p.upstreamFailed })},
	// With the watch cache off, watches are etcd's: after a compaction, a watch resumed
	// from an older resourceVersion ends with 410 Gone and the informer relists.
	{"etcd-compaction-watch-expiry", func(ctx context.Context, s *scenario) (func() error, error) {
		// Right after a fault that restarted the replicas, none may have a watch open
		// yet, and a compaction then expires nothing (seen once in the long form).
		s.awaitOpenWatches(ctx, 15*time.Second)
		if err := compactEtcd(ctx); err != nil {
			return nil, err
		}
		s.eachReplica(func(r *replica) { r.kube.dropConnections() })
		return nil, nil
	}, effect{"a replica's watch ended with 410 Gone", func(s *scenario) int64 { return s.expired.Load() }}},
	{"kube-api-latency", func(ctx context.Context, s *scenario) (func() error, error) {
		s.eachReplica(func(r *replica) { r.kube.latency.Store(int64(400 * time.Millisecond)) })
		return s.healProxies, nil
	}, proxyEffect("a replica's request to the API server was delayed", "kube", func(p *faultProxy) *atomic.Int64 { return &p.delayed })},
	{"kube-api-errors-and-drops", func(ctx context.Context, s *scenario) (func() error, error) {
		s.eachReplica(func(r *replica) { r.kube.errorRate.Store(200) })
		stop := s.every(ctx, time.Second, func() { s.eachReplica(func(r *replica) { r.kube.dropConnections() }) })
		return func() error { stop(); return s.healProxies() }, nil
	}, proxyEffect("a replica's request to the API server was answered with an injected error", "kube", func(p *faultProxy) *atomic.Int64 { return &p.failed })},
	// Both replicas die while edits and deletes go on: what they missed must be found
	// on the relist, deletes included.
	{"controller-sigkill-all", func(ctx context.Context, s *scenario) (func() error, error) {
		s.eachReplica(s.killRunning)
		return func() error { s.eachReplica((*replica).release); return nil }, nil
	}, countEffect("a running replica was killed", replicasKilled)},
	{"leader-failover", func(ctx context.Context, s *scenario) (func() error, error) {
		leader := s.leader(ctx)
		if leader == nil {
			return nil, fmt.Errorf("no leader to kill")
		}
		s.killRunning(leader)
		return func() error { leader.release(); return nil }, nil
	}, countEffect("a running replica was killed", replicasKilled)},
	// The leader loses the API server but keeps Consul: it must stop writing to Consul
	// once it can no longer renew, before the follower takes over.
	{"leader-partition", func(ctx context.Context, s *scenario) (func() error, error) {
		leader := s.leader(ctx)
		if leader == nil {
			return nil, fmt.Errorf("no leader to partition")
		}
		leader.kube.partition.Store(true)
		leader.kube.dropConnections()
		return s.healProxies, nil
	}, proxyEffect("a request of the leader's to the API server was cut off", "kube", func(p *faultProxy) *atomic.Int64 { return &p.cutOff })},
	{"consul-restart", func(ctx context.Context, s *scenario) (func() error, error) {
		if err := env.Consul.Stop(); err != nil {
			return nil, err
		}
		return env.Consul.Start, nil
	}, proxyEffect("a replica's request to Consul went unanswered", "consul", func(p *faultProxy) *atomic.Int64 { return &p.upstreamFailed })},
	{"consul-data-loss", func(ctx context.Context, s *scenario) (func() error, error) {
		if err := s.putDataLossMarker(ctx); err != nil {
			return nil, err
		}
		if err := env.Consul.Stop(); err != nil {
			return nil, err
		}
		s.oracle.forgetConsul()
		if err := env.Consul.WipeData(); err != nil {
			return nil, err
		}
		return func() error {
			if err := env.Consul.Start(); err != nil {
				return err
			}
			if err := s.oracle.putForeignEntries(ctx); err != nil {
				return err
			}
			return s.noteDataLoss(ctx)
		}, nil
	}, countEffect("Consul came back without a key written before it stopped", consulDataLost)},
	{"consul-latency-and-errors", func(ctx context.Context, s *scenario) (func() error, error) {
		s.eachReplica(func(r *replica) {
			r.consul.latency.Store(int64(300 * time.Millisecond))
			r.consul.errorRate.Store(200)
		})
		return s.healProxies, nil
	}, proxyEffect("a replica's request to Consul was answered with an injected error", "consul", func(p *faultProxy) *atomic.Int64 { return &p.failed })},
	// Someone else rewrites our entries while we write them: every write of ours must
	// be check-and-set, and what they wrote must be put back.
	{"consul-foreign-writer-cas-race", func(ctx context.Context, s *scenario) (func() error, error) {
		stop := s.every(ctx, 150*time.Millisecond, func() { s.driftOneEntry(ctx) })
		return func() error { stop(); return nil }, nil
	}, countEffect("an entry of ours was rewritten by the foreign writer", foreignConsulWrites)},
	// Another controller writes its own parent status on the same routes and its own
	// condition on our Gateways: ours must keep them.
	{"foreign-status-writer", func(ctx context.Context, s *scenario) (func() error, error) {
		stop := s.every(ctx, 200*time.Millisecond, func() { s.foreignStatus(ctx) })
		return func() error { stop(); return nil }, nil
	}, countEffect("a status was written by the foreign writer", foreignStatusWrites)},
}

// Names of the scenario's counts that faults' effects read.
const (
	replicasKilled      = "replicas killed"
	consulDataLost      = "consul data lost"
	foreignConsulWrites = "foreign consul writes"
	foreignStatusWrites = "foreign status writes"
)

// proxyEffect counts, over every replica's proxy to target, what stat counts.
func proxyEffect(seen, target string, stat func(*faultProxy) *atomic.Int64) effect {
	return effect{seen, func(s *scenario) int64 {
		var n int64
		s.eachReplica(func(r *replica) {
			p := r.kube
			if target == "consul" {
				p = r.consul
			}
			n += stat(p).Load()
		})
		return n
	}}
}

func countEffect(seen, name string) effect {
	return effect{seen, func(s *scenario) int64 { return int64(s.counts.get(name)) }}
}

// checkEffect fails the run when f's effect count did not grow since before.
func (s *scenario) checkEffect(f fault, before int64) {
	s.oracle.checked("fault effect", 1)
	if f.effect.count(s) > before {
		return
	}
	s.oracle.violate("fault effect: %s had none: never seen: %s", f.name, f.effect.seen)
}

// killRunning kills r and holds it down, counting the kill when a process was running.
func (s *scenario) killRunning(r *replica) {
	if r.pid() != 0 {
		s.counts.add(replicasKilled, 1)
	}
	r.kill(true)
}

// dataLossMarker is a key written just before Consul stops: a Consul that comes back
// without it lost its data. (Comparing raft indexes was not enough: a young Consul's
// index before the loss can be below a fresh server's after its own bootstrap writes.)
const dataLossMarker = "chaos/data-loss-marker"

func (s *scenario) putDataLossMarker(ctx context.Context) error {
	_, err := s.consul.KV().Put(&consulapi.KVPair{Key: dataLossMarker, Value: []byte("written before the loss")}, (&consulapi.WriteOptions{}).WithContext(ctx))
	return err
}

// noteDataLoss counts the data loss when Consul came back without the marker; a
// restart that kept its data still has it.
func (s *scenario) noteDataLoss(ctx context.Context) error {
	pair, _, err := s.consul.KV().Get(dataLossMarker, (&consulapi.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return err
	}
	if pair == nil {
		s.counts.add(consulDataLost, 1)
	}
	return nil
}

// Clock skew is not injected: the controller compares no timestamps across replicas.
// client-go's leader election times a Lease's expiry from when this replica observed
// its last change, by its own monotonic clock, never from the renewTime another
// replica wrote; lastTransitionTime is only written, never compared. See
// docs/reliability.md.

func faultByName(name string) (fault, bool) {
	for _, f := range faults {
		if f.name == name {
			return f, true
		}
	}
	return fault{}, false
}

// compactEtcd compacts etcd at its current revision through etcd's JSON gateway.
// awaitOpenWatches waits, at most for timeout, until some replica has a watch open
// through its API server proxy.
func (s *scenario) awaitOpenWatches(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		open := false
		s.eachReplica(func(r *replica) { open = open || r.kube.openWatches.Load() > 0 })
		if open {
			return
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

func compactEtcd(ctx context.Context) error {
	var status struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := etcdPost(ctx, "/v3/kv/range", map[string]any{"key": "AA=="}, &status); err != nil {
		return err
	}
	return etcdPost(ctx, "/v3/kv/compaction", map[string]any{"revision": status.Header.Revision, "physical": true}, nil)
}

func etcdPost(ctx context.Context, path string, body, into any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.Kube.EtcdURL()+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s", path, resp.Status)
	}
	if into == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// driftOneEntry rewrites one of our http-route entries the way a person with the
// Consul CLI would: a plain write, our meta kept, a path no edit made. The entry is
// written compact, as the controller writes: Consul 1.15 refuses the keys this
// client's structs add ("invalid config key Rules[0].Filters.RetryFilter"), and a
// refused write is no drift.
func (s *scenario) driftOneEntry(ctx context.Context) {
	entries, _, err := s.consul.ConfigEntries().List(consulapi.HTTPRoute, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return
	}
	var owned []*consulapi.HTTPRouteConfigEntry
	for _, e := range entries {
		if r, ok := e.(*consulapi.HTTPRouteConfigEntry); ok && s.owns(r.Meta) {
			owned = append(owned, r)
		}
	}
	if len(owned) == 0 {
		return
	}
	s.rngMu.Lock()
	r := owned[s.rng.IntN(len(owned))]
	s.rngMu.Unlock()
	r.Rules = []consulapi.HTTPRouteRule{{Matches: []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/drift"}}},
		Services: []consulapi.HTTPService{{Name: "drift"}}}}
	if _, _, err := s.consul.ConfigEntries().Set(consul.Compact(r), (&consulapi.WriteOptions{}).WithContext(ctx)); err == nil {
		s.counts.add(foreignConsulWrites, 1)
	}
}

// foreignStatus writes the foreign controller's parent status on one route and its
// condition on one Gateway, numbered so the oracle can tell old from new. A user's
// client: it retries on conflict.
func (s *scenario) foreignStatus(ctx context.Context) {
	s.rngMu.Lock()
	route, gw := routeName(s.rng.IntN(routeCount)), gatewayName(s.rng.IntN(gatewayCount))
	s.foreignWrites++
	n := s.foreignWrites
	s.rngMu.Unlock()
	cond := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: fmt.Sprintf("foreign write %d", n), LastTransitionTime: metav1.Now()}
	routes := s.gw.GatewayV1().HTTPRoutes(s.ns)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		r, err := routes.Get(ctx, route, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond.ObservedGeneration = r.Generation
		entry := gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: foreignGW}, ControllerName: foreignController, Conditions: []metav1.Condition{cond}}
		kept := r.Status.Parents[:0]
		for _, p := range r.Status.Parents {
			if p.ControllerName != foreignController {
				kept = append(kept, p)
			}
		}
		r.Status.Parents = append(kept, entry)
		_, err = routes.UpdateStatus(ctx, r, metav1.UpdateOptions{})
		return err
	})
	if err == nil {
		s.counts.add(foreignStatusWrites, 1)
	}
	gateways := s.gw.GatewayV1().Gateways(s.ns)
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		g, err := gateways.Get(ctx, gw, metav1.GetOptions{})
		if err != nil {
			return err
		}
		audited := metav1.Condition{Type: foreignCondition, Status: metav1.ConditionTrue, Reason: "Audited", Message: cond.Message, ObservedGeneration: g.Generation, LastTransitionTime: metav1.Now()}
		kept := g.Status.Conditions[:0]
		for _, c := range g.Status.Conditions {
			if c.Type != foreignCondition {
				kept = append(kept, c)
			}
		}
		g.Status.Conditions = append(kept, audited)
		_, err = gateways.UpdateStatus(ctx, g, metav1.UpdateOptions{})
		return err
	})
	if err == nil {
		s.counts.add(foreignStatusWrites, 1)
	}
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}
