package sync

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// serviceListerOf returns a Service lister over exactly the given Services.
func serviceListerOf(t *testing.T, services ...*corev1.Service) corelisters.ServiceLister {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range services {
		if err := indexer.Add(s); err != nil {
			t.Fatalf("seed Service %s/%s: %v", s.Namespace, s.Name, err)
		}
	}
	return corelisters.NewServiceLister(indexer)
}

// testService builds a ClusterIP Service with the given ports.
func testService(namespace, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports},
	}
}

// failingServiceLister fails every read, to check that cache errors are passed on.
type failingServiceLister struct{ err error }

func (f failingServiceLister) List(labels.Selector) ([]*corev1.Service, error) { return nil, f.err }

func (f failingServiceLister) Services(string) corelisters.ServiceNamespaceLister {
	return failingServiceNamespaceLister(f)
}

type failingServiceNamespaceLister struct{ err error }

func (f failingServiceNamespaceLister) List(labels.Selector) ([]*corev1.Service, error) {
	return nil, f.err
}

func (f failingServiceNamespaceLister) Get(string) (*corev1.Service, error) { return nil, f.err }

func TestResolveBackendRef(t *testing.T) {
	web := testService("apps", "web", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	h2c := testService("apps", "grpc", corev1.ServicePort{Port: 9000, AppProtocol: new("kubernetes.io/h2c")})
	ws := testService("apps", "chat", corev1.ServicePort{Port: 80, AppProtocol: new("kubernetes.io/WS")})
	plainHTTP := testService("apps", "plain", corev1.ServicePort{Port: 80, AppProtocol: new("http")})
	external := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ext"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", Ports: []corev1.ServicePort{{Port: 80}}},
	}
	otherNS := testService("backend", "db", corev1.ServicePort{Port: 5432})
	grant := refGrant("backend", "routes",
		[]gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "TCPRoute", Namespace: "apps"}},
		[]gatewayv1.ReferenceGrantTo{{Kind: "Service"}})

	tests := []struct {
		name      string
		routeKind gatewayv1.Kind
		ref       gatewayv1.BackendObjectReference
		want      *backendProblem
	}{
		{
			name:      "defaults resolve to a local Service",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "web", Port: new(gatewayv1.PortNumber(80))},
		},
		{
			name:      "explicit core group and Service kind",
			routeKind: "HTTPRoute",
			ref: gatewayv1.BackendObjectReference{Group: new(gatewayv1.Group("")), Kind: new(gatewayv1.Kind("Service")),
				Name: "web", Namespace: new(gatewayv1.Namespace("apps")), Port: new(gatewayv1.PortNumber(80))},
		},
		{
			name:      "another kind",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Kind: new(gatewayv1.Kind("ConfigMap")), Name: "web", Port: new(gatewayv1.PortNumber(80))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonInvalidKind,
				Message: "backendRef apps/web has kind ConfigMap, but only core Services are supported"},
		},
		{
			name:      "Service kind in another group",
			routeKind: "HTTPRoute",
			ref: gatewayv1.BackendObjectReference{Group: new(gatewayv1.Group("multicluster.x-k8s.io")), Kind: new(gatewayv1.Kind("ServiceImport")),
				Name: "web", Port: new(gatewayv1.PortNumber(80))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonInvalidKind,
				Message: "backendRef apps/web has kind ServiceImport.multicluster.x-k8s.io, but only core Services are supported"},
		},
		{
			name:      "core group spelled core is not core",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Group: new(gatewayv1.Group("core")), Name: "web", Port: new(gatewayv1.PortNumber(80))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonInvalidKind,
				Message: "backendRef apps/web has kind Service.core, but only core Services are supported"},
		},
		{
			name:      "kind is checked before the grant",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Kind: new(gatewayv1.Kind("Pod")), Name: "x", Namespace: new(gatewayv1.Namespace("elsewhere"))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonInvalidKind,
				Message: "backendRef elsewhere/x has kind Pod, but only core Services are supported"},
		},
		{
			name:      "cross namespace with grant for the route kind",
			routeKind: "TCPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "db", Namespace: new(gatewayv1.Namespace("backend")), Port: new(gatewayv1.PortNumber(5432))},
		},
		{
			name:      "cross namespace, grant is for another route kind",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "db", Namespace: new(gatewayv1.Namespace("backend")), Port: new(gatewayv1.PortNumber(5432))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonRefNotPermitted,
				Message: "backendRef backend/db is not permitted: no ReferenceGrant in namespace backend allows HTTPRoute from namespace apps to refer to it"},
		},
		{
			name:      "grant is checked before existence",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "missing", Namespace: new(gatewayv1.Namespace("secret-ns")), Port: new(gatewayv1.PortNumber(80))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonRefNotPermitted,
				Message: "backendRef secret-ns/missing is not permitted: no ReferenceGrant in namespace secret-ns allows HTTPRoute from namespace apps to refer to it"},
		},
		{
			name:      "Service does not exist",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "missing", Port: new(gatewayv1.PortNumber(80))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonBackendNotFound,
				Message: "backendRef apps/missing refers to a Service that does not exist"},
		},
		{
			name:      "port missing",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "web"},
			want: &backendProblem{Reason: gatewayv1.RouteReasonBackendNotFound,
				Message: "backendRef apps/web has no port, but a Service backendRef needs one"},
		},
		{
			name:      "target port is not a service port",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "web", Port: new(gatewayv1.PortNumber(8080))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonBackendNotFound,
				Message: "backendRef apps/web names port 8080, which the Service does not have"},
		},
		{
			name:      "ExternalName Service",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "ext", Port: new(gatewayv1.PortNumber(80))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonInvalidKind,
				Message: "backendRef apps/ext refers to an ExternalName Service, which is not supported"},
		},
		{
			name:      "h2c backend for an HTTPRoute",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "grpc", Port: new(gatewayv1.PortNumber(9000))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonUnsupportedProtocol,
				Message: "backendRef apps/grpc port 9000 has appProtocol kubernetes.io/h2c, which Consul's API gateway cannot use for a HTTPRoute"},
		},
		{
			name:      "appProtocol compared case-insensitively",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "chat", Port: new(gatewayv1.PortNumber(80))},
			want: &backendProblem{Reason: gatewayv1.RouteReasonUnsupportedProtocol,
				Message: "backendRef apps/chat port 80 has appProtocol kubernetes.io/WS, which Consul's API gateway cannot use for a HTTPRoute"},
		},
		{
			name:      "http appProtocol for an HTTPRoute",
			routeKind: "HTTPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "plain", Port: new(gatewayv1.PortNumber(80))},
		},
		{
			name:      "any appProtocol for a TCPRoute",
			routeKind: "TCPRoute",
			ref:       gatewayv1.BackendObjectReference{Name: "grpc", Port: new(gatewayv1.PortNumber(9000))},
		},
	}
	services := serviceListerOf(t, web, h2c, ws, plainHTTP, external, otherNS)
	grants := grantListerOf(t, grant)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := resolveBackendRef(tt.routeKind, "apps", tt.ref, services, grants, consulServices{})
			if err != nil {
				t.Fatalf("resolveBackendRef: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("resolveBackendRef (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveBackendRefListerErrors(t *testing.T) {
	boom := errors.New("cache broken")
	tests := []struct {
		name     string
		ref      gatewayv1.BackendObjectReference
		services corelisters.ServiceLister
	}{
		{
			name:     "Service lister error",
			ref:      gatewayv1.BackendObjectReference{Name: "web", Port: new(gatewayv1.PortNumber(80))},
			services: failingServiceLister{err: boom},
		},
		{
			name:     "ReferenceGrant lister error",
			ref:      gatewayv1.BackendObjectReference{Name: "web", Namespace: new(gatewayv1.Namespace("backend")), Port: new(gatewayv1.PortNumber(80))},
			services: serviceListerOf(t),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := resolveBackendRef("HTTPRoute", "apps", tt.ref, tt.services, failingGrantLister{err: boom}, consulServices{})
			if !errors.Is(err, boom) {
				t.Errorf("error = %v, want %v", err, boom)
			}
			if got != nil {
				t.Errorf("problem = %+v, want nil with an error", got)
			}
		})
	}
}

// Without namespace mirroring every Service "web" whose pods consul-k8s registers is
// the Consul service "web": where another namespace's pods register it too, a route
// to its own "web" reaches only its own namespace's instances, grant or no grant. A
// Service of another namespace that registers no pod (no selector, no pods, ignored)
// changes nothing: Consul holds no instance of it.
func TestSharedConsulName(t *testing.T) {
	selector := map[string]string{"app": "web"}
	service := func(namespace string) *corev1.Service {
		svc := testService(namespace, "web", corev1.ServicePort{Port: 80})
		svc.Spec.Selector = selector
		return svc
	}
	pod := func(namespace string) *corev1.Pod { return testenv.InjectedPod(namespace, "web-1", selector, "", 80) }
	apps, granted, foreign := service("apps"), service("granted"), service("payments")
	selectorless := testService("payments", "web", corev1.ServicePort{Port: 80})
	ignored := service("payments")
	ignored.Labels = map[string]string{backends.ServiceIgnoreLabel: "true"}
	grants := grantListerOf(t, refGrant("granted", "routes",
		[]gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}},
		[]gatewayv1.ReferenceGrantTo{{Kind: "Service"}}))
	ref := gatewayv1.BackendObjectReference{Name: "web", Port: new(gatewayv1.PortNumber(80))}
	own := resolvedBackend{Port: 80, Service: "web"}
	narrowed := resolvedBackend{Port: 80, Service: "web", Narrowed: true, NarrowedBecause: sharedWithOtherNamespaces}
	outside := resolvedBackend{Port: 80, Service: "web", Narrowed: true, NarrowedBecause: sharedOutsideKubernetes}

	tests := []struct {
		name     string
		shared   bool
		services []*corev1.Service
		pods     []*corev1.Pod
		catalog  catalogOf
		want     resolvedBackend
	}{
		{name: "instances registered outside Kubernetes too", shared: true,
			services: []*corev1.Service{apps}, pods: []*corev1.Pod{pod("apps")}, catalog: catalogOf{"web", "outside:web"}, want: outside},
		{name: "only instances outside Kubernetes, a Service without a selector", shared: true,
			services: []*corev1.Service{testService("apps", "web", corev1.ServicePort{Port: 80})}, catalog: catalogOf{"web", "outside:web"}, want: outside},
		{name: "instances outside Kubernetes, names mirrored", shared: false,
			services: []*corev1.Service{apps}, pods: []*corev1.Pod{pod("apps")}, catalog: catalogOf{"web", "outside:web"}, want: own},
		{name: "registered in an ungranted namespace", shared: true,
			services: []*corev1.Service{apps, granted, foreign}, pods: []*corev1.Pod{pod("apps"), pod("granted"), pod("payments")}, want: narrowed},
		{name: "registered in a granted namespace only: still only the route's own", shared: true,
			services: []*corev1.Service{apps, granted}, pods: []*corev1.Pod{pod("apps"), pod("granted")}, want: narrowed},
		{name: "registered in another namespace, ours has no pods", shared: true,
			services: []*corev1.Service{apps, foreign}, pods: []*corev1.Pod{pod("payments")}, want: narrowed},
		{name: "names not shared (mirroring)", shared: false,
			services: []*corev1.Service{apps, foreign}, pods: []*corev1.Pod{pod("apps"), pod("payments")}, want: own},
		{name: "another namespace's Service without a selector", shared: true,
			services: []*corev1.Service{apps, selectorless}, pods: []*corev1.Pod{pod("apps")}, want: own},
		{name: "another namespace's Service without pods", shared: true,
			services: []*corev1.Service{apps, foreign}, pods: []*corev1.Pod{pod("apps")}, want: own},
		{name: "another namespace's ignored Service", shared: true,
			services: []*corev1.Service{apps, ignored}, pods: []*corev1.Pod{pod("apps"), pod("payments")}, want: own},
		{name: "another namespace's Service without pods, ours without pods either", shared: true,
			services: []*corev1.Service{apps, foreign}, want: own},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := consulServicesOf(t, tt.shared, tt.services, tt.pods)
			if tt.catalog != nil {
				names.catalog = tt.catalog
			}
			got, problem, err := resolveBackendRef("HTTPRoute", "apps", ref, names.lister(), grants, names.consulServices)
			checkResolution(t, got, problem, err, tt.want, "")
		})
	}
}

