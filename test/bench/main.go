package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The controller's default client throttle, and the high one of the fast cold start.
const (
	defaultQPS   = 20
	defaultBurst = 30
	fastQPS      = 1000
	fastBurst    = 1000
)

var allScenarios = []string{"idle", "cold", "cold-fast", "cold-sd", "edit", "restart", "failover", "secrets", "peer"}

// The QPS 20/30 stacks (cold start, edits, restart, failover) run at defaultSizes;
// the QPS 1000/1000 cold start at defaultFastSizes, and the Secrets at the largest of
// those: at QPS 20/30, 10,000 routes would take 17 minutes of rate limiting alone.
const (
	defaultSizes     = "1000,5000"
	defaultFastSizes = "1000,5000,10000"
)

// config is the command line.
type config struct {
	sizes     []int
	fastSizes []int
	scenarios map[string]bool
	edits     int
	secrets   int
	peerSize  int
	timeout   time.Duration
	quiet     time.Duration
	verbosity int
	extraArgs []string
	editWait  string
	writeDocs bool
	profiles  bool
	smoke     bool
	root      string
	logDir    string
	binary    string
	// built names the checkout the binary was built from, read when it was built:
	// the tree may change while the bench runs.
	built string
	// mainCommit is the commit of main the binary was built from; "" when the
	// checkout is not one, and then the docs are not written.
	mainCommit string
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	sizes := fs.String("sizes", defaultSizes, "comma-separated numbers of routes (Gateways: routes/20) of the QPS 20/30 stacks: cold, edit, restart, failover, and cold-sd at the smallest")
	fastSizes := fs.String("fast-sizes", "", "comma-separated numbers of routes of the QPS 1000/1000 cold start (cold-fast), the largest also with the Secrets; default: "+defaultFastSizes+", or -sizes when -sizes is given")
	scenarios := fs.String("scenarios", strings.Join(allScenarios, ","), "comma-separated subset of "+strings.Join(allScenarios, ","))
	cfg := &config{}
	fs.IntVar(&cfg.edits, "edits", 100, "route edits in the edit-latency scenario")
	fs.IntVar(&cfg.peerSize, "peer-size", 1000, "routes of the side-by-side comparison with Envoy Gateway (the peer scenario)")
	fs.IntVar(&cfg.secrets, "secrets", 10000, "unrelated Secrets (half Opaque, half kubernetes.io/tls) in the secrets scenario, at the largest size")
	fs.DurationVar(&cfg.timeout, "timeout", 45*time.Minute, "the longest any one wait (convergence, settling) may take")
	fs.DurationVar(&cfg.quiet, "quiet", 10*time.Second, "how long a controller must make no write, with every status final, to count as settled")
	fs.IntVar(&cfg.verbosity, "controller-v", 0, "the controller's klog verbosity (its logs go to _output/bench/<time>/)")
	fs.Func("controller-flag", "an extra flag for every controller process, such as --profiling (repeatable)", func(v string) error {
		cfg.extraArgs = append(cfg.extraArgs, v)
		return nil
	})
	fs.StringVar(&cfg.editWait, "edit-wait", "blocking", "how an edit waits for its Consul entry: blocking (blocking queries) or poll (a read every 5 ms)")
	fs.BoolVar(&cfg.writeDocs, "docs", true, "write docs/bench.md and docs/bench.svg")
	fs.BoolVar(&cfg.profiles, "profiles", false, "run the controllers with --profiling and save each cold start's heap profile, when it settled, next to its log")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if cfg.sizes, err = parseSizes(*sizes); err != nil {
		return nil, err
	}
	cfg.smoke = *sizes != defaultSizes
	switch {
	case *fastSizes != "":
		cfg.fastSizes, err = parseSizes(*fastSizes)
	case cfg.smoke:
		cfg.fastSizes = cfg.sizes
	default:
		cfg.fastSizes, err = parseSizes(defaultFastSizes)
	}
	if err != nil {
		return nil, err
	}
	if cfg.scenarios, err = parseScenarios(*scenarios); err != nil {
		return nil, err
	}
	if cfg.edits < 1 {
		return nil, errors.New("-edits must be at least 1")
	}
	if cfg.editWait != "blocking" && cfg.editWait != "poll" {
		return nil, fmt.Errorf("-edit-wait=%s: want blocking or poll", cfg.editWait)
	}
	return cfg, nil
}

func parseSizes(s string) ([]int, error) {
	var sizes []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-sizes: %q is not a positive number", part)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes), nil
}

