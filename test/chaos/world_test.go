package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	gosync "sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
)

// The scenario's objects: a fixed cast that random edits change, delete and re-create.
const (
	gatewayCount = 2
	routeCount   = 6
	serviceCount = 3
	tcpRoute     = "t-0"
	foreignGW    = "foreign-gw"
	certSecret   = "cert-1"
	grantName    = "grant"
	remoteSvc    = "remote"
)

// world is what the edits made of the objects, as the API server confirmed each edit.
// A marker is a number from one counter that only grows: it is written into what an
// edit changes (a path, a hostname), so any later reading of an object or of a Consul
// entry tells which edit it reflects.
type world struct {
	ns, remoteNS   string
	class, foreign string
	env            *scenarioEnv

	mu       gosync.Mutex
	rng      *rand.Rand
	marker   int
	routes   map[string]*routeModel // present routes
	gateways map[string]*gatewayModel
	grant    bool
	edits    map[string]int // applied edits by kind
	refused  map[string]int // edits the client saw fail (the API server was down, say)
	stale    bool           // a failed edit may have been applied: read the model back
}

type routeModel struct {
	parent string // gateway name
	marker int
	remote bool // its backend is in remoteNS: needs the ReferenceGrant
}

type gatewayModel struct {
	ours   bool // of our class (else of the foreign class)
	marker int
}

func newWorld(env *scenarioEnv, seed uint64) *world {
	return &world{
		ns: env.ns, remoteNS: env.ns + "-remote", class: env.class, foreign: env.class + "-foreign", env: env,
		rng:    rand.New(rand.NewPCG(seed, 0x77)),
		routes: map[string]*routeModel{}, gateways: map[string]*gatewayModel{},
		edits: map[string]int{}, refused: map[string]int{},
	}
}

func (w *world) next() int { w.marker++; return w.marker }

func gatewayName(i int) string { return "gw-" + strconv.Itoa(i) }
func routeName(i int) string   { return "r-" + strconv.Itoa(i) }

// create makes the namespaces, classes, Services, Secret and the initial objects.
func (w *world) create(ctx context.Context) error {
	for _, ns := range []string{w.ns, w.remoteNS} {
		if _, err := w.env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	params, err := w.createGatewayConfig(ctx)
	if err != nil {
		return err
	}
	for name, controller := range map[string]string{w.class: w.env.controllerName, w.foreign: "chaos.example/foreign"} {
		gc := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gatewayv1.GatewayClassSpec{ControllerName: gatewayv1.GatewayController(controller)}}
		if name == w.class {
			gc.Spec.ParametersRef = params
		}
		if _, err := w.env.gw.GatewayV1().GatewayClasses().Create(ctx, gc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i := range serviceCount {
		if err := w.createService(ctx, w.ns, w.service("svc-"+strconv.Itoa(i))); err != nil {
			return err
		}
	}
	// The TCPRoute's first backend, a Service of its own: the HTTP backends are http
	// in Consul (backendDefaults), a tcp-route needs a tcp one.
	if err := w.createService(ctx, w.ns, w.service("tcp-0")); err != nil {
		return err
	}
	if err := w.createService(ctx, w.remoteNS, w.service(remoteSvc)); err != nil {
		return err
	}
	if err := w.writeCertificate(ctx, true); err != nil {
		return err
	}
	for i := range gatewayCount {
		if err := w.createGateway(ctx, gatewayName(i), true); err != nil {
			return err
		}
	}
	if err := w.createGateway(ctx, foreignGW, false); err != nil {
		return err
	}
	for i := range routeCount {
		if err := w.createRoute(ctx, routeName(i), gatewayName(i%gatewayCount), i%3 == 2); err != nil {
			return err
		}
	}
	if err := w.setGrant(ctx, true); err != nil {
		return err
	}
	return w.createTCPRoute(ctx)
}

// createGatewayConfig makes our class's GatewayConfig: gateway Services of type
// ClusterIP, whose cluster IP is the Gateway's address. With the default,
// LoadBalancer, nothing here would give one, and no Gateway could be Programmed: the
// convergence check requires every Gateway of ours to be.
func (w *world) createGatewayConfig(ctx context.Context) (*gatewayv1.ParametersReference, error) {
	config := &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "chaos"},
		Spec:       v1alpha1.GatewayConfigSpec{Service: &v1alpha1.ServiceConfig{Type: ptr.To(corev1.ServiceTypeClusterIP)}},
	}
	if _, err := env.ConfigClient.GatewayConfigs(w.ns).Create(ctx, config, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return &gatewayv1.ParametersReference{
		Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: config.Name, Namespace: ptr.To(gatewayv1.Namespace(w.ns)),
	}, nil
}

// service is the name of the world's Service base. Without Consul namespace mirroring
// Consul knows Services of one name in every namespace as one service, and the
// controller refuses a backend another namespace shares without a grant: the worlds
// of a run share the API server and Consul, so each names its Services after itself.
func (w *world) service(base string) string { return w.ns + "-" + base }

func (w *world) createService(ctx context.Context, ns, name string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "pg", Port: 5432, TargetPort: intstr.FromInt32(5432)},
		}},
	}
	_, err := w.env.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	return err
}