// A backend is the Consul service its injected pods register under (their
// connect-service annotation), and that name is shared like a Service's own.
func TestRenamedBackend(t *testing.T) {
	selector := map[string]string{"app": "web"}
	web := testService("apps", "web", corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080)})
	web.Spec.Selector = selector
	other := testService("payments", "billing", corev1.ServicePort{Port: 80})
	other.Spec.Selector = map[string]string{"app": "billing"}
	ref := gatewayv1.BackendObjectReference{Name: "web", Port: new(gatewayv1.PortNumber(80))}
	grants := grantListerOf(t)

	tests := []struct {
		name       string
		shared     bool
		pods       []*corev1.Pod
		catalog    catalogOf // nil: every service held
		want       resolvedBackend
		wantReason gatewayv1.RouteConditionReason
	}{
		{name: "no injected pod: the Service's name", shared: true, want: resolvedBackend{Port: 80, Service: "web"}},
		{name: "annotated pods: their name", shared: true,
			pods: []*corev1.Pod{testenv.InjectedPod("apps", "web-1", selector, "web-v2", 8080), testenv.InjectedPod("apps", "web-2", selector, "web-v2", 8080)},
			want: resolvedBackend{Port: 80, Service: "web-v2"}},
		{name: "annotated pods not registered yet", shared: true,
			pods:       []*corev1.Pod{testenv.InjectedPod("apps", "web-1", selector, "web-v2", 8080)},
			catalog:    catalogOf{"web"},
			wantReason: gatewayv1.RouteReasonBackendNotFound},
		{name: "annotated pods registered", shared: true,
			pods:    []*corev1.Pod{testenv.InjectedPod("apps", "web-1", selector, "web-v2", 8080)},
			catalog: catalogOf{"web-v2"},
			want:    resolvedBackend{Port: 80, Service: "web-v2"}},
		{name: "no pod: the Service's name, held or not", shared: true, catalog: catalogOf{}, want: resolvedBackend{Port: 80, Service: "web"}},
		{name: "pods disagree", shared: true,
			pods:       []*corev1.Pod{testenv.InjectedPod("apps", "web-1", selector, "web-v2", 8080), testenv.InjectedPod("apps", "web-2", selector, "", 8080)},
			wantReason: "ConsulServiceAmbiguous"},
		{name: "registered on another port", shared: true,
			pods:       []*corev1.Pod{testenv.InjectedPod("apps", "web-1", selector, "web-v2", 9090)},
			wantReason: "PortNotRegistered"},
		{name: "a pod of another namespace registers under the name: only ours reached", shared: true,
			pods: []*corev1.Pod{testenv.InjectedPod("apps", "web-1", selector, "web-v2", 8080),
				testenv.InjectedPod("payments", "billing-1", map[string]string{"app": "billing"}, "web-v2", 80)},
			want: resolvedBackend{Port: 80, Service: "web-v2", Narrowed: true, NarrowedBecause: sharedWithOtherNamespaces}},
		{name: "shared, but names are mirrored", shared: false,
			pods: []*corev1.Pod{testenv.InjectedPod("apps", "web-1", selector, "web-v2", 8080),
				testenv.InjectedPod("payments", "billing-1", map[string]string{"app": "billing"}, "web-v2", 80)},
			want: resolvedBackend{Port: 80, Service: "web-v2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := consulServicesOf(t, tt.shared, []*corev1.Service{web, other}, tt.pods)
			if tt.catalog != nil {
				names.catalog = tt.catalog
			}
			got, problem, err := resolveBackendRef("HTTPRoute", "apps", ref, names.lister(), grants, names.consulServices)
			checkResolution(t, got, problem, err, tt.want, tt.wantReason)
		})
	}
}

