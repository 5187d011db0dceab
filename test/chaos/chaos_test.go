// Package chaos is the fault-injection suite: random edits from a seeded generator
// run while faults hit the API server, etcd, Consul and the controller's replicas, and
// an oracle that watches every status and Consul entry checks the controller's
// promises at each step (see docs/reliability.md).
package chaos

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var (
	env *testenv.Env

	long      = flag.Bool("chaos.long", false, "the long form: more seeds, every fault twice per seed")
	seedFlag  = flag.Uint64("chaos.seed", 0, "run this one seed (replay); 0 means the form's seeds")
	faultFlag = flag.String("chaos.faults", "", "comma-separated fault names in order (replay); empty means the seed's schedule")
	report    = flag.String("chaos.report", "", "put the summary table into this markdown file, between its chaos-table markers")
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testenv.Main(m, testenv.Options{
		Nodes:         1,
		ConsulDataDir: true,
		// Watches served by etcd itself, so a compaction expires them as it would
		// expire the watch cache's window on a busy cluster.
		APIServerArgs: []string{"--watch-cache=false"},
	}, &env))
}

// The short form runs in make test; make chaos runs the long form.
func seeds() []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	if *long {
		return []uint64{101, 202, 303, 404, 505}
	}
	return []uint64{20261203}
}

// schedule is the seed's order of faults: each fault once (twice in the long form).
func schedule(seed uint64) ([]fault, error) {
	if *faultFlag != "" {
		var out []fault
		for _, name := range strings.Split(*faultFlag, ",") {
			f, ok := faultByName(strings.TrimSpace(name))
			if !ok {
				return nil, fmt.Errorf("no fault named %q", name)
			}
			out = append(out, f)
		}
		return out, nil
	}
	out := slices.Clone(faults)
	if *long {
		out = append(out, faults...)
	}
	rng := rand.New(rand.NewPCG(seed, 0xfa))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, nil
}

func TestChaos(t *testing.T) {
	var rows []summary
	for _, seed := range seeds() {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			row := runScenario(t, seed)
			rows = append(rows, row)
			for _, v := range row.violations {
				t.Error(v)
			}
		})
	}
	table := summaryTable(rows)
	t.Log("\n" + table)
	if *report != "" {
		if err := writeReport(*report, table); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	tableBegin = "<!-- chaos-table:begin (make chaos writes this part) -->"
	tableEnd   = "<!-- chaos-table:end -->"
)

// writeReport replaces what lies between the markers of the file at path.
func writeReport(path, table string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := strings.Index(string(doc), tableBegin), strings.Index(string(doc), tableEnd)
	if begin < 0 || end < begin {
		return fmt.Errorf("%s has no %q ... %q markers", path, tableBegin, tableEnd)
	}
	out := string(doc[:begin+len(tableBegin)]) + "\n" + table + "\n" + string(doc[end:])
	return os.WriteFile(path, []byte(out), 0o644)
}

// scenarioEnv is what the world, the oracle and the faults share.
type scenarioEnv struct {
	ns, class                 string
	controllerName, clusterID string
	adminConfig               *rest.Config
	kube                      kubernetes.Interface
	gw                        gatewayclient.Interface
	consul                    *consulapi.Client
	writes                    *writeLog
	expired                   atomic.Int64
}

func (s *scenarioEnv) owns(meta map[string]string) bool {
	return meta["gateway-controller"] == s.controllerName && meta["gateway-controller-cluster"] == s.clusterID
}

type scenario struct {
	*scenarioEnv
	world    *world
	oracle   *oracle
	replicas []*replica
	counts   counter

	rngMu         gosync.Mutex
	rng           *rand.Rand
	foreignWrites int
}

type summary struct {
	seed       uint64
	faults     []string
	edits      int
	refused    int
	otherCount map[string]int
	checks     map[string]int
	violations []string
	expired    int64
	restarts   int
	duration   time.Duration
}

