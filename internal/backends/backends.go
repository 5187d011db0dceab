// Package backends says which Consul service a route's backend Service is: the name
// consul-k8s's endpoints controller registers the Service's pods under, and whether
// the port the backendRef names is the port it registers them with. It is pure: the
// status pipeline hands it a Service and the injected pods it caches, and records the
// answer in the route's decision, which is what the Consul translation writes. So the
// status and the entries in Consul are one decision and cannot disagree.
//
// What consul-k8s does (control-plane/connect-inject: the webhook and the endpoints
// controller), and what this package follows:
//
//   - Its webhook labels every pod it injects consul.hashicorp.com/connect-inject-status:
//     injected. Its endpoints controller registers, for each Service, the injected pods
//     among the Service's endpoints.
//   - A pod is registered under its consul.hashicorp.com/connect-service annotation when
//     that is set, and under the Kubernetes Service's name otherwise. An annotation with
//     a comma names one service per port of a multi-port pod; this package refuses it.
//   - A pod annotated consul.hashicorp.com/kubernetes-service is registered only for
//     the Service it names. A Service (its Endpoints) or pod labelled
//     consul.hashicorp.com/service-ignore: "true" is not registered.
//   - The instance's port, the one its sidecar forwards to, is the
//     consul.hashicorp.com/connect-service-port annotation (a container port's name, or
//     a number); the webhook sets it to the first port of the first container when the
//     pod has none.
//
// Pods are found by the Service's selector, not through its Endpoints: a pod is counted
// from the moment it exists (before it has an address) until it is deleted or has
// finished, so the name does not change while pods start. A Service without a selector
// (Endpoints managed by hand) has no pods here, and keeps its own name.
package backends

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The labels and annotations of consul-k8s this package reads.
const (
	// InjectStatusLabel is on every pod consul-k8s's webhook injected, with the value
	// Injected. Only pods carrying it are cached.
	InjectStatusLabel = "consul.hashicorp.com/connect-inject-status"
	Injected          = "injected"
	// ServiceAnnotation is the Consul service name a pod registers under.
	ServiceAnnotation = "consul.hashicorp.com/connect-service"
	// PortAnnotation is the port a pod registers with: a container port's name, or a
	// number.
	PortAnnotation = "consul.hashicorp.com/connect-service-port"
	// KubernetesServiceAnnotation restricts a pod selected by several Services to the
	// one it names.
	KubernetesServiceAnnotation = "consul.hashicorp.com/kubernetes-service"
	// ServiceIgnoreLabel, "true" on a Service or pod, keeps it out of Consul.
	ServiceIgnoreLabel = "consul.hashicorp.com/service-ignore"
)

// Annotations are the pod annotations resolution reads; a cache keeps only these.
var Annotations = []string{ServiceAnnotation, PortAnnotation, KubernetesServiceAnnotation, ServiceIgnoreLabel}

// The ResolvedRefs reasons of a backend whose pods make its Consul service unusable.
// They are this implementation's own: none of the spec's reasons says it.
const (
	// ReasonConsulServiceAmbiguous: the Service's pods register under different
	// Consul names, so no one Consul service is the backend.
	ReasonConsulServiceAmbiguous = "ConsulServiceAmbiguous"
	// ReasonMultiPortPod: a pod of the Service names several Consul services (one per
	// port), which consul-k8s registers under the Service's name per port in a way
	// the API gateway cannot pick a port of.
	ReasonMultiPortPod = "MultiPortPod"
	// ReasonPortNotRegistered: the Service port the backendRef names leads to a pod
	// port other than the one consul-k8s registers the pod with; Consul's routes have
	// no port, so the traffic would reach the registered one.
	ReasonPortNotRegistered = "PortNotRegistered"
)

// Problem says why a backend's pods leave it without a usable Consul service.
type Problem struct {
	Reason  string
	Message string
}

// Resolution is the Consul service a backend Service is.
type Resolution struct {
	// Service is the Consul service name (before any prefix or namespace placement):
	// the name the pods agree on, or the Service's name when no pod is registered.
	Service string
	// Pods counts the registered pods that agree on it; 0 when none is known, and the
	// Service's name stands (instances may be registered by other means).
	Pods int
}

// Renamed reports whether the Consul service is not named after the Service.
func (r Resolution) Renamed(svc *corev1.Service) bool { return r.Service != svc.Name }