// testConsulServices is a consulServices over given Services and pods.
type testConsulServices struct {
	consulServices
}

func (c testConsulServices) lister() corelisters.ServiceLister {
	return corelisters.NewServiceLister(c.services)
}

func consulServicesOf(t testing.TB, shared bool, services []*corev1.Service, pods []*corev1.Pod) testConsulServices {
	t.Helper()
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex:       cache.MetaNamespaceIndexFunc,
		informers.ServiceNameIndex: informers.IndexServiceName,
	})
	podIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex:            cache.MetaNamespaceIndexFunc,
		informers.PodConsulServiceIndex: informers.IndexPodConsulService,
	})
	for _, s := range services {
		if err := svcs.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if err := podIndexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return testConsulServices{consulServices: consulServices{services: svcs, pods: podIndexer, shared: shared}}
}

// A MeshService backendRef is the Consul service its spec.name names, if the CRD is
// served, a grant allows it across namespaces, it exists and it is not a peer's.
func TestResolveMeshService(t *testing.T) {
	meshService := func(namespace, name, consulName, peer string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		u.SetAPIVersion(gatewayapi.MeshServiceGroup + "/" + gatewayapi.MeshServiceVersion)
		u.SetKind(gatewayapi.MeshServiceKind)
		u.SetNamespace(namespace)
		u.SetName(name)
		if consulName != "" {
			u.Object["spec"].(map[string]any)["name"] = consulName
		}
		if peer != "" {
			u.Object["spec"].(map[string]any)["peer"] = peer
		}
		return u
	}
	cached := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, m := range []*unstructured.Unstructured{
		meshService("apps", "billing", "billing-vm", ""),
		meshService("apps", "unnamed", "", ""),
		meshService("apps", "remote", "billing", "dc2-peer"),
		meshService("legacy", "ledger", "ledger-vm", ""),
		meshService("granted", "ledger", "ledger-vm", ""),
	} {
		if err := cached.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	grants := grantListerOf(t, refGrant("granted", "routes",
		[]gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}},
		[]gatewayv1.ReferenceGrantTo{{Group: gatewayapi.MeshServiceGroup, Kind: gatewayapi.MeshServiceKind}}))
	ref := func(namespace, name string) gatewayv1.BackendObjectReference {
		r := gatewayv1.BackendObjectReference{Group: new(gatewayv1.Group(gatewayapi.MeshServiceGroup)), Kind: new(gatewayv1.Kind(gatewayapi.MeshServiceKind)), Name: gatewayv1.ObjectName(name)}
		if namespace != "" {
			r.Namespace = new(gatewayv1.Namespace(namespace))
		}
		return r
	}
	served := consulServices{meshServices: cached, catalog: catalogOf{"billing-vm", "ledger-vm", "billing"}}
	unregistered := consulServices{meshServices: cached, catalog: catalogOf{"ledger-vm"}}
	tests := []struct {
		name       string
		ref        gatewayv1.BackendObjectReference
		names      consulServices
		want       resolvedBackend
		wantReason gatewayv1.RouteConditionReason
	}{
		{"its spec.name", ref("", "billing"), served, resolvedBackend{Service: "billing-vm"}, ""},
		{"a service Consul's catalog does not hold", ref("", "billing"), unregistered, resolvedBackend{}, gatewayv1.RouteReasonBackendNotFound},
		{"CRD not served", ref("", "billing"), consulServices{}, resolvedBackend{}, gatewayv1.RouteReasonInvalidKind},
		{"absent", ref("", "missing"), served, resolvedBackend{}, gatewayv1.RouteReasonBackendNotFound},
		{"without spec.name", ref("", "unnamed"), served, resolvedBackend{}, gatewayv1.RouteReasonBackendNotFound},
		{"a peer's", ref("", "remote"), served, resolvedBackend{}, ReasonPeerNotSupported},
		{"another namespace without a grant", ref("legacy", "ledger"), served, resolvedBackend{}, gatewayv1.RouteReasonRefNotPermitted},
		{"another namespace with a grant", ref("granted", "ledger"), served, resolvedBackend{Service: "ledger-vm"}, ""},
		{"no group: the core group has no MeshService", gatewayv1.BackendObjectReference{Kind: new(gatewayv1.Kind(gatewayapi.MeshServiceKind)), Name: "billing"}, served, resolvedBackend{}, gatewayv1.RouteReasonInvalidKind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problem, err := resolveBackendRef("HTTPRoute", "apps", tt.ref, serviceListerOf(t), grants, tt.names)
			checkResolution(t, got, problem, err, tt.want, tt.wantReason)
		})
	}
}

