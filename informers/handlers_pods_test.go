package informers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// selectingService is a Service of the world's kind with a pod selector.
func selectingService(namespace, name string, selector map[string]string) *corev1.Service {
	svc := testenv.Service(namespace, name, 80)
	svc.Spec.Selector = selector
	return svc
}

// TestPodEventHandlers: an injected pod's change re-judges the routes whose backend
// it may rename or join. On top of the world: apps/web-svc selects app=web, data/db
// selects app=db, and data/db-1 (app=db) registers as "admin-svc", the name of a
// Service infra/admin names.
func TestPodEventHandlers(t *testing.T) {
	web := map[string]string{"app": "web"}
	db := map[string]string{"app": "db"}
	dbPod := testenv.InjectedPod("data", "db-1", db, "admin-svc", 80)
	cases := []eventCase{
		{
			name:  "pod of a routed Service",
			event: func(h eventHandlers) { h.pods.OnAdd(testenv.InjectedPod("apps", "web-1", web, "", 80), false) },
			want:  enqueued{HTTPRoutes: []string{"apps/web"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			// The routes naming db (its pods' Service) and admin-svc (a Service of the
			// name the pod registers under) are enqueued.
			name:  "pod registering under another Service's name",
			event: func(h eventHandlers) { h.pods.OnDelete(tombstone(dbPod)) },
			want:  enqueued{HTTPRoutes: []string{"apps/web", "infra/admin"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "pod update leaving resolution alone",
			event: func(h eventHandlers) {
				updated := resynced(dbPod)
				updated.Status.PodIP = "10.0.0.7" // the pod became ready: not read
				updated.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				h.pods.OnUpdate(dbPod, updated)
			},
			want: enqueued{},
		},
		{
			// A pod of no Service that takes the name "web-svc": the routes naming
			// web-svc, and those whose pods register as "admin-svc" before.
			name: "pod annotation changed",
			event: func(h eventHandlers) {
				updated := resynced(dbPod)
				updated.Annotations[backends.ServiceAnnotation] = "web-svc"
				h.pods.OnUpdate(dbPod, updated)
			},
			want: enqueued{HTTPRoutes: []string{"apps/web", "infra/admin"}, TCPRoutes: []string{"apps/db"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name: "pod no Service selects and no name",
			event: func(h eventHandlers) {
				h.pods.OnAdd(testenv.InjectedPod("apps", "lonely", map[string]string{"app": "none"}, "", 80), false)
			},
			want: enqueued{},
		},
		{
			// data/db's pods register as admin-svc: a change of data/db re-judges the
			// routes naming admin-svc as well as those naming db.
			name:  "Service whose pods register under another name",
			event: func(h eventHandlers) { h.services.OnAdd(selectingService("data", "db", db), false) },
			want:  enqueued{HTTPRoutes: []string{"apps/web", "infra/admin"}, TCPRoutes: []string{"apps/db"}},
		},
	}
	runEventCases(t, cases, []runtime.Object{
		selectingService("apps", "web-svc", web),
		selectingService("data", "db", db),
		dbPod,
	}...)
}

// TestMeshServiceEventHandlers: a MeshService's change re-judges the routes naming it,
// with its group and kind, in their backendRefs; a Service of the same name does not
// count, nor does a MeshService of the same name elsewhere.
func TestMeshServiceEventHandlers(t *testing.T) {
	meshRef := gatewayv1.BackendObjectReference{
		Group: new(gatewayv1.Group(gatewayapi.MeshServiceGroup)), Kind: new(gatewayv1.Kind(gatewayapi.MeshServiceKind)), Name: "billing",
	}
	meshService := func(namespace, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(gatewayapi.MeshServiceGroup + "/" + gatewayapi.MeshServiceVersion)
		u.SetKind(gatewayapi.MeshServiceKind)
		u.SetNamespace(namespace)
		u.SetName(name)
		return u
	}
	cases := []eventCase{
		{
			name:  "MeshService a route names",
			event: func(h eventHandlers) { h.meshServices.OnAdd(meshService("apps", "billing"), false) },
			want:  enqueued{HTTPRoutes: []string{"apps/vm"}},
		},
		{
			name:  "MeshService of the name in another namespace",
			event: func(h eventHandlers) { h.meshServices.OnDelete(tombstone(meshService("team", "billing"))) },
			want:  enqueued{},
		},
		{
			name:  "Service of the MeshService's name",
			event: func(h eventHandlers) { h.services.OnAdd(testenv.Service("apps", "billing"), false) },
			want:  enqueued{},
		},
	}
	runEventCases(t, cases, testenv.HTTPRoute("apps", "vm", nil, meshRef))
}