// Resolve returns the Consul service the Service svc is, given pods (any pods; those
// consul-k8s registers for svc are picked out with Registered), and checks that port,
// the Service port a backendRef names, is the port they are registered with. ref names
// the backendRef in messages ("namespace/name"). It returns a Problem when the pods
// disagree on the name, one names several services, or one is registered with
// another port.
func Resolve(ref string, svc *corev1.Service, port *corev1.ServicePort, pods []*corev1.Pod) (Resolution, *Problem) {
	registered := Registered(svc, pods)
	if len(registered) == 0 {
		return Resolution{Service: svc.Name}, nil
	}
	byName := map[string][]string{}
	for _, pod := range registered {
		if name := pod.Annotations[ServiceAnnotation]; strings.Contains(name, ",") {
			return Resolution{}, &Problem{
				Reason: ReasonMultiPortPod,
				Message: fmt.Sprintf("backendRef %s: pod %s is a multi-port pod (its %s annotation %q names several Consul services), which Consul's API gateway cannot route to",
					ref, pod.Name, ServiceAnnotation, name),
			}
		}
		name := RegisteredName(svc, pod)
		byName[name] = append(byName[name], pod.Name)
	}
	if len(byName) > 1 {
		return Resolution{}, &Problem{
			Reason: ReasonConsulServiceAmbiguous,
			Message: fmt.Sprintf("backendRef %s: the Service's pods register under different Consul services (%s), so no one Consul service is the backend; give them one %s annotation",
				ref, describeNames(byName), ServiceAnnotation),
		}
	}
	var name string
	for n := range byName {
		name = n
	}
	if port != nil {
		for _, pod := range registered {
			if p := portProblem(ref, port, pod); p != nil {
				return Resolution{}, p
			}
		}
	}
	return Resolution{Service: name, Pods: len(registered)}, nil
}

// describeNames lists each name with its pods: `"a" (pods p1, p2), "b" (pod p3)`.
func describeNames(byName map[string][]string) string {
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		pods := byName[n]
		slices.Sort(pods)
		noun := "pod"
		if len(pods) > 1 {
			noun = "pods"
		}
		parts[i] = fmt.Sprintf("%q (%s %s)", n, noun, strings.Join(pods, ", "))
	}
	return strings.Join(parts, ", ")
}

// portProblem compares the pod port the Service port leads to with the port the pod
// is registered with.
func portProblem(ref string, port *corev1.ServicePort, pod *corev1.Pod) *Problem {
	registered, how := RegisteredPort(pod)
	target, ok := TargetPort(port, pod)
	switch {
	case registered == 0:
		return &Problem{
			Reason: ReasonPortNotRegistered,
			Message: fmt.Sprintf("backendRef %s port %d: pod %s is registered in Consul without a port (%s), so nothing would receive the traffic; set its %s annotation",
				ref, port.Port, pod.Name, how, PortAnnotation),
		}
	case !ok:
		return &Problem{
			Reason: ReasonPortNotRegistered,
			Message: fmt.Sprintf("backendRef %s port %d: its targetPort %q is no container port of pod %s, which Consul knows on port %d (%s)",
				ref, port.Port, port.TargetPort.String(), pod.Name, registered, how),
		}
	case target != registered:
		return &Problem{
			Reason: ReasonPortNotRegistered,
			Message: fmt.Sprintf("backendRef %s port %d leads to port %d of pod %s, but consul-k8s registers that pod with port %d (%s), and Consul's routes reach only that port: name the Service port whose targetPort is %d, or set the pods' %s annotation",
				ref, port.Port, target, pod.Name, registered, how, registered, PortAnnotation),
		}
	}
	return nil
}

// Registered returns the pods among pods that consul-k8s registers for svc: injected,
// in its namespace, selected by its selector, neither finished nor being deleted,
// not ignored, and not bound to another Service by their kubernetes-service
// annotation. None when the Service itself is ignored or has no selector.
func Registered(svc *corev1.Service, pods []*corev1.Pod) []*corev1.Pod {
	if ignored(svc.Labels) || len(svc.Spec.Selector) == 0 {
		return nil
	}
	selector := labels.SelectorFromValidatedSet(svc.Spec.Selector)
	var out []*corev1.Pod
	for _, pod := range pods {
		if registers(svc, selector, pod) {
			out = append(out, pod)
		}
	}
	return out
}

func registers(svc *corev1.Service, selector labels.Selector, pod *corev1.Pod) bool {
	switch {
	case pod.Namespace != svc.Namespace, pod.Labels[InjectStatusLabel] != Injected, !selector.Matches(labels.Set(pod.Labels)):
		return false
	case pod.DeletionTimestamp != nil, pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed:
		return false
	case ignored(pod.Labels), ignored(pod.Annotations):
		return false
	}
	if only, ok := pod.Annotations[KubernetesServiceAnnotation]; ok && only != svc.Name {
		return false
	}
	return true
}