func runScenario(t *testing.T, seed uint64) summary {
	started := time.Now()
	sched, err := schedule(seed)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(sched))
	for i, f := range sched {
		names[i] = f.name
	}
	t.Logf("seed %d, faults in order: %s", seed, strings.Join(names, ","))
	t.Logf("replay: go test ./test/chaos -run 'TestChaos' -chaos.seed=%d -chaos.faults=%s", seed, strings.Join(names, ","))

	s := newScenario(t, seed)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := s.oracle.putForeignEntries(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.oracle.start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.world.create(ctx); err != nil {
		t.Fatal(err)
	}
	startErrs := make(chan error, 1)
	dir := t.TempDir()
	for _, r := range s.replicas {
		go r.supervise(ctx, dir, startErrs)
	}
	s.converge(t, ctx, "the start")

	stopEdits := s.every(ctx, 250*time.Millisecond, func() { s.world.step(ctx) })
	for _, f := range sched {
		s.runFault(t, ctx, f)
	}
	stopEdits()
	s.converge(t, ctx, "the faults")
	for _, r := range s.replicas {
		r.stop()
	}
	s.referee(t, ctx)
	s.oracle.checkSingleWriter(s.writes.all())
	s.checkNoLostDelete(t, ctx)
	select {
	case err := <-startErrs:
		t.Errorf("a replica failed to start: %v", err)
	default:
	}
	return s.summarize(seed, names, time.Since(started))
}

func newScenario(t *testing.T, seed uint64) *scenario {
	t.Helper()
	id := fmt.Sprintf("c%d", seed)
	cfg := env.Kube.Config(testenv.AdminUser)
	se := &scenarioEnv{
		ns: "chaos-" + id, class: "chaos-" + id,
		controllerName: "chaos.example/" + id, clusterID: id,
		adminConfig: cfg, kube: env.KubeClient, gw: env.GatewayClient, consul: env.ConsulClient,
		writes: &writeLog{},
	}
	s := &scenario{scenarioEnv: se, rng: rand.New(rand.NewPCG(seed, 0x5c))}
	s.world = newWorld(se, seed)
	s.oracle = newOracle(se)
	binary := testenv.ControllerBinary(t)
	for i, name := range []string{"replica-a", "replica-b"} {
		s.replicas = append(s.replicas, newReplica(t, se, name, binary, seed+uint64(10*i)))
	}
	return s
}

// runFault turns f on, keeps editing for a window, heals it and gives the controller
// a moment before the next one (faults are not meant to pile up).
func (s *scenario) runFault(t *testing.T, ctx context.Context, f fault) {
	starts := s.starts()
	t.Logf("fault %s", f.name)
	defer func() { t.Logf("fault %s healed; replica starts during it: %d", f.name, s.starts()-starts) }()
	heal, err := f.inject(ctx, s)
	if err != nil {
		t.Fatalf("inject %s: %v", f.name, err)
	}
	s.counts.add("faults", 1)
	sleepCtx(ctx, window)
	if heal != nil {
		if err := heal(); err != nil {
			t.Fatalf("heal %s: %v", f.name, err)
		}
	}
	sleepCtx(ctx, 2*time.Second)
}

func (s *scenario) starts() int {
	n := 0
	for _, r := range s.replicas {
		r.mu.Lock()
		n += r.starts
		r.mu.Unlock()
	}
	return n
}

func (s *scenario) eachReplica(fn func(*replica)) {
	for _, r := range s.replicas {
		fn(r)
	}
}

func (s *scenario) healProxies() error {
	s.eachReplica(func(r *replica) { r.kube.heal(); r.consul.heal() })
	return nil
}

// every runs fn every period until the returned stop is called (stop waits for the
// last run to end).
func (s *scenario) every(ctx context.Context, period time.Duration, fn func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sleepCtx(ctx, period) {
			fn()
		}
	}()
	return func() { cancel(); <-done }
}

// leader is the replica the Lease names, once one does.
func (s *scenario) leader(ctx context.Context) *replica {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		s.oracle.mu.Lock()
		var holder string
		if n := len(s.oracle.terms); n > 0 {
			holder = s.oracle.terms[n-1].holder
		}
		s.oracle.mu.Unlock()
		for _, r := range s.replicas {
			if r.name == holder && r.pid() != 0 {
				return r
			}
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return nil
}
