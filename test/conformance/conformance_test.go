package conformance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	gwconformance "sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/flags"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/conformance/judge"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The suite's own flags are registered too and, when given, override the options
// here: -run-test=<name> runs one test whatever features the GatewayClass claims.
var reportDir = flag.String("report-dir", "", "write the conformance report and its README into this directory (make conformance: docs/conformance)")

const (
	gatewayAPIVersion = "v1.6.3"
	className         = "consul"
	controllerName    = "consul-gateway-controller.github.io/gateway-controller"
	// configNamespace holds the GatewayConfig of the class: ClusterIP Services, since
	// the test cluster has no load balancer to give a Gateway an address.
	configNamespace = "consul-conformance"
)

// A run is one pass of the suite over the cluster: status only, or with every request
// answered from the xDS.
type run struct {
	name string
	// answer sets up what answers the suite's traffic, with the running responder: its
	// RoundTripper, and why the tests whose tcp helper dials by itself cannot run (""
	// when they can).
	answer func(t *testing.T, responder *testenv.Responder) (roundtripper.RoundTripper, string)
	// reportFile is where make conformance writes the suite's report of this run.
	reportFile string
}

// TestConformance is the status-only run: every test of the claimed features runs up to
// its first request (statusOnlyRoundTripper), so each status assertion is judged; the
// report in the suite's format is docs/conformance's main one.
func TestConformance(t *testing.T) {
	runSuite(t, &run{
		name: judge.StatusRun,
		answer: func(*testing.T, *testenv.Responder) (roundtripper.RoundTripper, string) {
			return statusOnlyRoundTripper{}, "status only"
		},
		reportFile: gatewayAPIVersion + "-report.yaml",
	})
}

// TestConformanceTraffic runs the suite again, with the requests answered from the
// configuration Consul serves the gateway pods (xdsRoundTripper), the suite's echo
// backends in Consul's catalog as mesh instances (testenv.MeshBackends), and the
// requests the configuration sends to the responder answered by the running responder.
// In the loopback-only network namespace, the tcp helper's own dials are answered from
// the same configuration (tcpFront).
func TestConformanceTraffic(t *testing.T) {
	runSuite(t, &run{
		name: judge.TrafficRun,
		answer: func(t *testing.T, responder *testenv.Responder) (roundtripper.RoundTripper, string) {
			backends, err := testenv.StartMeshBackends(t.Context(), env.KubeClient, env.ConsulClient, time.Second)
			if err != nil {
				fatalf(t, "mesh backends: %v", err)
			}
			rt := newXDSRoundTripper(t.Context(), backends, responder)
			front, err := startTCPFront(t.Context(), rt)
			if err != nil {
				return rt, err.Error()
			}
			t.Cleanup(func() {
				for _, failure := range front.Failures() {
					t.Logf("tcp front: %s", failure)
				}
			})
			return rt, ""
		},
		reportFile: gatewayAPIVersion + "-report-xds.yaml",
	})
}

// fatalf ends a run for a failure of its own, not of a suite test: the judge fails the
// run on the marked line whatever the tests did.
func fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatal(judge.ErrorMarker + fmt.Sprintf(format, args...))
}

