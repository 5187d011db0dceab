package sync

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/listers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
)

const testController gatewayv1.GatewayController = "test.example.com/controller"

// newTestDecider returns a decider whose caches hold objs, indexed as the informers
// index them.
func newTestDecider(t testing.TB, objs ...runtime.Object) *decider {
	t.Helper()
	ns := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	routeIdx := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, informers.RouteParentGatewayIndex: informers.IndexRouteParentGateways,
		informers.RouteParentListenerSetIndex: informers.IndexRouteParentListenerSets}
	idx := map[string]cache.Indexer{}
	for _, kind := range []string{"GatewayClass", "Gateway", "Namespace", "Service", "Secret", "ReferenceGrant", "GatewayConfig"} {
		idx[kind] = cache.NewIndexer(cache.MetaNamespaceKeyFunc, ns)
	}
	idx["ListenerSet"] = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, informers.ListenerSetParentGatewayIndex: informers.IndexListenerSetParentGateway,
	})
	routeIndexers := map[gatewayv1.Kind]cache.Indexer{}
	for _, kind := range gatewayapi.Routes {
		routeIndexers[kind.Kind] = cache.NewIndexer(cache.MetaNamespaceKeyFunc, routeIdx)
		idx[string(kind.Kind)] = routeIndexers[kind.Kind]
	}
	for _, obj := range objs {
		var kind string
		if route, ok := gatewayapi.RouteOf(obj); ok {
			kind = string(route.Kind)
		}
		switch obj.(type) {
		case *gatewayv1.GatewayClass:
			kind = "GatewayClass"
		case *gatewayv1.Gateway:
			kind = "Gateway"
		case *gatewayv1.ListenerSet:
			kind = "ListenerSet"
		case *corev1.Namespace:
			kind = "Namespace"
		case *corev1.Service:
			kind = "Service"
		case *corev1.Secret:
			kind = "Secret"
		case *gatewayv1.ReferenceGrant:
			kind = "ReferenceGrant"
		case *v1alpha1.GatewayConfig:
			kind = "GatewayConfig"
		}
		if kind == "" {
			t.Fatalf("no cache for %T", obj)
		}
		if err := idx[kind].Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	return &decider{
		controllerName: testController,
		caps:           consullimits.Consul115,
		verdicts:       noVerdicts{},
		classes:        gatewaylisters.NewGatewayClassLister(idx["GatewayClass"]),
		gateways:       gatewaylisters.NewGatewayLister(idx["Gateway"]),
		listenerSets:   idx["ListenerSet"],
		namespaces:     corelisters.NewNamespaceLister(idx["Namespace"]),
		services:       corelisters.NewServiceLister(idx["Service"]),
		configs:        listers.New[*v1alpha1.GatewayConfig](idx["GatewayConfig"], v1alpha1.Resource("gatewayconfigs")),
		refs: listenerRefs{
			secrets: corelisters.NewSecretLister(idx["Secret"]),
			grants:  gatewaylisters.NewReferenceGrantLister(idx["ReferenceGrant"]),
		},
		routeIndexers: routeIndexers,
		precedence:    newPrecedenceMemo(),
	}
}

func ourClass() *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "ours", Generation: 1},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: testController},
	}
}

func otherClass() *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: "other.example.com/controller"},
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func gateway(namespace, name string, listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 2},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "ours", Listeners: listeners},
	}
}

func httpListener(name string, port int32, hostname string) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType}
	if hostname != "" {
		l.Hostname = ptrTo(gatewayv1.Hostname(hostname))
	}
	return l
}

func httpsListener(name string, port int32, certNamespace, certName string) gatewayv1.Listener {
	ref := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(certName)}
	if certNamespace != "" {
		ref.Namespace = ptrTo(gatewayv1.Namespace(certNamespace))
	}
	return gatewayv1.Listener{
		Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPSProtocolType,
		TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{ref}},
	}
}

func tcpListener(name string, port int32) gatewayv1.Listener {
	return gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.TCPProtocolType}
}

func allowAll(l gatewayv1.Listener) gatewayv1.Listener {
	l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptrTo(gatewayv1.NamespacesFromAll)}}
	return l
}

func allowSelector(l gatewayv1.Listener, labels map[string]string) gatewayv1.Listener {
	l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{
		From:     ptrTo(gatewayv1.NamespacesFromSelector),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
	}}
	return l
}

func parentRef(namespace, name, section string) gatewayv1.ParentReference {
	ref := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(name)}
	if namespace != "" {
		ref.Namespace = ptrTo(gatewayv1.Namespace(namespace))
	}
	if section != "" {
		ref.SectionName = ptrTo(gatewayv1.SectionName(section))
	}
	return ref
}

func httpRoute(namespace, name string, hostnames []string, parents ...gatewayv1.ParentReference) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 3},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Rules: []gatewayv1.HTTPRouteRule{{
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: "echo", Port: ptrTo(gatewayv1.PortNumber(8080))},
				}}},
			}},
		},
	}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	return r
}

func service(namespace, name string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + namespace + "-" + name)},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: port}}},
	}
}

func tlsSecret(t testing.TB, namespace, name string) *corev1.Secret {
	t.Helper()
	return tlsSecretFor(t, namespace, name, "example.com", "example.com")
}

// tlsSecretFor is a TLS Secret whose certificate has the common name commonName and
// the DNS names hosts.
func tlsSecretFor(t testing.TB, namespace, name, commonName string, hosts ...string) *corev1.Secret {
	t.Helper()
	cert, key, err := testcerts.SelfSignedNamed(commonName, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
}

func grantSecretsTo(fromNamespace, toNamespace string) *gatewayv1.ReferenceGrant {
	return &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: toNamespace, Name: "from-" + fromNamespace},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: gatewayv1.Namespace(fromNamespace)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
		},
	}
}

// summary is a condition without the fields tests do not pin down.
type summary struct {
	Type, Status, Reason string
}

func summarize(conds []metav1.Condition) []summary {
	out := make([]summary, len(conds))
	for i, c := range conds {
		out[i] = summary{c.Type, string(c.Status), c.Reason}
	}
	return out
}