// A MeshService follows the shared-name rule of Services: where pods of other
// namespaces register its spec.name too, it reaches only its own namespace's, and
// names nothing when its namespace registers none. A name no pod registers (a
// service outside Kubernetes) is reached whole.
func TestMeshServiceNarrowed(t *testing.T) {
	web := map[string]string{"app": "web"}
	ledger := map[string]string{"app": "ledger"}
	service := func(namespace, name string, selector map[string]string) *corev1.Service {
		svc := testService(namespace, name, corev1.ServicePort{Port: 80})
		svc.Spec.Selector = selector
		return svc
	}
	names := consulServicesOf(t, true,
		[]*corev1.Service{service("apps", "web", web), service("payments", "web", web), service("payments", "ledger", ledger)},
		[]*corev1.Pod{testenv.InjectedPod("apps", "web-1", web, "", 80), testenv.InjectedPod("payments", "web-1", web, "", 80),
			testenv.InjectedPod("payments", "ledger-1", ledger, "", 80)})
	meshServices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, consulName := range map[string]string{"web": "web", "ledger": "ledger", "vm": "billing-vm"} {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"name": consulName}}}
		u.SetNamespace("apps")
		u.SetName(name)
		if err := meshServices.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	names.meshServices = meshServices
	ref := func(name string) gatewayv1.BackendObjectReference {
		return gatewayv1.BackendObjectReference{Group: new(gatewayv1.Group(gatewayapi.MeshServiceGroup)), Kind: new(gatewayv1.Kind(gatewayapi.MeshServiceKind)), Name: gatewayv1.ObjectName(name)}
	}
	tests := []struct {
		name       string
		ref        gatewayv1.BackendObjectReference
		want       resolvedBackend
		wantReason gatewayv1.RouteConditionReason
	}{
		{"registered here and elsewhere: only here", ref("web"), resolvedBackend{Service: "web", Narrowed: true, NarrowedBecause: sharedWithOtherNamespaces}, ""},
		{"registered by another namespace only", ref("ledger"), resolvedBackend{}, gatewayv1.RouteReasonBackendNotFound},
		{"registered by no pod", ref("vm"), resolvedBackend{Service: "billing-vm"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problem, err := resolveBackendRef("HTTPRoute", "apps", tt.ref, names.lister(), grantListerOf(t), names.consulServices)
			checkResolution(t, got, problem, err, tt.want, tt.wantReason)
			if problem != nil && strings.Contains(problem.Message, "payments") {
				t.Errorf("the message names another namespace: %s", problem.Message)
			}
		})
	}
}

