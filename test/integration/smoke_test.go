package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

func TestGatewayClassRoundTrip(t *testing.T) {
	ctx := t.Context()
	want := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-roundtrip"},
		Spec: gatewayv1.GatewayClassSpec{
			ControllerName: "example.com/smoke",
			Description:    new("created by the harness smoke test"),
		},
	}
	created, err := env.GatewayClient.GatewayV1().GatewayClasses().Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create GatewayClass: %v", err)
	}
	t.Cleanup(func() {
		_ = env.GatewayClient.GatewayV1().GatewayClasses().Delete(context.Background(), want.Name, metav1.DeleteOptions{})
	})
	if created.UID == "" || created.ResourceVersion == "" {
		t.Fatalf("the server did not fill uid and resourceVersion: %+v", created.ObjectMeta)
	}

	got, err := env.GatewayClient.GatewayV1().GatewayClasses().Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get GatewayClass: %v", err)
	}
	if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Errorf("spec read back differs (-sent +got):\n%s", diff)
	}
	if got.ResourceVersion != created.ResourceVersion {
		t.Errorf("resourceVersion changed without a write: created %q, read %q", created.ResourceVersion, got.ResourceVersion)
	}
	// The CRD's own defaulting and validation run on the real server: a class with an
	// invalid controllerName is refused.
	bad := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-invalid"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: "no-domain"},
	}
	if _, err := env.GatewayClient.GatewayV1().GatewayClasses().Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("creating a class with controllerName %q: got %v, want an Invalid error from the CRD schema", bad.Spec.ControllerName, err)
	}
}

func TestRBACAppliesToNamedUsers(t *testing.T) {
	client, err := gatewayclient.NewForConfig(env.Kube.Config("viewer"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.GatewayV1().GatewayClasses().List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a user with no RBAC listed GatewayClasses: got %v, want Forbidden", err)
	}
}

func TestAPIGatewayEntryStatusFromConsul(t *testing.T) {
	// Written as plain JSON: the current consul/api client encodes keys that Consul 1.15
	// refuses (see TestCurrentClientEncodingRefusedByConsul115).
	const name = "smoke-gateway"
	body := `{
  "Kind": "api-gateway",
  "Name": "smoke-gateway",
  "Meta": {"written-by": "smoke-test"},
  "Listeners": [{"Name": "http", "Port": 18080, "Protocol": "http"}]
}`
	if ok := putConfigEntryCAS(t, body, 0); !ok {
		t.Fatal("check-and-set with index 0 refused: the entry existed already")
	}
	t.Cleanup(func() {
		_, _ = env.ConsulClient.ConfigEntries().Delete(consulapi.APIGateway, name, nil)
	})
	// Check-and-set is proven on an entry kind no Consul controller touches. Consul
	// answers true without writing when an upsert changes nothing, whatever the index,
	// so the second write must differ to be refused.
	if !putConfigEntryCAS(t, `{"Kind": "service-defaults", "Name": "smoke-cas", "Protocol": "http"}`, 0) {
		t.Fatal("check-and-set with index 0 refused on a new service-defaults")
	}
	t.Cleanup(func() {
		_, _ = env.ConsulClient.ConfigEntries().Delete(consulapi.ServiceDefaults, "smoke-cas", nil)
	})
	if putConfigEntryCAS(t, `{"Kind": "service-defaults", "Name": "smoke-cas", "Protocol": "tcp"}`, 0) {
		t.Error("a second check-and-set with index 0 succeeded; it must fail once the entry exists")
	}

	// Consul computes the gateway's status asynchronously after the write.
	var got *consulapi.APIGatewayConfigEntry
	testenv.Eventually(t, 20*time.Second, "Consul computes an Accepted condition for the api-gateway entry", func(context.Context) error {
		raw, _, err := env.ConsulClient.ConfigEntries().Get(consulapi.APIGateway, name, nil)
		if err != nil {
			return err
		}
		got = raw.(*consulapi.APIGatewayConfigEntry)
		if conditionStatus(got.Status, "Accepted") == "" {
			return fmt.Errorf("none yet (entry %+v)", got)
		}
		return nil
	})

	wantListeners := []consulapi.APIGatewayListener{{Name: "http", Port: 18080, Protocol: "http"}}
	if diff := cmp.Diff(wantListeners, got.Listeners); diff != "" {
		t.Errorf("listeners read back differ (-sent +got):\n%s", diff)
	}
	if got.Meta["written-by"] != "smoke-test" {
		t.Errorf("meta read back = %v, want written-by=smoke-test", got.Meta)
	}
	if s := conditionStatus(got.Status, "Accepted"); s != consulapi.ConditionStatusTrue {
		t.Errorf("Consul's Accepted condition = %q, want True; status: %+v", s, got.Status)
	}
}

// TestCurrentClientEncodingRefusedByConsul115 records the client/server skew the Consul
// syncer must work around: consul/api encodes a listener's TLS block even when empty,
// and Consul 1.15 refuses the key. If this starts passing, the workaround can go.
func TestCurrentClientEncodingRefusedByConsul115(t *testing.T) {
	entry := &consulapi.APIGatewayConfigEntry{
		Kind:      consulapi.APIGateway,
		Name:      "smoke-skew",
		Listeners: []consulapi.APIGatewayListener{{Name: "http", Port: 18081, Protocol: "http"}},
	}
	_, _, err := env.ConsulClient.ConfigEntries().CAS(entry, 0, nil)
	t.Cleanup(func() {
		_, _ = env.ConsulClient.ConfigEntries().Delete(consulapi.APIGateway, entry.Name, nil)
	})
	if err == nil || !strings.Contains(err.Error(), `invalid config key "TLS"`) {
		t.Fatalf("writing with consul/api's own encoding: got %v, want Consul 1.15 to refuse the TLS key", err)
	}
}

// putConfigEntryCAS PUTs a config entry's JSON with check-and-set at index and returns
// Consul's verdict (true: written; false: the index did not match).
func putConfigEntryCAS(t *testing.T, body string, index uint64) bool {
	t.Helper()
	url := fmt.Sprintf("http://%s/v1/config?cas=%d", env.Consul.HTTPAddr(), index)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s: %s: %s", url, resp.Status, out)
	}
	return strings.TrimSpace(string(out)) == "true"
}