// runSuite runs the suite's tests of the claimed profiles once, as r says, and keeps
// each test's outcome for the tables the judge writes. The tests known to fail run
// too: the judge holds each to its known failure.
func runSuite(t *testing.T, r *run) {
	log.SetLogger(zap.New(zap.WriteTo(os.Stdout), zap.UseDevMode(false)))
	ctx := t.Context()
	responder := startController(t, r.name)
	createClass(t, ctx)

	selfDialing, err := selfDialingTests()
	if err != nil {
		fatalf(t, "%v", err)
	}
	rt, tcpFront := r.answer(t, responder)
	skipWhy, ownTCP := map[string]string{}, map[string]bool{}
	for test, how := range selfDialing {
		if why := selfDialingSkip(r.name, how, tcpFront); why != "" {
			skipWhy[test] = why
		} else {
			ownTCP[test] = true
		}
	}
	reportFile := ""
	if *reportDir != "" {
		reportFile = r.reportFile
	}
	outcomes := results.start(r.name, reportFile, skipWhy, ownTCP)
	opts := options(t, sets.List(sets.KeySet(skipWhy)), outcomes.record)
	opts.RoundTripper = rt
	if rt, ok := rt.(*xdsRoundTripper); ok {
		outcomes.traffic = rt.traffic
	}

	cSuite, err := suite.NewConformanceTestSuite(opts)
	if err != nil {
		fatalf(t, "conformance suite: %v", err)
	}
	// The suite counts as running until Run's cleanup; a cleanup registered before Run
	// runs after it, with the results of every test.
	if *reportDir != "" {
		t.Cleanup(func() {
			report, err := cSuite.Report()
			if err != nil {
				fatalf(t, "report: %v", err)
			}
			writeReport(t, report, r.reportFile)
		})
	}
	cSuite.Setup(t, tests.ConformanceTests)
	if err := cSuite.Run(t, tests.ConformanceTests); err != nil {
		fatalf(t, "run: %v", err)
	}
}

func options(t *testing.T, skip []string, hook func(*testing.T, suite.ConformanceTest, *suite.ConformanceTestSuite)) suite.ConformanceOptions {
	t.Helper()
	cfg := env.Kube.Config(testenv.AdminUser)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		fatalf(t, "%v", err)
	}
	for _, install := range []func(*runtime.Scheme) error{v1alpha3.Install, v1alpha2.Install, xv1alpha1.Install, gatewayv1.Install, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := install(c.Scheme()); err != nil {
			fatalf(t, "%v", err)
		}
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fatalf(t, "%v", err)
	}
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     className,
			CleanupBaseResources: false,
			CleanupTestResources: true,
			TimeoutConfig:        config.DefaultTimeoutConfig(),
			SkipTests:            skip,
			// The second run reuses the first one's base manifests; the cluster goes
			// with the test binary.
			Mode:                "default",
			ConformanceProfiles: []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName, suite.GatewayTCPConformanceProfileName},
			Implementation: confv1.Implementation{
				Organization: "consul-gateway-controller",
				Project:      "consul-gateway-controller",
				URL:          "https://github.com/consul-gateway-controller/consul-gateway-controller",
				Version:      results.Commit,
				Contact:      []string{"https://github.com/consul-gateway-controller/consul-gateway-controller/issues"},
			},
		},
		ManifestFS: []fs.FS{&gwconformance.Manifests},
		Client:     c,
		Clientset:  clientset,
		RestConfig: cfg,
		Hook:       hook,
	}
	flags.ApplyAll(&opts.ConfigurableOptions)
	return opts
}

// responderService is the responder's Consul service in the runs: the name the
// chart and deploy/responder give it.
const responderService = "consul-gateway-controller-responder"

// startController starts the controller and the responder it sends to: the 500s of
// rules without a usable backend, and RequestRedirect, are the responder's answers. The
// responder registers itself in Consul's catalog; the controller writes its
// service-defaults, and the intentions that let each gateway reach it. Each run has
// its own responder instance (and log), named after the run.
func startController(t *testing.T, run string) *testenv.Responder {
	t.Helper()
	binary := testenv.ControllerBinary(t)
	responder := testenv.StartResponder(t, env.Consul, testenv.ResponderOptions{
		Binary: binary, Service: responderService, ServiceID: responderService + "-" + run, LogDir: env.LogDir(),
	})
	// The echo backends of the suite are plain Services: without service-defaults
	// saying http, Consul refuses http-routes to them.
	c := env.RunController(t, testenv.ControllerOptions{
		Binary: binary,
		Name:   "conformance",
		Args:   []string{"--leader-elect=false", "--manage-service-defaults", "--responder-service=" + responderService, "-v=2"},
	})
	t.Cleanup(func() {
		if _, err := c.Terminate(10 * time.Second); err != nil {
			t.Error(judge.ErrorMarker + "stop controller: " + err.Error())
		}
	})
	return responder
}

