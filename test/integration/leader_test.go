package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	configclient "github.com/consul-gateway-controller/consul-gateway-controller/api/client"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/leader"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// replica is one in-process controller under leader election, with a switch that cuts
// it off from the API server and a record of its status writes.
type replica struct {
	identity    string
	partitioned atomic.Bool

	writes      writeTimes // status PUTs that left the replica, successful or not
	mu          gosync.Mutex
	leadStopped time.Time // when its writers' context ended
	result      chan error
}

type replicaTransport struct {
	r    *replica
	next http.RoundTripper
}

func (t replicaTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/status") {
		t.r.writes.add()
	}
	if t.r.partitioned.Load() {
		// What a dropped connection gives: client-go retries reads on it until their
		// deadline, so a leader's attempt to release the Lease takes that long.
		return nil, io.ErrUnexpectedEOF
	}
	return t.next.RoundTrip(req)
}

// startReplica runs a status controller for controllerName under leader election on
// the Lease ns/name until ctx is done.
func startReplica(ctx context.Context, t *testing.T, identity string, controllerName gatewayv1.GatewayController, lease leader.Config) *replica {
	t.Helper()
	r := &replica{identity: identity, result: make(chan error, 1)}
	cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return replicaTransport{r: r, next: rt} })
	kube := kubernetes.NewForConfigOrDie(cfg)
	gateway := gatewayclient.NewForConfigOrDie(cfg)
	configs, err := configclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lease.Identity = identity
	go func() {
		r.result <- leader.Run(ctx, kube, lease, func(ctx context.Context) error {
			defer func() {
				r.mu.Lock()
				r.leadStopped = time.Now()
				r.mu.Unlock()
			}()
			inf := informers.New(kube, gateway, configs, 0)
			controller, err := gwsync.NewController(ctx, gwsync.Config{
				ControllerName: controllerName,
				Capabilities:   consullimits.Consul115,
				Informers:      gwsync.InformersOf(inf),
				GatewayClient:  gateway,
				Publisher:      &confirmations{},
				Workers:        gwsync.Workers{GatewayClasses: 1, Gateways: 1, Routes: 1},
				BundleVersion:  func() string { return "v1.6.3" },
			})
			if err != nil {
				return err
			}
			inf.StartWithContext(ctx)
			defer inf.Shutdown()
			return controller.Run(ctx)
		})
	}()
	return r
}

func (r *replica) stoppedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leadStopped
}

// TestLeaderElectionFencesTheOldLeader runs two replicas on one Lease, cuts the leader
// off from the API server, and checks that the other takes over and converges, and
// that the old leader's writers stopped and never wrote again.
func TestLeaderElectionFencesTheOldLeader(t *testing.T) {
	s := env.NewGatewayStack(t, "leader", "gw", 80, "echo")
	env.Create(t, s.Route("r"))
	ns, controllerName := s.Namespace, s.Controller

	// The lease duration is below renew deadline + release timeout, so a leader that
	// stops its writers only when client-go's renew loop returns overlaps the next one.
	lease := leader.Config{Namespace: ns, Name: "consul-gateway-controller", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a := startReplica(ctx, t, "a", controllerName, lease)
	holder := func() string {
		l, err := env.KubeClient.CoordinationV1().Leases(ns).Get(t.Context(), lease.Name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	holds := func(identity string) func(context.Context) error {
		return func(context.Context) error {
			if h := holder(); h != identity {
				return fmt.Errorf("the Lease is held by %q", h)
			}
			return nil
		}
	}
	testenv.Eventually(t, 20*time.Second, "replica a holds the Lease", holds("a"))
	b := startReplica(ctx, t, "b", controllerName, lease)
	routeGeneration := func() (int64, int64) {
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(ns).Get(t.Context(), "r", metav1.GetOptions{})
		if err != nil {
			return 0, -1
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName == controllerName {
				return r.Generation, p.Conditions[0].ObservedGeneration
			}
		}
		return r.Generation, -1
	}
	testenv.Eventually(t, 20*time.Second, "the leader converges the route", func(context.Context) error {
		gen, observed := routeGeneration()
		if gen != observed {
			return fmt.Errorf("generation %d, observed %d", gen, observed)
		}
		return nil
	})
	if n := b.writes.since(time.Time{}); n != 0 {
		t.Errorf("the follower made %d status writes while a led", n)
	}

	// Cut the leader off: it must stop its writers, the follower must take over.
	a.partitioned.Store(true)
	select {
	case err := <-a.result:
		if !errors.Is(err, leader.ErrLeadershipLost) {
			t.Fatalf("the cut-off leader returned %v, want ErrLeadershipLost", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the cut-off leader did not give up within 15s")
	}
	testenv.Eventually(t, 20*time.Second, "replica b takes the Lease", holds("b"))
	l, err := env.KubeClient.CoordinationV1().Leases(ns).Get(t.Context(), lease.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Both times are this machine's clock: b wrote acquireTime, a's lead func noted its end.
	if acquired := l.Spec.AcquireTime.Time; !a.stoppedAt().Before(acquired) {
		t.Errorf("the old leader's writers stopped at %s, after the new leader acquired the Lease at %s",
			a.stoppedAt().Format(time.StampMicro), acquired.Format(time.StampMicro))
	}
	setHostnames(t, ns, "r", "after.example.com")
	testenv.Eventually(t, 20*time.Second, "the new leader converges the edited route", func(context.Context) error {
		gen, observed := routeGeneration()
		if gen != observed || gen < 2 {
			return fmt.Errorf("generation %d, observed %d", gen, observed)
		}

		return nil
	})
	if n := a.writes.since(a.stoppedAt()); n != 0 {
		t.Errorf("the old leader attempted %d status writes after its writers stopped", n)
	}
	if b.writes.since(time.Time{}) == 0 {
		t.Error("the new leader made no status write")
	}

	// SIGTERM: the leader drains and releases the Lease.
	cancel()
	select {
	case err := <-b.result:
		if err != nil {
			t.Errorf("the leader's graceful shutdown returned %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the leader did not shut down within 15s")
	}
	if h := holder(); h != "" {
		t.Errorf("after a graceful shutdown the Lease is still held by %q", h)
	}
}