func parseScenarios(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if !slices.Contains(allScenarios, part) {
			return nil, fmt.Errorf("-scenarios: unknown %q; choose from %s", part, strings.Join(allScenarios, ","))
		}
		out[part] = true
	}
	return out, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err = run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, cfg *config) error {
	var err error
	if cfg.root, err = testenv.RepoRoot(); err != nil {
		return err
	}
	started := time.Now()
	cfg.logDir = filepath.Join(cfg.root, "_output", "bench", started.Format("20060102-150405"))
	if err := os.MkdirAll(cfg.logDir, 0o755); err != nil {
		return err
	}
	binDir, err := os.MkdirTemp("", "bench-controller-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)
	// Checked before hours of measuring: docs/bench.md holds figures of main only.
	commit, notMain := testenv.CommitOfMain(cfg.root)
	if cfg.writeDocs && notMain != nil {
		return fmt.Errorf("refusing to write docs/bench.md from a build that is not a commit of main (run with -docs=false to measure it anyway): %w", notMain)
	}
	cfg.mainCommit = commit
	logf("building the controller")
	cfg.built = describe(cfg.root)
	if cfg.binary, err = testenv.BuildController(binDir); err != nil {
		return err
	}
	res := newResults(cfg)
	errs := runAll(ctx, cfg, res)
	table := renderTable(res.rows())
	targets := renderTargets(res.targets())
	fmt.Println()
	fmt.Print(table)
	fmt.Println()
	fmt.Print(targets)
	logf("controller logs: %s", cfg.logDir)
	if errs != nil {
		return fmt.Errorf("the docs were not written, since some scenarios failed: %w", errs)
	}
	if cfg.writeDocs {
		return writeDocs(cfg, res, table, targets, started)
	}
	return nil
}

// runAll runs each stack in turn; a stack that fails is reported and the others still
// run, so one failure does not lose the other figures.
func runAll(ctx context.Context, cfg *config, res *results) error {
	var errs []error
	try := func(name string, fn func() error) {
		if ctx.Err() != nil {
			return
		}
		if err := fn(); err != nil {
			logf("%s failed: %v", name, err)
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if cfg.scenarios["idle"] {
		try("idle", func() error { return runIdle(ctx, cfg, res) })
	}
	for _, n := range unionSizes(cfg.sizes, cfg.fastSizes) {
		if slices.Contains(cfg.sizes, n) && (cfg.scenarios["cold"] || cfg.scenarios["edit"] || cfg.scenarios["restart"] || cfg.scenarios["failover"]) {
			try(fmt.Sprintf("n%d", n), func() error { return runDefault(ctx, cfg, res, n) })
		}
		if n == cfg.sizes[0] && cfg.scenarios["cold-sd"] {
			try(fmt.Sprintf("n%d-sd", n), func() error { return runColdServiceDefaults(ctx, cfg, res, n) })
		}
		// The largest fast size runs once, with the Secrets when they are asked for.
		withSecrets := cfg.scenarios["secrets"] && n == largestFast(cfg)
		if slices.Contains(cfg.fastSizes, n) && cfg.scenarios["cold-fast"] && !withSecrets {
			try(fmt.Sprintf("n%d-fast", n), func() error { return runFast(ctx, cfg, res, n) })
		}
	}
	if cfg.scenarios["secrets"] {
		n := largestFast(cfg)
		try(fmt.Sprintf("n%d-secrets", n), func() error { return runSecrets(ctx, cfg, res, n) })
	}
	if cfg.scenarios["peer"] {
		try(fmt.Sprintf("n%d-peer", cfg.peerSize), func() error { return runPeer(ctx, cfg, res) })
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// unionSizes is both lists' sizes, sorted, each once.
func unionSizes(a, b []int) []int {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// withStack runs fn on a new stack and stops it; its server logs are kept if fn failed.
func withStack(ctx context.Context, cfg *config, name string, size layout, fn func(*stack) error) (err error) {
	s, err := newStack(ctx, cfg, name, size)
	if err != nil {
		return err
	}
	defer func() { s.close(err != nil) }()
	return fn(s)
}

func runIdle(ctx context.Context, cfg *config, res *results) error {
	return withStack(ctx, cfg, "idle", newLayout(0, 0), func(s *stack) error {
		var err error
		res.idle, err = s.idle(ctx)
		return err
	})
}

// runDefault is the stack at the controller's default QPS: the cold start, then on
// the converged system the edits, a restart and a failover, then the floors.
func runDefault(ctx context.Context, cfg *config, res *results, n int) error {
	return withStack(ctx, cfg, fmt.Sprintf("n%d", n), newLayout(n, 0), func(s *stack) error {
		// Without the cold start among the figures, the converged system the other
		// scenarios need is reached at the high QPS: minutes sooner at 5,000 routes.
		qps, burst := defaultQPS, defaultBurst
		if !cfg.scenarios["cold"] {
			qps, burst = fastQPS, fastBurst
		}
		ctl, cold, err := s.coldStart(ctx, "cold", float64(qps), burst)
		if err != nil {
			return err
		}
		if cfg.scenarios["edit"] {
			if res.edit[n], err = s.edits(ctx, ctl, cfg.edits); err != nil {
				return err
			}
		}
		if cfg.scenarios["restart"] {
			if ctl, res.restart[n], err = s.restart(ctx, ctl, defaultQPS, defaultBurst); err != nil {
				return err
			}
		}
		if cfg.scenarios["failover"] {
			if ctl, res.failover[n], err = s.failover(ctx, ctl, defaultQPS, defaultBurst); err != nil {
				return err
			}
		}
		if _, err := ctl.Terminate(30 * time.Second); err != nil {
			return err
		}
		if !cfg.scenarios["cold"] && !cfg.scenarios["edit"] {
			return nil
		}
		edits := 0
		if cfg.scenarios["edit"] {
			edits = cfg.edits
		}
		floor, err := s.runFloors(ctx, cold, edits)
		if err != nil {
			return err
		}
		if cfg.scenarios["cold"] {
			res.cold[n] = cold
		}
		if cfg.scenarios["edit"] {
			res.edit[n].floor = floor
		}
		return nil
	})
}

func runFast(ctx context.Context, cfg *config, res *results, n int) error {
	return withStack(ctx, cfg, fmt.Sprintf("n%d-fast", n), newLayout(n, 0), func(s *stack) error {
		ctl, cold, err := s.coldStart(ctx, "cold-fast", fastQPS, fastBurst)
		if err != nil {
			return err
		}
		if _, err := ctl.Terminate(30 * time.Second); err != nil {
			return err
		}
		if _, err := s.runFloors(ctx, cold, 0); err != nil {
			return err
		}
		res.fast[n] = cold
		return nil
	})
}

// runColdServiceDefaults is the cold start at the controller's default QPS with
// --manage-service-defaults and -v=2, the setting in which a user found entries
// created twice, on a stack of its own. It runs at the smallest QPS 20/30
// size alone (minutes of rate limiting at each larger one) and without floors: those
// of the plain cold start measure the same routes and Gateways.
func runColdServiceDefaults(ctx context.Context, cfg *config, res *results, n int) error {
	size := newLayout(n, 0)
	size.serviceDefaults = true
	return withStack(ctx, cfg, fmt.Sprintf("n%d-sd", n), size, func(s *stack) error {
		ctl, cold, err := s.coldStart(ctx, "cold-sd", defaultQPS, defaultBurst)
		if err != nil {
			return err
		}
		if _, err := ctl.Terminate(30 * time.Second); err != nil {
			return err
		}
		res.coldSD[n] = cold
		return nil
	})
}

func largestFast(cfg *config) int { return cfg.fastSizes[len(cfg.fastSizes)-1] }

// runSecrets is the fast cold start of the largest fast size with the unrelated
// Secrets present: what they cost the controller in memory. With cold-fast selected
// it is that size's fast cold start too, floors included: one 10,000-route stack
// instead of two.
func runSecrets(ctx context.Context, cfg *config, res *results, n int) error {
	return withStack(ctx, cfg, fmt.Sprintf("n%d-secrets", n), newLayout(n, cfg.secrets), func(s *stack) error {
		ctl, cold, err := s.coldStart(ctx, "secrets", fastQPS, fastBurst)
		if err != nil {
			return err
		}
		if _, err := ctl.Terminate(30 * time.Second); err != nil {
			return err
		}
		if cfg.scenarios["cold-fast"] {
			if _, err := s.runFloors(ctx, cold, 0); err != nil {
				return err
			}
			res.fast[n] = cold
		}
		res.secrets = cold
		return nil
	})
}

// describe names the checkout the controller was built from.
func describe(root string) string {
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "an unknown commit"
	}
	return strings.TrimSpace(string(out))
}