func (w *world) writeCertificate(ctx context.Context, create bool) error {
	cert, key, err := testcerts.SelfSigned(fmt.Sprintf("c%d.chaos.test", w.next()))
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: certSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
	if create {
		_, err = w.env.kube.CoreV1().Secrets(w.ns).Create(ctx, secret, metav1.CreateOptions{})
		return err
	}
	_, err = w.env.kube.CoreV1().Secrets(w.ns).Update(ctx, secret, metav1.UpdateOptions{})
	return err
}

func (w *world) gatewaySpec(ours bool, marker int) gatewayv1.GatewaySpec {
	class := w.foreign
	if ours {
		class = w.class
	}
	hostname := gatewayv1.Hostname(fmt.Sprintf("g%d.chaos.test", marker))
	tcp := gatewayv1.Kind("TCPRoute")
	return gatewayv1.GatewaySpec{
		GatewayClassName: gatewayv1.ObjectName(class),
		Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType, Hostname: &hostname},
			{Name: "https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, Hostname: ptr.To(gatewayv1.Hostname("secure.chaos.test")),
				TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: certSecret}}}},
			{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType, AllowedRoutes: &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: tcp}}}},
		},
	}
}

func (w *world) createGateway(ctx context.Context, name string, ours bool) error {
	marker := w.next()
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, Spec: w.gatewaySpec(ours, marker)}
	if _, err := w.env.gw.GatewayV1().Gateways(w.ns).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		return err
	}
	if name != foreignGW {
		w.gateways[name] = &gatewayModel{ours: ours, marker: marker}
	}
	return nil
}

func (w *world) routeSpec(parent string, marker int, remote bool) gatewayv1.HTTPRouteSpec {
	backend := gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(w.service("svc-" + strconv.Itoa(marker%serviceCount))), Port: ptr.To(gatewayv1.PortNumber(80))}
	if remote {
		backend = gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(w.service(remoteSvc)), Namespace: ptr.To(gatewayv1.Namespace(w.remoteNS)), Port: ptr.To(gatewayv1.PortNumber(80))}
	}
	return gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{
			{Name: gatewayv1.ObjectName(parent), SectionName: ptr.To(gatewayv1.SectionName("http"))},
			{Name: foreignGW, SectionName: ptr.To(gatewayv1.SectionName("http"))},
		}},
		Rules: []gatewayv1.HTTPRouteRule{{
			Matches:     []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(fmt.Sprintf("/m%d", marker))}}},
			BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: backend}}},
		}},
	}
}

func (w *world) createRoute(ctx context.Context, name, parent string, remote bool) error {
	marker := w.next()
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, Spec: w.routeSpec(parent, marker, remote)}
	if _, err := w.env.gw.GatewayV1().HTTPRoutes(w.ns).Create(ctx, r, metav1.CreateOptions{}); err != nil {
		return err
	}
	w.routes[name] = &routeModel{parent: parent, marker: marker, remote: remote}
	return nil
}