// catalogOf is a Consul catalog holding the services names.
type catalogOf []string

func (c catalogOf) Known(name string) bool { return slices.Contains(c, name) }
func (c catalogOf) RegisteredOutsideKubernetes(name string) bool {
	return slices.Contains(c, "outside:"+name)
}
func (c catalogOf) HasSynced() bool { return true }

// checkResolution compares what resolveBackendRef returned with the Consul service
// wanted, or with the reason of the problem wanted.
func checkResolution(t *testing.T, got resolvedBackend, problem *backendProblem, err error, want resolvedBackend, wantReason gatewayv1.RouteConditionReason) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var reason gatewayv1.RouteConditionReason
	if problem != nil {
		reason = problem.Reason
	}
	if got != want || reason != wantReason {
		t.Errorf("resolved to %+v, problem %+v; want %+v, reason %q", got, problem, want, wantReason)
	}
}

// The shared-name answer is kept until a Service or pod event invalidates it, and the
// handler that queues the event's routes runs after the invalidation, with the
// caches already holding the event: a route judged for it reads the new answer.
func TestSharingMemo(t *testing.T) {
	web := map[string]string{"app": "web"}
	service := func(namespace string) *corev1.Service {
		svc := testService(namespace, "web", corev1.ServicePort{Port: 80})
		svc.Spec.Selector = web
		return svc
	}
	names := consulServicesOf(t, true, []*corev1.Service{service("apps"), service("payments")}, []*corev1.Pod{testenv.InjectedPod("apps", "web-1", web, "", 80)})
	names.memo = newSharingMemo()
	count := func() int {
		t.Helper()
		sharing, err := names.sharing("web")
		if err != nil {
			t.Fatal(err)
		}
		return len(sharing)
	}
	if got := count(); got != 1 {
		t.Fatalf("sharing web: %d Services, want 1 (apps)", got)
	}
	pod := testenv.InjectedPod("payments", "web-1", web, "", 80)
	if err := names.pods.Add(pod); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 1 {
		t.Errorf("before the event's handler: %d Services, want the kept answer 1", got)
	}
	var inHandler int
	handler := invalidating(names.memo, cache.ResourceEventHandlerFuncs{AddFunc: func(any) { inHandler = count() }})
	handler.OnAdd(pod, false)
	if inHandler != 2 {
		t.Errorf("the routes queued by the event read %d Services, want 2 (apps, payments)", inHandler)
	}
}

