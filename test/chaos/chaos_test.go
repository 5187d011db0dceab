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

// run is one scenario: a seed and its schedule of faults.
type run struct {
	id     string // names the subtest, the namespace, the class and the cluster id
	seed   uint64
	faults []fault
	found  string // for a regression: what it found
}

// regressions are runs that found a bug, replayed in every form so it stays fixed.
var regressions = []struct {
	seed   uint64
	faults string
	found  string
}{
	// A leader cut off from the API server, not from Consul, kept writing to Consul
	// after the follower took the Lease (internal/leader's fence); and a Gateway moved
	// to another class kept its gateway Deployment (dataplane).
	{505, "leader-partition,leader-partition,leader-partition", "found by the long form, seeds 303 and 505"},
	// The end of seed 202's schedule: after Consul lost its data the replicas rewrite
	// every entry, and the convergence check must wait for Consul's verdicts (and for
	// writes in flight) before the referee looks, or the referee writes the verdict
	// over Pending; failed reads and writes while Consul is away must not outlive the
	// outage in status (consul's per-entry write failures).
	{202, "consul-latency-and-errors,consul-data-loss,consul-data-loss", "found by the long form, seed 202"},
}

// runs: the short form (make test) is one seed with every fault once, the long form
// (make chaos) five seeds with every fault twice; both replay the regressions.
// -chaos.seed (with -chaos.faults) runs one seed alone.
func runs() ([]run, error) {
	if *seedFlag != 0 {
		sched, err := schedule(*seedFlag, *faultFlag)
		return []run{{id: fmt.Sprintf("s%d", *seedFlag), seed: *seedFlag, faults: sched}}, err
	}
	seeds := []uint64{20261203}
	if *long {
		seeds = []uint64{101, 202, 303, 404, 505}
	}
	var out []run
	for _, seed := range seeds {
		sched, err := schedule(seed, "")
		if err != nil {
			return nil, err
		}
		out = append(out, run{id: fmt.Sprintf("s%d", seed), seed: seed, faults: sched})
	}
	for i, r := range regressions {
		sched, err := schedule(r.seed, r.faults)
		if err != nil {
			return nil, err
		}
		out = append(out, run{id: fmt.Sprintf("r%d-%d", i, r.seed), seed: r.seed, faults: sched, found: r.found})
	}
	return out, nil
}

// schedule is the seed's order of faults: each fault once (twice in the long form),
// unless names lists them.
func schedule(seed uint64, names string) ([]fault, error) {
	if names != "" {
		var out []fault
		for _, name := range strings.Split(names, ",") {
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
	all, err := runs()
	if err != nil {
		t.Fatal(err)
	}
	// Checked before the runs: docs/reliability.md records runs of commits of main.
	var commit string
	if *report != "" {
		if commit, err = reportedCommit(); err != nil {
			t.Fatalf("refusing to write %s: %v", *report, err)
		}
	}
	var rows []summary
	for _, r := range all {
		t.Run(r.id, func(t *testing.T) {
			row := runScenario(t, r)
			rows = append(rows, row)
			for _, v := range row.violations {
				t.Error(v)
			}
		})
	}
	table := summaryTable(rows)
	t.Log("\n" + table)
	if *report != "" {
		table = fmt.Sprintf("Run at commit %s of main, finished %s.\n\n%s", commit, time.Now().UTC().Format("2006-01-02 15:04 MST"), table)
		if err := writeReport(*report, table); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	tableBegin = "<!-- chaos-table:begin (make chaos writes this part) -->"
	tableEnd   = "<!-- chaos-table:end -->"
)

// reportedCommit is the commit of main the suite runs at (the report itself may
// differ: the run rewrites it).
func reportedCommit() (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	commit, err := testenv.CommitOfMain(root, "docs/reliability.md")
	if err != nil {
		return "", err
	}
	return commit[:12], nil
}

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
	id         string
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

func runScenario(t *testing.T, r run) summary {
	started := time.Now()
	seed, sched := r.seed, r.faults
	names := make([]string, len(sched))
	for i, f := range sched {
		names[i] = f.name
	}
	if r.found != "" {
		t.Logf("regression run (%s)", r.found)
	}
	t.Logf("seed %d, faults in order: %s", seed, strings.Join(names, ","))
	t.Logf("replay: go test ./test/chaos -run 'TestChaos' -chaos.seed=%d -chaos.faults=%s", seed, strings.Join(names, ","))

	s := newScenario(t, r.id, seed)
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
	s.resyncWorld(t, ctx)
	s.converge(t, ctx, "the faults")
	for _, r := range s.replicas {
		r.stop()
	}
	s.referee(t, ctx)
	s.oracle.checkSingleWriter(s.writes.all())
	s.oracle.checkCheckAndSet(s.writes.all())
	s.oracle.checkStepBacks()
	s.checkNoLostDelete(t, ctx)
	select {
	case err := <-startErrs:
		t.Errorf("a replica failed to start: %v", err)
	default:
	}
	return s.summarize(r.id, names, time.Since(started))
}

func newScenario(t *testing.T, id string, seed uint64) *scenario {
	t.Helper()
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
	t.Logf("%s fault %s", time.Now().Format("15:04:05.000"), f.name)
	defer func() {
		t.Logf("%s fault %s healed; replica starts during it: %d", time.Now().Format("15:04:05.000"), f.name, s.starts()-starts)
	}()
	effects := f.effect.count(s)
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
	s.checkEffect(f, effects)
}

// resyncWorld reads the model back from the API server when an edit failed on the
// client's side: the convergence check compares against what the server holds.
func (s *scenario) resyncWorld(t *testing.T, ctx context.Context) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := s.world.resync(ctx)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("read the objects back from the API server: %v", err)
		}
		sleepCtx(ctx, time.Second)
	}
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
