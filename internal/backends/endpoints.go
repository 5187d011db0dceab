package backends

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// ReasonEndpointsUnregistered: a Service without a selector has endpoints that are
// not pods consul-k8s registers, so no Consul service is known for them.
const ReasonEndpointsUnregistered = "EndpointsNotRegistered"

// EndpointSliceManagedByController is the managed-by label value of the EndpointSlices
// Kubernetes makes from a Service's selector. A Service without a selector has none of
// these; its slices are someone else's (Kubernetes' mirroring of hand-made Endpoints
// included), so only slices without this value need watching.
const EndpointSliceManagedByController = "endpointslice-controller.k8s.io"

// endpointSliceMirrored is the managed-by label value of the EndpointSlices Kubernetes
// mirrors from an Endpoints object: consul-k8s's endpoints controller reads Endpoints,
// so it registers the pods of those as instances of the Service itself.
const endpointSliceMirrored = "endpointslicemirroring-controller.k8s.io"

// ResolveEndpoints returns the Consul service a Service without a selector is, through
// its EndpointSlices: consul-k8s registers a pod under its connect-service annotation,
// or else under the name of each Service that selects it (Registered), so a Service
// whose endpoints are such pods (targetRef kind Pod) sends traffic to the Consul
// service they are registered under. Every endpoint must be a registered pod and they
// must agree on one name; a Service without any endpoint keeps its own name (its
// instances may be registered by other means), as does a Service with a selector
// (Resolve). services are the Services of svc's namespace, pods the injected pods.
// port, the Service port a backendRef names, must lead to the port each pod is
// registered with.
func ResolveEndpoints(ref string, svc *corev1.Service, port *corev1.ServicePort, endpointSlices []*discoveryv1.EndpointSlice, services []*corev1.Service, pods []*corev1.Pod) (Resolution, *Problem) {
	byName := map[string][]string{}
	registered := 0
	for _, slice := range endpointSlices {
		for _, ep := range slice.Endpoints {
			pod, problem := endpointPod(ref, svc, ep, pods)
			if problem != nil {
				return Resolution{}, problem
			}
			name, problem := podConsulName(ref, svc, slice, pod, services)
			if problem != nil {
				return Resolution{}, problem
			}
			if problem := endpointPortProblem(ref, port, slice, pod); problem != nil {
				return Resolution{}, problem
			}
			if !slices.Contains(byName[name], pod.Name) {
				byName[name] = append(byName[name], pod.Name)
				registered++
			}
		}
	}
	switch len(byName) {
	case 0:
		return Resolution{Service: svc.Name}, nil
	case 1:
		for name := range byName {
			return Resolution{Service: name, Pods: registered}, nil
		}
	}
	return Resolution{}, &Problem{
		Reason: ReasonConsulServiceAmbiguous,
		Message: fmt.Sprintf("backendRef %s: the pods the Service's EndpointSlices point at register under different Consul services (%s), so no one Consul service is the backend",
			ref, describeNames(byName)),
	}
}

// endpointPod is the injected pod an endpoint of svc points at.
func endpointPod(ref string, svc *corev1.Service, ep discoveryv1.Endpoint, pods []*corev1.Pod) (*corev1.Pod, *Problem) {
	target := ep.TargetRef
	if target == nil || target.Kind != "Pod" || (target.Namespace != "" && target.Namespace != svc.Namespace) {
		return nil, &Problem{
			Reason: ReasonEndpointsUnregistered,
			Message: fmt.Sprintf("backendRef %s: the Service has no selector, and its endpoint %s has no targetRef to a pod of its namespace, so no Consul service is known for it; point every endpoint at a pod consul-k8s injected",
				ref, strings.Join(ep.Addresses, ",")),
		}
	}
	i := slices.IndexFunc(pods, func(p *corev1.Pod) bool { return p.Namespace == svc.Namespace && p.Name == target.Name })
	if i < 0 {
		return nil, &Problem{
			Reason:  ReasonEndpointsUnregistered,
			Message: fmt.Sprintf("backendRef %s: the Service's endpoint pod %s is not a pod consul-k8s injected, so it is not in Consul", ref, target.Name),
		}
	}
	return pods[i], nil
}