func (w *world) createTCPRoute(ctx context.Context) error {
	r := &gatewayv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: tcpRoute},
		Spec: gatewayv1.TCPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(gatewayName(0)), SectionName: ptr.To(gatewayv1.SectionName("tcp"))}}},
			Rules:           []gatewayv1.TCPRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(w.service("tcp-0")), Port: ptr.To(gatewayv1.PortNumber(5432))}}}}},
		},
	}
	_, err := w.env.gw.GatewayV1().TCPRoutes(w.ns).Create(ctx, r, metav1.CreateOptions{})
	return err
}

func (w *world) setGrant(ctx context.Context, on bool) error {
	grants := w.env.gw.GatewayV1beta1().ReferenceGrants(w.remoteNS)
	if !on {
		if err := grants.Delete(ctx, grantName, metav1.DeleteOptions{}); err != nil {
			return err
		}
		w.grant = false
		return nil
	}
	g := &gatewayv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.remoteNS, Name: grantName},
		Spec: gatewayv1beta1.ReferenceGrantSpec{
			From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(w.ns)}},
			To:   []gatewayv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}
	if _, err := grants.Create(ctx, g, metav1.CreateOptions{}); err != nil {
		return err
	}
	w.grant = true
	return nil
}

// edit is one kind of random change; weight is how often it is picked.
type edit struct {
	name   string
	weight int
	apply  func(w *world, ctx context.Context) error
}

var edits = []edit{
	{"route-spec", 30, (*world).editRouteSpec},
	{"route-parent", 8, (*world).switchRouteParent},
	{"route-delete", 8, (*world).deleteRoute},
	{"route-create", 8, (*world).createMissingRoute},
	{"route-recreate", 8, (*world).recreateRoute},
	{"gateway-spec", 8, (*world).editGateway},
	{"class-change", 5, (*world).changeClass},
	{"grant-toggle", 6, func(w *world, ctx context.Context) error { return w.setGrant(ctx, !w.grant) }},
	{"secret-rotation", 6, func(w *world, ctx context.Context) error { return w.writeCertificate(ctx, false) }},
	{"tcp-backend", 6, (*world).moveTCPBackend},
}

// step applies one random edit. An edit the API server refuses (it is down, or the
// object went away) changes nothing in the model and is counted as refused.
func (w *world) step(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.pick()
	if err := e.apply(w, ctx); err != nil {
		w.refused[e.name]++
		// A write the client saw fail may still have been applied (the connection
		// broke after the server committed it): the model is read back from the
		// server, now if it answers, or before the convergence check.
		w.stale = true
		_ = w.resyncLocked(ctx)
		return
	}
	w.edits[e.name]++
}

// resync reads the model back from the API server if an edit may have been applied
// without the client knowing.
func (w *world) resync(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resyncLocked(ctx)
}

