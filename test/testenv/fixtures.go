package testenv

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
)

// The fixture builders return objects as a user would write them: no resourceVersion,
// status or defaults, so the API server takes them as they are and unit tests can put
// them into caches. A test sets what else it needs on the result.

// Namespace returns a Namespace with labels.
func Namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// Service returns a Service of namespace with an unnamed port for each of ports.
func Service(namespace, name string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	for _, port := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: port})
	}
	return svc
}

// TLSSecret returns a kubernetes.io/tls Secret holding cert and key.
func TLSSecret(namespace, name string, cert, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
}

// SelfSigned returns a PEM certificate for host, signed by its own key, and that key.
func SelfSigned(t testing.TB, host string) (cert, key []byte) {
	t.Helper()
	cert, key, err := testcerts.SelfSigned(host)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// GatewayClass returns a GatewayClass of controller.
func GatewayClass(name string, controller gatewayv1.GatewayController) *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: controller},
	}
}

// Gateway returns a Gateway of namespace and class with listeners.
func Gateway(namespace, name, class string, listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class), Listeners: listeners},
	}
}

// HTTPListener returns a listener for HTTP on port.
func HTTPListener(name string, port int32) gatewayv1.Listener {
	return gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType}
}

// HTTPSListener returns a listener for HTTPS on port that terminates TLS with certs.
func HTTPSListener(name string, port int32, certs ...gatewayv1.SecretObjectReference) gatewayv1.Listener {
	return gatewayv1.Listener{
		Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPSProtocolType,
		TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: certs},
	}
}

// ListenerSet returns a ListenerSet of namespace attached to parent with listeners.
func ListenerSet(namespace, name string, parent gatewayv1.ParentGatewayReference, listeners ...gatewayv1.ListenerEntry) *gatewayv1.ListenerSet {
	return &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       gatewayv1.ListenerSetSpec{ParentRef: parent, Listeners: listeners},
	}
}

// Backend returns a reference to the Service name of the route's namespace, on port
// (none when port is 0).
func Backend(name string, port int32) gatewayv1.BackendObjectReference {
	ref := gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name)}
	if port != 0 {
		ref.Port = new(port)
	}
	return ref
}

func backendRefs(refs []gatewayv1.BackendObjectReference) []gatewayv1.BackendRef {
	var backends []gatewayv1.BackendRef
	for _, ref := range refs {
		backends = append(backends, gatewayv1.BackendRef{BackendObjectReference: ref})
	}
	return backends
}

// HTTPRoute returns an HTTPRoute of namespace attached to parents with a rule for each
// of backends, sending everything to it.
func HTTPRoute(namespace, name string, parents []gatewayv1.ParentReference, backends ...gatewayv1.BackendObjectReference) *gatewayv1.HTTPRoute {
	var rules []gatewayv1.HTTPRouteRule
	for _, ref := range backendRefs(backends) {
		rules = append(rules, gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: ref}}})
	}
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Rules:           rules,
		},
	}
}

// GRPCRoute returns a GRPCRoute of namespace attached to parents with a rule for each
// of backends.
func GRPCRoute(namespace, name string, parents []gatewayv1.ParentReference, backends ...gatewayv1.BackendObjectReference) *gatewayv1.GRPCRoute {
	var rules []gatewayv1.GRPCRouteRule
	for _, ref := range backendRefs(backends) {
		rules = append(rules, gatewayv1.GRPCRouteRule{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: ref}}})
	}
	return &gatewayv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Rules:           rules,
		},
	}
}

// TCPRoute returns a TCPRoute of namespace attached to parents with one rule sending
// to backends.
func TCPRoute(namespace, name string, parents []gatewayv1.ParentReference, backends ...gatewayv1.BackendObjectReference) *gatewayv1.TCPRoute {
	return &gatewayv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatewayv1.TCPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Rules:           []gatewayv1.TCPRouteRule{{BackendRefs: backendRefs(backends)}},
		},
	}
}

// TLSRoute returns a TLSRoute of namespace for hostnames, attached to parents with one
// rule sending to backends.
func TLSRoute(namespace, name string, parents []gatewayv1.ParentReference, hostnames []gatewayv1.Hostname, backends ...gatewayv1.BackendObjectReference) *gatewayv1.TLSRoute {
	return &gatewayv1.TLSRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatewayv1.TLSRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Hostnames:       hostnames,
			Rules:           []gatewayv1.TLSRouteRule{{BackendRefs: backendRefs(backends)}},
		},
	}
}

// UDPRoute returns a UDPRoute of namespace attached to parents with one rule sending
// to backends.
func UDPRoute(namespace, name string, parents []gatewayv1.ParentReference, backends ...gatewayv1.BackendObjectReference) *gatewayv1.UDPRoute {
	return &gatewayv1.UDPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatewayv1.UDPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Rules:           []gatewayv1.UDPRouteRule{{BackendRefs: backendRefs(backends)}},
		},
	}
}

// GrantFrom is the ReferenceGrant subject "objects of kind (of the Gateway API group)
// in namespace".
func GrantFrom(kind gatewayv1.Kind, namespace string) gatewayv1.ReferenceGrantFrom {
	return gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: kind, Namespace: gatewayv1.Namespace(namespace)}
}

// ReferenceGrant returns a ReferenceGrant of namespace that lets from refer to the
// objects of the core kind to (Service, Secret) there.
func ReferenceGrant(namespace, name string, to gatewayv1.Kind, from ...gatewayv1.ReferenceGrantFrom) *gatewayv1.ReferenceGrant {
	return &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: from,
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: to}},
		},
	}
}

// InjectedPod returns a pod as consul-k8s's webhook leaves it: labelled injected, with
// labels, a connect-service annotation naming its Consul service ("" for none), and
// one container with port. It runs as PodServiceAccount, and no kubelet runs it.
func InjectedPod(namespace, name string, labels map[string]string, consulName string, port int32) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{backends.InjectStatusLabel: backends.Injected}},
		Spec: corev1.PodSpec{
			ServiceAccountName: PodServiceAccount,
			Containers:         []corev1.Container{{Name: "app", Image: "app", Ports: []corev1.ContainerPort{{ContainerPort: port}}}},
		},
	}
	maps.Copy(pod.Labels, labels)
	if consulName != "" {
		pod.Annotations = map[string]string{backends.ServiceAnnotation: consulName}
	}
	return pod
}

// PodServiceAccount is the ServiceAccount of InjectedPod's pods: the API server admits
// a pod only when its ServiceAccount exists, and no controller makes "default" here.
const PodServiceAccount = "app"