// createClass makes the suite's GatewayClass, ours, with a GatewayConfig that gives
// Gateways ClusterIP Services, and waits until it is accepted with its features.
func createClass(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := env.KubeClient.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: configNamespace}}, metav1.CreateOptions{}); ignoreExists(err) != nil {
		fatalf(t, "%v", err)
	}
	clusterIP := corev1.ServiceTypeClusterIP
	if _, err := env.ConfigClient.GatewayConfigs(configNamespace).Create(ctx, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Name: className},
		Spec:       v1alpha1.GatewayConfigSpec{Service: &v1alpha1.ServiceConfig{Type: &clusterIP}},
	}, metav1.CreateOptions{}); ignoreExists(err) != nil {
		fatalf(t, "%v", err)
	}
	ns := gatewayv1.Namespace(configNamespace)
	class := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: className},
		Spec: gatewayv1.GatewayClassSpec{
			ControllerName: controllerName,
			ParametersRef:  &gatewayv1.ParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: className, Namespace: &ns},
		},
	}
	classes := env.GatewayClient.GatewayV1().GatewayClasses()
	if _, err := classes.Create(ctx, class, metav1.CreateOptions{}); ignoreExists(err) != nil {
		fatalf(t, "%v", err)
	}
	testenv.Eventually(t, time.Minute, "GatewayClass "+className+" accepted with its supported features", func(ctx context.Context) error {
		got, err := classes.Get(ctx, className, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := testenv.ConditionTrue(got.Status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted)); err != nil {
			return err
		}
		if len(got.Status.SupportedFeatures) == 0 {
			return errors.New("no supported features")
		}
		return nil
	})
	got, err := classes.Get(ctx, className, metav1.GetOptions{})
	if err != nil {
		fatalf(t, "%v", err)
	}
	var claimed []string
	for _, f := range got.Status.SupportedFeatures {
		claimed = append(claimed, string(f.Name))
	}
	if diff := cmp.Diff(claimedFeatures, claimed); diff != "" {
		fatalf(t, "GatewayClass %s claims other features than the conformance runs were judged with (-pinned +claimed):\n%s", className, diff)
	}
}

// claimedFeatures are the features the GatewayClass claims against Consul 1.15, sorted
// as its status lists them. A claim is a promise that the feature's tests pass: a
// feature is added here once its tests passed in both runs, and a change of the claims
// changes this list, the tables and the known failures together.
var claimedFeatures = []string{
	"Gateway",
	"GatewayAddressEmpty",
	"GatewayInfrastructure",
	"GatewayPort8080",
	"HTTPRouteBackendRequestHeaderModification",
	"HTTPRouteDestinationPortMatching",
	"HTTPRouteNamedRouteRule",
	"HTTPRouteParentRefPort",
	"HTTPRouteQueryParamMatching",
	"ListenerSet",
	"ReferenceGrant",
}

// ignoreExists: the second run finds the first one's namespace, config and class.
func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// writeReport writes the suite's report of a run into the report directory.
func writeReport(t *testing.T, report *confv1.ConformanceReport, file string) {
	t.Helper()
	if err := os.MkdirAll(*reportDir, 0o755); err != nil {
		fatalf(t, "%v", err)
	}
	// The report's date and its order of profiles would change every run; the
	// repository keeps them stable.
	report.Date = ""
	slices.SortFunc(report.ProfileReports, func(a, b confv1.ProfileReport) int { return strings.Compare(a.Name, b.Name) })
	data, err := yaml.Marshal(report)
	if err != nil {
		fatalf(t, "%v", err)
	}
	path := filepath.Join(*reportDir, file)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		fatalf(t, "%v", err)
	}
	fmt.Printf("conformance report: %s\n", path)
}