func (w *world) resyncLocked(ctx context.Context) error {
	if !w.stale {
		return nil
	}
	routes, err := w.env.gw.GatewayV1().HTTPRoutes(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	gateways, err := w.env.gw.GatewayV1().Gateways(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	_, grantErr := w.env.gw.GatewayV1beta1().ReferenceGrants(w.remoteNS).Get(ctx, grantName, metav1.GetOptions{})
	if grantErr != nil && !apierrors.IsNotFound(grantErr) {
		return grantErr
	}
	w.grant = grantErr == nil
	w.routes = map[string]*routeModel{}
	for _, r := range routes.Items {
		w.routes[r.Name] = routeFromSpec(r.Spec)
	}
	for _, g := range gateways.Items {
		if m, ok := w.gateways[g.Name]; ok {
			m.ours = string(g.Spec.GatewayClassName) == w.class
			m.marker = markerOf(hostMarker, string(ptr.Deref(g.Spec.Listeners[0].Hostname, "")))
		}
	}
	w.stale = false
	return nil
}

// routeFromSpec reads a route's model from the spec routeSpec wrote.
func routeFromSpec(spec gatewayv1.HTTPRouteSpec) *routeModel {
	m := &routeModel{parent: string(spec.ParentRefs[0].Name)}
	rule := spec.Rules[0]
	m.marker = markerOf(pathMarker, ptr.Deref(rule.Matches[0].Path.Value, ""))
	m.remote = rule.BackendRefs[0].Namespace != nil
	return m
}

func markerOf(re *regexp.Regexp, s string) int {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func (w *world) pick() edit {
	total := 0
	for _, e := range edits {
		total += e.weight
	}
	n := w.rng.IntN(total)
	for _, e := range edits {
		if n < e.weight {
			return e
		}
		n -= e.weight
	}
	return edits[0]
}

// someRoute is a random present route's name, "" when none is.
func (w *world) someRoute() string {
	names := make([]string, 0, len(w.routes))
	for n := range w.routes {
		names = append(names, n)
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return names[w.rng.IntN(len(names))]
}

func (w *world) patchRoute(ctx context.Context, name string, spec gatewayv1.HTTPRouteSpec) error {
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	_, err = w.env.gw.GatewayV1().HTTPRoutes(w.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (w *world) editRouteSpec(ctx context.Context) error {
	name := w.someRoute()
	if name == "" {
		return w.createMissingRoute(ctx)
	}
	r := w.routes[name]
	marker := w.next()
	if err := w.patchRoute(ctx, name, w.routeSpec(r.parent, marker, r.remote)); err != nil {
		return err
	}
	r.marker = marker
	return nil
}

func (w *world) switchRouteParent(ctx context.Context) error {
	name := w.someRoute()
	if name == "" {
		return w.createMissingRoute(ctx)
	}
	r := w.routes[name]
	parent := gatewayName((slices.Index(gatewayNames(), r.parent) + 1) % gatewayCount)
	marker := w.next()
	if err := w.patchRoute(ctx, name, w.routeSpec(parent, marker, r.remote)); err != nil {
		return err
	}
	r.parent, r.marker = parent, marker
	return nil
}

func gatewayNames() []string {
	names := make([]string, gatewayCount)
	for i := range names {
		names[i] = gatewayName(i)
	}
	return names
}

func (w *world) deleteRoute(ctx context.Context) error {
	name := w.someRoute()
	if name == "" || len(w.routes) <= 2 {
		return w.createMissingRoute(ctx)
	}
	if err := w.env.gw.GatewayV1().HTTPRoutes(w.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	delete(w.routes, name)
	return nil
}

func (w *world) createMissingRoute(ctx context.Context) error {
	for i := range routeCount {
		name := routeName(i)
		if _, ok := w.routes[name]; !ok {
			return w.createRoute(ctx, name, gatewayName(w.rng.IntN(gatewayCount)), w.rng.IntN(3) == 0)
		}
	}
	return w.editRouteSpec(ctx)
}

// recreateRoute deletes a route and creates one of the same name at once: a new UID
// whose entries must not be mistaken for the old one's.
func (w *world) recreateRoute(ctx context.Context) error {
	name := w.someRoute()
	if name == "" {
		return w.createMissingRoute(ctx)
	}
	r := w.routes[name]
	if err := w.env.gw.GatewayV1().HTTPRoutes(w.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	delete(w.routes, name)
	return w.createRoute(ctx, name, r.parent, r.remote)
}

func (w *world) patchGateway(ctx context.Context, name string, spec gatewayv1.GatewaySpec) error {
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	_, err = w.env.gw.GatewayV1().Gateways(w.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (w *world) someGateway() string { return gatewayName(w.rng.IntN(gatewayCount)) }

func (w *world) editGateway(ctx context.Context) error {
	name := w.someGateway()
	g := w.gateways[name]
	marker := w.next()
	if err := w.patchGateway(ctx, name, w.gatewaySpec(g.ours, marker)); err != nil {
		return err
	}
	g.marker = marker
	return nil
}

// changeClass moves a Gateway to the foreign class or back: it leaves our hands, and
// everything written for it must go.
func (w *world) changeClass(ctx context.Context) error {
	name := w.someGateway()
	g := w.gateways[name]
	marker := w.next()
	if err := w.patchGateway(ctx, name, w.gatewaySpec(!g.ours, marker)); err != nil {
		return err
	}
	g.ours, g.marker = !g.ours, marker
	return nil
}

// snapshot is a copy of the model for the convergence check.
func (w *world) snapshot() (map[string]routeModel, map[string]gatewayModel, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	routes := map[string]routeModel{}
	for n, r := range w.routes {
		routes[n] = *r
	}
	gateways := map[string]gatewayModel{}
	for n, g := range w.gateways {
		gateways[n] = *g
	}
	return routes, gateways, w.grant
}