func TestConsulRestartComesBackEmpty(t *testing.T) {
	kv := env.ConsulClient.KV()
	if _, err := kv.Put(&consulapi.KVPair{Key: "smoke/restart", Value: []byte("before")}, nil); err != nil {
		t.Fatalf("put: %v", err)
	}
	if err := env.Consul.Stop(); err != nil {
		t.Fatalf("stop consul: %v", err)
	}
	if _, _, err := kv.Get("smoke/restart", nil); err == nil {
		t.Fatal("Consul answered while stopped")
	}
	if err := env.Consul.Start(); err != nil {
		t.Fatalf("restart consul: %v", err)
	}
	pair, _, err := kv.Get("smoke/restart", nil)
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if pair != nil {
		t.Errorf("a dev agent kept %q across a restart; tests rely on it coming back empty", pair.Value)
	}
}

func TestAPIServerRestartKeepsData(t *testing.T) {
	ctx := t.Context()
	class := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-restart"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: "example.com/smoke"},
	}
	created, err := env.GatewayClient.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		_ = env.GatewayClient.GatewayV1().GatewayClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
	if err := env.Kube.StopAPIServer(); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
	if err := env.Kube.StopEtcd(); err != nil {
		t.Fatalf("stop etcd: %v", err)
	}
	if _, err := env.GatewayClient.GatewayV1().GatewayClasses().Get(ctx, class.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("kube-apiserver answered while stopped")
	}
	if err := env.Kube.StartEtcd(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	if err := env.Kube.StartAPIServer(); err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	got, err := env.GatewayClient.GatewayV1().GatewayClasses().Get(ctx, class.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if got.UID != created.UID {
		t.Errorf("uid after restart = %s, want %s", got.UID, created.UID)
	}
	// The admin token still works and the CRDs are still served.
	if _, err := env.KubeClient.Discovery().ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String()); err != nil {
		t.Errorf("Gateway API not served after restart: %v", err)
	}
}

func conditionStatus(status consulapi.ConfigEntryStatus, condType string) consulapi.ConditionStatus {
	for _, c := range status.Conditions {
		if c.Type == condType {
			return c.Status
		}
	}
	return ""
}