// podConsulName is the one Consul service pod, an endpoint of svc in slice, is
// registered under. consul-k8s registers the pods of an Endpoints object as instances
// of its Service (RegisteredName), so a slice mirrored from one names svc's; other
// slices are not read by consul-k8s, and the pod is in Consul only as the Services
// that select it register it.
func podConsulName(ref string, svc *corev1.Service, slice *discoveryv1.EndpointSlice, pod *corev1.Pod, services []*corev1.Service) (string, *Problem) {
	if name := pod.Annotations[ServiceAnnotation]; strings.Contains(name, ",") {
		return "", &Problem{
			Reason: ReasonMultiPortPod,
			Message: fmt.Sprintf("backendRef %s: pod %s is a multi-port pod (its %s annotation %q names several Consul services), which Consul's API gateway cannot route to",
				ref, pod.Name, ServiceAnnotation, name),
		}
	}
	if slice.Labels[discoveryv1.LabelManagedBy] == endpointSliceMirrored && endpointRegisters(svc, pod) {
		return RegisteredName(svc, pod), nil
	}
	var names []string
	for _, s := range services {
		if len(Registered(s, []*corev1.Pod{pod})) == 1 && !slices.Contains(names, RegisteredName(s, pod)) {
			names = append(names, RegisteredName(s, pod))
		}
	}
	switch len(names) {
	case 1:
		return names[0], nil
	case 0:
		return "", &Problem{
			Reason:  ReasonEndpointsUnregistered,
			Message: fmt.Sprintf("backendRef %s: the Service's endpoint pod %s is selected by no Service consul-k8s registers it for, so it is not in Consul", ref, pod.Name),
		}
	}
	slices.Sort(names)
	return "", &Problem{
		Reason: ReasonConsulServiceAmbiguous,
		Message: fmt.Sprintf("backendRef %s: the Service's endpoint pod %s is registered under several Consul services (%s), so no one Consul service is the backend; give it a %s annotation",
			ref, pod.Name, strings.Join(names, ", "), ServiceAnnotation),
	}
}

// endpointRegisters reports whether consul-k8s registers pod as an endpoint of svc
// from svc's Endpoints: neither is ignored, and the pod is not bound to another
// Service by its kubernetes-service annotation.
func endpointRegisters(svc *corev1.Service, pod *corev1.Pod) bool {
	if ignored(svc.Labels) || ignored(pod.Labels) || ignored(pod.Annotations) {
		return false
	}
	only, ok := pod.Annotations[KubernetesServiceAnnotation]
	return !ok || only == svc.Name
}

// endpointPortProblem compares the port of slice for the Service port with the port
// pod is registered with: Consul's routes have no port, so traffic reaches that one.
func endpointPortProblem(ref string, port *corev1.ServicePort, slice *discoveryv1.EndpointSlice, pod *corev1.Pod) *Problem {
	if port == nil {
		return nil
	}
	registered, how := RegisteredPort(pod)
	i := slices.IndexFunc(slice.Ports, func(p discoveryv1.EndpointPort) bool {
		return p.Name != nil && *p.Name == port.Name || p.Name == nil && port.Name == ""
	})
	if i < 0 || slice.Ports[i].Port == nil {
		return &Problem{
			Reason:  ReasonPortNotRegistered,
			Message: fmt.Sprintf("backendRef %s port %d: EndpointSlice %s has no port named %q, so the pod port it leads to is unknown", ref, port.Port, slice.Name, port.Name),
		}
	}
	if target := *slice.Ports[i].Port; target != registered {
		return &Problem{
			Reason: ReasonPortNotRegistered,
			Message: fmt.Sprintf("backendRef %s port %d leads to port %d of pod %s (EndpointSlice %s), but consul-k8s registers that pod with port %d (%s), and Consul's routes reach only that port",
				ref, port.Port, target, pod.Name, slice.Name, registered, how),
		}
	}
	return nil
}