// ignored reports a truthy service-ignore label (or annotation), as consul-k8s reads it.
func ignored(m map[string]string) bool {
	v, ok := m[ServiceIgnoreLabel]
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// RegisteredName is the Consul service consul-k8s registers pod under as an endpoint
// of svc: its connect-service annotation, unless empty or a list, else svc's name.
func RegisteredName(svc *corev1.Service, pod *corev1.Pod) string {
	if name := pod.Annotations[ServiceAnnotation]; name != "" && !strings.Contains(name, ",") {
		return name
	}
	return svc.Name
}

// ConsulNames returns the Consul services the Service svc puts instances into, given
// pods: the names its registered pods are registered under. None when no pod is
// registered: consul-k8s registers nothing for an empty, ignored or selector-less
// Service, so such a Service takes no part in a Consul name. Sorted, each once.
func ConsulNames(svc *corev1.Service, pods []*corev1.Pod) []string {
	var names []string
	for _, pod := range Registered(svc, pods) {
		if n := RegisteredName(svc, pod); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// RegisteredPort is the port consul-k8s registers pod with, and how it was found. The
// connect-service-port annotation names a container port (of any container) or is a
// number (consul-k8s's common.PortValue); without it, the webhook's default is the
// first port of the first container. 0 when there is none.
func RegisteredPort(pod *corev1.Pod) (int32, string) {
	if raw, ok := pod.Annotations[PortAnnotation]; ok && raw != "" {
		raw = strings.Split(raw, ",")[0]
		if p, ok := containerPort(pod, raw); ok {
			return p, fmt.Sprintf("its %s annotation names container port %q", PortAnnotation, raw)
		}
		if n, err := strconv.ParseInt(raw, 0, 32); err == nil && n > 0 {
			return int32(n), fmt.Sprintf("its %s annotation", PortAnnotation)
		}
		return 0, fmt.Sprintf("its %s annotation %q is neither a container port's name nor a number", PortAnnotation, raw)
	}
	if len(pod.Spec.Containers) > 0 && len(pod.Spec.Containers[0].Ports) > 0 {
		return pod.Spec.Containers[0].Ports[0].ContainerPort, fmt.Sprintf("the first port of its first container, as it has no %s annotation", PortAnnotation)
	}
	return 0, fmt.Sprintf("no %s annotation and no container port", PortAnnotation)
}

// TargetPort is the pod port a Service port leads to: its targetPort's number, the
// container port its targetPort names, or the Service port itself when targetPort is
// unset. ok is false for a name no container port of pod has.
func TargetPort(port *corev1.ServicePort, pod *corev1.Pod) (int32, bool) {
	switch {
	case port.TargetPort.Type == intstr.String && port.TargetPort.StrVal != "":
		return containerPort(pod, port.TargetPort.StrVal)
	case port.TargetPort.Type == intstr.Int && port.TargetPort.IntVal != 0:
		return port.TargetPort.IntVal, true
	default:
		return port.Port, true
	}
}

// containerPort finds the container port named name in any container of pod.
func containerPort(pod *corev1.Pod, name string) (int32, bool) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// Trim keeps of a pod only what this package reads, as a new object: name,
// namespace, resourceVersion, labels, the annotations of Annotations, the deletion
// timestamp, the containers' ports (name and number) and the phase. A cache of
// injected pods holds these and nothing else.
func Trim(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{}
	out.Name, out.Namespace, out.ResourceVersion = pod.Name, pod.Namespace, pod.ResourceVersion
	out.Labels = pod.Labels
	out.DeletionTimestamp = pod.DeletionTimestamp
	for _, key := range Annotations {
		if v, ok := pod.Annotations[key]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[key] = v
		}
	}
	if len(pod.Spec.Containers) > 0 {
		out.Spec.Containers = make([]corev1.Container, len(pod.Spec.Containers))
		for i, c := range pod.Spec.Containers {
			if len(c.Ports) == 0 {
				continue
			}
			ports := make([]corev1.ContainerPort, len(c.Ports))
			for j, p := range c.Ports {
				ports[j] = corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort}
			}
			out.Spec.Containers[i].Ports = ports
		}
	}
	out.Status.Phase = pod.Status.Phase
	return out
}

// SameResolution reports whether two trimmed versions of a pod resolve alike: every
// field Trim keeps but the resourceVersion is equal.
func SameResolution(a, b *corev1.Pod) bool {
	if a.Status.Phase != b.Status.Phase || (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) {
		return false
	}
	if !maps.Equal(a.Labels, b.Labels) || !maps.Equal(a.Annotations, b.Annotations) {
		return false
	}
	return slices.EqualFunc(a.Spec.Containers, b.Spec.Containers, func(x, y corev1.Container) bool {
		return slices.Equal(x.Ports, y.Ports)
	})
}
