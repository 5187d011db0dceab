package testenv

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/pods"
)

// MeshBackendNode is the Consul node MeshBackends registers every backend pod on.
const MeshBackendNode = "mesh-backends"

// managedByLabel marks the Services the controller made for gateways (the label
// dataplane sets; testenv cannot import it: the packages it serves would import
// themselves).
const managedByLabel = "app.kubernetes.io/managed-by"

// meshSidecarPort is the port each backend pod's sidecar proxy is registered with: the
// gateway's clusters reach backends through it, so EDS endpoints carry it.
const meshSidecarPort = 20000

// PodRef names the pod behind a mesh instance.
type PodRef struct{ Namespace, Name string }

// MeshBackends plays consul-k8s's endpoints controller for the tests: it keeps Consul's
// catalog holding, for every Ready pod a Service selects, a service instance named
// after the Service and its sidecar proxy, with the pod's IP and name. The gateways'
// clusters then have the endpoints a mesh would give them. Services the controller
// made for gateways are left out.
type MeshBackends struct {
	kube   kubernetes.Interface
	consul *consulapi.Client

	mu   gosync.Mutex
	byIP map[string]PodRef
	err  error
}

// StartMeshBackends registers the backends now and again every interval until ctx
// ends; it returns after the first pass.
func StartMeshBackends(ctx context.Context, kube kubernetes.Interface, consul *consulapi.Client, interval time.Duration) (*MeshBackends, error) {
	m := &MeshBackends{kube: kube, consul: consul, byIP: map[string]PodRef{}}
	if err := m.sync(ctx); err != nil {
		return nil, err
	}
	go func() {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				err := m.sync(ctx)
				m.mu.Lock()
				m.err = err
				m.mu.Unlock()
			}
		}
	}()
	return m, nil
}

// Pod returns the pod an endpoint address (ip or ip:port) belongs to.
func (m *MeshBackends) Pod(address string) (PodRef, bool) {
	ip := address
	if host, _, err := net.SplitHostPort(address); err == nil {
		ip = host
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.byIP[ip]
	return p, ok
}

// Err is the error of the last pass, if it failed.
func (m *MeshBackends) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// sync makes the node's registrations what the Services and pods say.
func (m *MeshBackends) sync(ctx context.Context) error {
	want, byIP, err := m.desired(ctx)
	if err != nil {
		return err
	}
	have, _, err := m.consul.Catalog().Node(MeshBackendNode, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("read node %s: %w", MeshBackendNode, err)
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if have != nil && sameInstance(have.Services[id], want[id]) {
			continue
		}
		if _, err := m.consul.Catalog().Register(registration(want[id]), (&consulapi.WriteOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("register %s: %w", id, err)
		}
	}
	if have != nil {
		for id := range have.Services {
			if _, ok := want[id]; ok {
				continue
			}
			dereg := &consulapi.CatalogDeregistration{Node: MeshBackendNode, ServiceID: id}
			if _, err := m.consul.Catalog().Deregister(dereg, (&consulapi.WriteOptions{}).WithContext(ctx)); err != nil {
				return fmt.Errorf("deregister %s: %w", id, err)
			}
		}
	}
	m.mu.Lock()
	m.byIP = byIP
	m.mu.Unlock()
	return nil
}

// desired is every instance the catalog must hold, by service ID, and the pods by IP.
func (m *MeshBackends) desired(ctx context.Context) (map[string]*consulapi.AgentService, map[string]PodRef, error) {
	services, err := m.kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list services: %w", err)
	}
	podList, err := m.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list pods: %w", err)
	}
	want := map[string]*consulapi.AgentService{}
	byIP := map[string]PodRef{}
	for i := range services.Items {
		svc := &services.Items[i]
		if len(svc.Spec.Selector) == 0 || svc.Labels[managedByLabel] != "" {
			continue
		}
		selector := labels.SelectorFromSet(svc.Spec.Selector)
		for j := range podList.Items {
			pod := &podList.Items[j]
			if pod.Namespace != svc.Namespace || !selector.Matches(labels.Set(pod.Labels)) || !pods.Ready(pod) || pod.Status.PodIP == "" {
				continue
			}
			for _, inst := range meshInstances(svc, pod) {
				want[inst.ID] = inst
			}
			byIP[pod.Status.PodIP] = PodRef{Namespace: pod.Namespace, Name: pod.Name}
		}
	}
	return want, byIP, nil
}

// meshInstances are the service instance and sidecar proxy consul-k8s registers for a
// pod of a Service: named after the Service, with the pod's name in their meta.
func meshInstances(svc *corev1.Service, pod *corev1.Pod) []*consulapi.AgentService {
	id := fmt.Sprintf("%s-%s-%s", pod.Name, svc.Namespace, svc.Name)
	meta := map[string]string{"pod-name": pod.Name, "k8s-namespace": pod.Namespace, "k8s-service-name": svc.Name}
	port := servicePort(svc)
	return []*consulapi.AgentService{
		{ID: id, Service: svc.Name, Address: pod.Status.PodIP, Port: port, Meta: meta},
		{
			Kind: consulapi.ServiceKindConnectProxy, ID: id + "-sidecar-proxy", Service: svc.Name + "-sidecar-proxy",
			Address: pod.Status.PodIP, Port: meshSidecarPort, Meta: meta,
			Proxy: &consulapi.AgentServiceConnectProxyConfig{
				DestinationServiceName: svc.Name, DestinationServiceID: id, LocalServicePort: port,
			},
		},
	}
}

// servicePort is the pod port the Service's first port reaches.
func servicePort(svc *corev1.Service) int {
	if len(svc.Spec.Ports) == 0 {
		return 0
	}
	p := svc.Spec.Ports[0]
	if p.TargetPort.IntValue() > 0 {
		return p.TargetPort.IntValue()
	}
	return int(p.Port)
}

func registration(s *consulapi.AgentService) *consulapi.CatalogRegistration {
	return &consulapi.CatalogRegistration{
		Node: MeshBackendNode, Address: "127.0.0.1", SkipNodeUpdate: true,
		Service: s,
	}
}

// sameInstance reports whether a registered instance already says what want says.
func sameInstance(have, want *consulapi.AgentService) bool {
	if have == nil {
		return false
	}
	sameProxy := (have.Proxy == nil) == (want.Proxy == nil)
	if sameProxy && want.Proxy != nil {
		sameProxy = have.Proxy.DestinationServiceName == want.Proxy.DestinationServiceName &&
			have.Proxy.DestinationServiceID == want.Proxy.DestinationServiceID &&
			have.Proxy.LocalServicePort == want.Proxy.LocalServicePort
	}
	return have.Service == want.Service && have.Address == want.Address && have.Port == want.Port &&
		have.Kind == want.Kind && maps.Equal(have.Meta, want.Meta) && sameProxy
}