// BenchmarkSharedNameAfterPodEvent: one tenant's pod event re-judges every route naming
// a Service of that name, in every namespace; each route asks which Services share
// the name. Reported: the cost of one event's re-judging with the answer kept per
// version of the caches, as a multiple of without (listed again for each route).
func BenchmarkSharedNameAfterPodEvent(b *testing.B) {
	const namespaces, podsPerNamespace, routes = 200, 5, 200
	web := map[string]string{"app": "web"}
	var services []*corev1.Service
	var pods []*corev1.Pod
	for i := range namespaces {
		ns := fmt.Sprintf("tenant-%d", i)
		svc := testService(ns, "web", corev1.ServicePort{Port: 80})
		svc.Spec.Selector = web
		services = append(services, svc)
		for p := range podsPerNamespace {
			pods = append(pods, testenv.InjectedPod(ns, fmt.Sprintf("web-%d", p), web, "", 80))
		}
	}
	names := consulServicesOf(b, true, services, pods)
	event := func(memo *sharingMemo) {
		names.memo = memo
		if memo != nil {
			memo.invalidate()
		}
		for range routes {
			if _, err := names.sharing("web"); err != nil {
				b.Fatal(err)
			}
		}
	}
	measure := func(memo *sharingMemo) time.Duration {
		start := time.Now()
		for range 20 {
			event(memo)
		}
		return time.Since(start)
	}
	var kept, listed time.Duration
	for b.Loop() {
		listed += measure(nil)
		kept += measure(newSharingMemo())
	}
	b.ReportMetric(float64(kept)/float64(listed), "kept/listed")
}
