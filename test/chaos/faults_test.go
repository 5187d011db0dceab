package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// fault is one kind of trouble: inject starts it and returns what heals it. The
// scenario keeps editing while a fault is on.
type fault struct {
	name   string
	inject func(ctx context.Context, s *scenario) (heal func() error, err error)
}

// window is how long a fault stays on while edits go on.
const window = 6 * time.Second

var faults = []fault{
	{"kube-apiserver-restart", func(ctx context.Context, s *scenario) (func() error, error) {
		if err := env.Kube.StopAPIServer(); err != nil {
			return nil, err
		}
		return env.Kube.StartAPIServer, nil
	}},
	// With the watch cache off, watches are etcd's: after a compaction, a watch resumed
	// from an older resourceVersion ends with 410 Gone and the informer relists.
	{"etcd-compaction-watch-expiry", func(ctx context.Context, s *scenario) (func() error, error) {
		if err := compactEtcd(ctx); err != nil {
			return nil, err
		}
		s.eachReplica(func(r *replica) { r.kube.dropConnections() })
		return nil, nil
	}},
	{"kube-api-latency", func(ctx context.Context, s *scenario) (func() error, error) {
		s.eachReplica(func(r *replica) { r.kube.latency.Store(int64(400 * time.Millisecond)) })
		return s.healProxies, nil
	}},
	{"kube-api-errors-and-drops", func(ctx context.Context, s *scenario) (func() error, error) {
		s.eachReplica(func(r *replica) { r.kube.errorRate.Store(200) })
		stop := s.every(ctx, time.Second, func() { s.eachReplica(func(r *replica) { r.kube.dropConnections() }) })
		return func() error { stop(); return s.healProxies() }, nil
	}},
	// Both replicas die while edits and deletes go on: what they missed must be found
	// on the relist, deletes included.
	{"controller-sigkill-all", func(ctx context.Context, s *scenario) (func() error, error) {
		s.eachReplica(func(r *replica) { r.kill(true) })
		return func() error { s.eachReplica((*replica).release); return nil }, nil
	}},
	{"leader-failover", func(ctx context.Context, s *scenario) (func() error, error) {
		leader := s.leader(ctx)
		if leader == nil {
			return nil, fmt.Errorf("no leader to kill")
		}
		leader.kill(true)
		return func() error { leader.release(); return nil }, nil
	}},
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
	}},
	{"consul-restart", func(ctx context.Context, s *scenario) (func() error, error) {
		if err := env.Consul.Stop(); err != nil {
			return nil, err
		}
		return env.Consul.Start, nil
	}},
	{"consul-data-loss", func(ctx context.Context, s *scenario) (func() error, error) {
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
			return s.oracle.putForeignEntries(ctx)
		}, nil
	}},
	{"consul-latency-and-errors", func(ctx context.Context, s *scenario) (func() error, error) {
		s.eachReplica(func(r *replica) {
			r.consul.latency.Store(int64(300 * time.Millisecond))
			r.consul.errorRate.Store(200)
		})
		return s.healProxies, nil
	}},
	// Someone else rewrites our entries while we write them: every write of ours must
	// be check-and-set, and what they wrote must be put back.
	{"consul-foreign-writer-cas-race", func(ctx context.Context, s *scenario) (func() error, error) {
		stop := s.every(ctx, 150*time.Millisecond, func() { s.driftOneEntry(ctx) })
		return func() error { stop(); return nil }, nil
	}},
	// Another controller writes its own parent status on the same routes and its own
	// condition on our Gateways: ours must keep them.
	{"foreign-status-writer", func(ctx context.Context, s *scenario) (func() error, error) {
		stop := s.every(ctx, 200*time.Millisecond, func() { s.foreignStatus(ctx) })
		return func() error { stop(); return nil }, nil
	}},
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
// Consul CLI would: a plain write, our meta kept, a path no edit made.
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
	if _, _, err := s.consul.ConfigEntries().Set(r, (&consulapi.WriteOptions{}).WithContext(ctx)); err == nil {
		s.counts.add("foreign consul writes", 1)
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
		s.counts.add("foreign status writes", 1)
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
		s.counts.add("foreign status writes", 1)
	}
}
