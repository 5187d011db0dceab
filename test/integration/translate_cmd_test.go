package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/cli"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestTranslateCommandAgreesWithTheController: the translate command, given the
// objects a running controller judged (their status removed), prints the statuses the
// controller wrote and the entries it wrote to Consul. Only what needs Consul's
// verdict differs: Programmed and ConsulAccepted, which translate leaves pending.
func TestTranslateCommandAgreesWithTheController(t *testing.T) {
	suffix := utilrand.String(5)
	ns, class := "translate-"+suffix, "translate-"+suffix
	controller := gatewayv1.GatewayController("example.com/translate-" + suffix)
	env.Create(t, testenv.Namespace(ns, nil))
	env.Create(t, testenv.GatewayClass(class, controller))
	cert, key := testenv.SelfSigned(t, "secure.example.com")
	env.Create(t, testenv.TLSSecret(ns, "tls", cert, key))
	env.Create(t, testenv.Service(ns, "web-"+suffix, 8080))
	env.Create(t, testenv.Service(ns, "db-"+suffix, 5432))
	env.Create(t, testenv.Gateway(ns, "edge", class,
		testenv.HTTPListener("http", 8080),
		testenv.HTTPSListener("https", 8443, gatewayv1.SecretObjectReference{Name: "tls"}),
		testenv.HTTPSListener("nocert", 9443, gatewayv1.SecretObjectReference{Name: "missing"}),
		gatewayv1.Listener{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType},
	))
	edge := func(section gatewayv1.SectionName) []gatewayv1.ParentReference {
		ref := gatewayv1.ParentReference{Name: "edge"}
		if section != "" {
			ref.SectionName = &section
		}
		return []gatewayv1.ParentReference{ref}
	}
	web := testenv.HTTPRoute(ns, "web", edge(""), testenv.Backend("web-"+suffix, 8080))
	web.Spec.Hostnames = []gatewayv1.Hostname{"web.example.com"}
	env.Create(t, web)
	env.Create(t, testenv.HTTPRoute(ns, "broken", edge("http"), testenv.Backend("missing-"+suffix, 8080)))
	env.Create(t, testenv.TCPRoute(ns, "db", edge("tcp"), testenv.Backend("db-"+suffix, 5432)))
	env.Create(t, testenv.GRPCRoute(ns, "rpc", edge("http")))

	// An entry prefix of its own: the blackhole's service-defaults is named after the
	// prefix alone, and another test's controller (TestMeshServiceBackend's) may hold
	// the unprefixed one in the shared Consul, which this one would find foreign.
	flags := []string{"--controller-name=" + string(controller), "--cluster-id=translate-" + suffix, "--consul-entry-prefix=t" + suffix + "-"}
	p := env.RunController(t, testenv.ControllerOptions{Name: "translate-" + suffix, Args: append(flags, "--deploy-gateways=false", "--leader-elect=false")})
	routes := []struct {
		kind gatewayv1.Kind
		name string
	}{{"HTTPRoute", "web"}, {"HTTPRoute", "broken"}, {"TCPRoute", "db"}}
	testenv.Eventually(t, 60*time.Second, "Consul's verdict on every route and the Gateway", func(ctx context.Context) error {
		if !p.Running() {
			t.Fatalf("the controller exited: %v\n%s", p.ExitError(), testenv.Tail(p.Output(), 30))
		}
		gw, err := env.GatewayClient.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(gw.Status.Conditions, "Programmed"); c == nil || c.Reason == "Pending" {
			return fmt.Errorf("Gateway Programmed: %v", c)
		}
		for _, r := range routes {
			obj, err := getRoute(ctx, r.kind, ns, r.name)
			if err != nil {
				return err
			}
			if !hasConsulVerdict(routeParents(obj), controller) {
				return fmt.Errorf("%s %s: no Consul verdict yet", r.kind, r.name)
			}
		}
		return nil
	})
	// Settled: the controller synced every key and stays idle.
	testenv.Settled(t, p, "gateway", "httproute", "tcproute", "consul")

	live := liveObjects(t, ns, class)
	var input bytes.Buffer
	for _, obj := range live {
		input.WriteString("---\n")
		input.Write(withoutStatus(t, obj))
	}
	// --show-secrets: the inline-certificate entry is compared with Consul's, key and all.
	cmd := exec.Command(testenv.ControllerBinary(t), append([]string{"translate", "-o", "json", "--show-secrets"}, flags...)...)
	cmd.Stdin = &input
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("consul-gateway-controller translate: %v\n%s", err, stderr.String())
	}
	var result cli.Result
	if err := json.Unmarshal(stdout.Bytes(), &result); err != nil {
		t.Fatal(err)
	}

	// Statuses: the same conditions (reason and message included) but those that carry
	// Consul's verdict; the same attachedRoutes.
	judged := 0
	for _, obj := range live {
		kind, name := obj.GetObjectKind().GroupVersionKind().Kind, obj.(metav1.Object).GetName()
		want := comparableStatus(t, obj, controller)
		if want == nil {
			continue
		}
		i := slices.IndexFunc(result.Objects, func(o cli.ObjectStatus) bool { return string(o.Kind) == kind && o.Name == name })
		if i < 0 {
			t.Errorf("translate printed no status for %s %s", kind, name)
			continue
		}
		got := comparableStatusOf(t, result.Objects[i].Status, kind, controller)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s %s: translate's status differs from the controller's (-controller +translate):\n%s", kind, name, diff)
		}
		judged++
	}
	if judged != 6 { // the class, the Gateway, four routes
		t.Errorf("compared %d statuses, want 6", judged)
	}

	// Entries: each is the one Consul holds, but for what Consul adds; and Consul holds
	// no entry of this controller's that translate does not print.
	if len(result.Entries) == 0 {
		t.Fatal("translate printed no entries")
	}
	printed := map[string]bool{}
	for _, raw := range result.Entries {
		want, err := consulapi.DecodeConfigEntryFromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		printed["consul "+want.GetKind()+"/"+want.GetName()] = true
		held, _, err := env.ConsulClient.ConfigEntries().Get(want.GetKind(), want.GetName(), nil)
		if err != nil {
			t.Errorf("%s %s: translate prints it, Consul does not hold it: %v", want.GetKind(), want.GetName(), err)
			continue
		}
		if diff := cmp.Diff(string(normalEntry(t, raw)), string(entryJSON(t, held))); diff != "" {
			t.Errorf("%s %s: translate's entry differs from Consul's (-translate +consul):\n%s", want.GetKind(), want.GetName(), diff)
		}
	}
	held, err := testenv.ConsulEntryVersions(t.Context(), env.ConsulClient, testenv.OwnedBy(string(controller), "translate-"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for key := range held {
		// The service-intentions follow the discovery chains Consul compiles, which
		// translate, with no Consul, cannot know: it prints none.
		if strings.HasPrefix(key, "consul "+consulapi.ServiceIntentions+"/") {
			continue
		}
		compared++
		if !printed[key] {
			t.Errorf("Consul holds the controller's %s, which translate does not print", strings.TrimPrefix(key, "consul "))
		}
	}
	if compared != len(result.Entries) {
		t.Errorf("Consul holds %d entries of the controller's besides service-intentions, translate prints %d", compared, len(result.Entries))
	}
}

func hasConsulVerdict(parents []gatewayv1.RouteParentStatus, controller gatewayv1.GatewayController) bool {
	for _, p := range parents {
		if p.ControllerName != controller {
			continue
		}
		for _, c := range p.Conditions {
			if strings.HasSuffix(c.Type, "/ConsulAccepted") && c.Reason != "Pending" {
				return true
			}
			if c.Type == string(gatewayv1.RouteConditionResolvedRefs) && c.Status == metav1.ConditionFalse {
				return true // a route all of whose rules are refused gets no entry
			}
		}
	}
	return false
}

func getRoute(ctx context.Context, kind gatewayv1.Kind, ns, name string) (runtime.Object, error) {
	gw := env.GatewayClient.GatewayV1()
	switch kind {
	case "HTTPRoute":
		return gw.HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
	case "TCPRoute":
		return gw.TCPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
	case "GRPCRoute":
		return gw.GRPCRoutes(ns).Get(ctx, name, metav1.GetOptions{})
	}
	return nil, fmt.Errorf("no getter for %s", kind)
}

func routeParents(obj runtime.Object) []gatewayv1.RouteParentStatus {
	switch r := obj.(type) {
	case *gatewayv1.HTTPRoute:
		return r.Status.Parents
	case *gatewayv1.TCPRoute:
		return r.Status.Parents
	case *gatewayv1.GRPCRoute:
		return r.Status.Parents
	}
	return nil
}

// liveObjects reads the test's objects from the API server, with their kinds set.
func liveObjects(t *testing.T, ns, class string) []runtime.Object {
	t.Helper()
	ctx, gw, core, get := t.Context(), env.GatewayClient.GatewayV1(), env.KubeClient.CoreV1(), metav1.GetOptions{}
	var objs []runtime.Object
	add := func(gvk schema.GroupVersionKind, obj runtime.Object, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		objs = append(objs, obj)
	}
	v1 := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: kind}
	}
	c, err := gw.GatewayClasses().Get(ctx, class, get)
	add(v1("GatewayClass"), c, err)
	g, err := gw.Gateways(ns).Get(ctx, "edge", get)
	add(v1("Gateway"), g, err)
	for _, name := range []string{"web", "broken"} {
		r, err := gw.HTTPRoutes(ns).Get(ctx, name, get)
		add(v1("HTTPRoute"), r, err)
	}
	tcp, err := gw.TCPRoutes(ns).Get(ctx, "db", get)
	add(v1("TCPRoute"), tcp, err)
	rpc, err := gw.GRPCRoutes(ns).Get(ctx, "rpc", get)
	add(v1("GRPCRoute"), rpc, err)
	secrets, err := core.Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range secrets.Items {
		add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, &secrets.Items[i], nil)
	}
	services, err := core.Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range services.Items {
		add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, &services.Items[i], nil)
	}
	return objs
}

