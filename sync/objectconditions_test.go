package sync

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	configfake "github.com/consul-gateway-controller/consul-gateway-controller/api/client/fake"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
)

// The objects gauge counts what the caches hold of our classes: each GatewayClass,
// Gateway and ListenerSet once per condition, each route once per parent of ours;
// another controller's classes, Gateways and route parents are not counted.
func TestObjectConditionsCountsOurObjects(t *testing.T) {
	accepted := cond("Accepted", metav1.ConditionTrue, "Accepted", "ok")
	class := ourClass()
	class.Status.Conditions = []metav1.Condition{accepted}
	foreignClass := otherClass()
	foreignClass.Status.Conditions = []metav1.Condition{accepted}
	gw := gateway("infra", "gw", httpListener("http", 80, ""))
	gw.Status.Conditions = []metav1.Condition{accepted, cond("Programmed", metav1.ConditionFalse, "Pending", "waiting")}
	foreignGateway := gateway("infra", "theirs")
	foreignGateway.Spec.GatewayClassName = "other"
	foreignGateway.Status.Conditions = []metav1.Condition{accepted}
	set := listenerSet("infra", "extra", 1, httpListener("web", 8080, ""))
	set.Status.Conditions = []metav1.Condition{cond("Accepted", metav1.ConditionFalse, "NotAllowed", "no")}
	route := httpRoute("apps", "web", nil, parentRef("infra", "gw", ""), parentRef("infra", "gw", "http"))
	route.Status.Parents = []gatewayv1.RouteParentStatus{
		parentStatus(testController, "gw", accepted),
		parentStatus(testController, "gw", cond("Accepted", metav1.ConditionFalse, "NotAllowedByListeners", "no")),
		parentStatus("other.example.com/controller", "theirs", accepted),
	}
	c, _, _ := newTestController(t, class, foreignClass, gw, foreignGateway, set, route)

	want := map[metrics.ObjectCondition]int{
		{Kind: "GatewayClass", Condition: "Accepted", Status: "True", Reason: "Accepted"}:            1,
		{Kind: "Gateway", Condition: "Accepted", Status: "True", Reason: "Accepted"}:                 1,
		{Kind: "Gateway", Condition: "Programmed", Status: "False", Reason: "Pending"}:               1,
		{Kind: "ListenerSet", Condition: "Accepted", Status: "False", Reason: "NotAllowed"}:          1,
		{Kind: "HTTPRoute", Condition: "Accepted", Status: "True", Reason: "Accepted"}:               1,
		{Kind: "HTTPRoute", Condition: "Accepted", Status: "False", Reason: "NotAllowedByListeners"}: 1,
	}
	if diff := cmp.Diff(want, c.servedObjectConditions()); diff != "" {
		t.Errorf("objects by condition (-want +got):\n%s", diff)
	}
}

// BenchmarkObjectConditions is the cost of one scrape of the objects gauge over
// 1,000 Gateways and 10,000 HTTPRoutes: a walk of the caches, paid by the scrape and
// never by a sync.
func BenchmarkObjectConditions(b *testing.B) {
	gwClient := gatewayfake.NewSimpleClientset()
	inf := informers.New(kubefake.NewClientset(), gwClient, configfake.NewClientset(), 0)
	c, err := NewController(b.Context(), Config{
		ControllerName: testController, Capabilities: consullimits.Consul115, Informers: InformersOf(inf),
		GatewayClient: gwClient, Publisher: &recordingPublisher{},
	})
	if err != nil {
		b.Fatal(err)
	}
	accepted := cond("Accepted", metav1.ConditionTrue, "Accepted", "ok")
	add := func(store cache.Store, obj any) {
		if err := store.Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	add(inf.GatewayClasses.Informer().GetStore(), ourClass())
	for i := range 1000 {
		gw := gateway(fmt.Sprintf("ns-%d", i), "gw", httpListener("http", 80, ""))
		gw.Status.Conditions = []metav1.Condition{accepted, cond("Programmed", metav1.ConditionTrue, "Programmed", "ok")}
		add(inf.Gateways.Informer().GetStore(), gw)
		for j := range 10 {
			route := httpRoute(gw.Namespace, fmt.Sprintf("r-%d", j), nil, parentRef(gw.Namespace, "gw", ""))
			route.Status.Parents = []gatewayv1.RouteParentStatus{parentStatus(testController, "gw", accepted, cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", "ok"))}
			add(inf.Routes["HTTPRoute"].GetStore(), route)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(c.servedObjectConditions()); n != 4 {
			b.Fatalf("%d series, want 4", n)
		}
	}
}