// withoutStatus is obj as YAML without its status.
func withoutStatus(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	delete(u, "status")
	out, err := yaml.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// verdictCondition reports whether a condition carries Consul's verdict, which translate leaves pending.
func verdictCondition(condType string) bool {
	return condType == "Programmed" || strings.HasSuffix(condType, "/ConsulAccepted")
}

// statusForComparison is a status's conditions (type, status, reason, message) but
// Consul's verdicts, per object or per parent or listener, and attachedRoutes.
type statusForComparison map[string][]string

// comparableStatus reads obj's status; nil for kinds without one.
func comparableStatus(t *testing.T, obj runtime.Object, controller gatewayv1.GatewayController) statusForComparison {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "Secret" || kind == "Service" {
		return nil
	}
	return comparableStatusOf(t, u["status"], kind, controller)
}

func comparableStatusOf(t *testing.T, status any, kind string, controller gatewayv1.GatewayController) statusForComparison {
	t.Helper()
	data, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Conditions []metav1.Condition `json:"conditions"`
		Listeners  []struct {
			Name           string             `json:"name"`
			AttachedRoutes int32              `json:"attachedRoutes"`
			Conditions     []metav1.Condition `json:"conditions"`
		} `json:"listeners"`
		Parents []gatewayv1.RouteParentStatus `json:"parents"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	out := statusForComparison{}
	conds := func(key string, cs []metav1.Condition) {
		for _, c := range cs {
			if !verdictCondition(c.Type) {
				out[key] = append(out[key], fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
			}
		}
		slices.Sort(out[key])
	}
	conds(kind, s.Conditions)
	for _, l := range s.Listeners {
		conds("listener "+l.Name, l.Conditions)
		out["listener "+l.Name] = append(out["listener "+l.Name], fmt.Sprintf("attachedRoutes=%d", l.AttachedRoutes))
	}
	for _, p := range s.Parents {
		if p.ControllerName == controller {
			section := ""
			if p.ParentRef.SectionName != nil {
				section = string(*p.ParentRef.SectionName)
			}
			conds(fmt.Sprintf("parent %s/%s", p.ParentRef.Name, section), p.Conditions)
		}
	}
	return out
}

// entryJSON is entry as the controller writes it, without what Consul adds (see
// normalEntry).
func entryJSON(t *testing.T, entry consulapi.ConfigEntry) []byte {
	t.Helper()
	data, err := json.Marshal(consul.Compact(entry))
	if err != nil {
		t.Fatal(err)
	}
	return normalEntry(t, data)
}

// normalEntry is an encoded entry without its status and indexes, which Consul adds,
// nor the empty TransparentProxy Consul gives service-defaults, with its keys sorted.
func normalEntry(t *testing.T, data []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Status", "CreateIndex", "ModifyIndex"} {
		delete(m, k)
	}
	if tp, ok := m["TransparentProxy"].(map[string]any); ok && len(tp) == 0 {
		delete(m, "TransparentProxy")
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
