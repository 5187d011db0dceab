package gatewayapi

import (
	"fmt"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

// ParametersRef is a parametersRef of a GatewayClass or a Gateway, resolved: the
// GatewayConfig it names, or why it names none.
type ParametersRef struct {
	// Config is the GatewayConfig named; zero when Problem is set.
	Config cache.ObjectName
	// Problem says why the reference cannot name a GatewayConfig: another group or
	// kind, or no namespace on a class's reference.
	Problem string
}

// ClassParameters resolves a class's spec.parametersRef; ok is false when it has none.
// GatewayConfig is namespaced, so the reference must give the namespace.
func ClassParameters(class *gatewayv1.GatewayClass) (ref ParametersRef, ok bool) {
	p := class.Spec.ParametersRef
	if p == nil {
		return ParametersRef{}, false
	}
	if problem := configKindProblem(p.Group, p.Kind, p.Name); problem != "" {
		return ParametersRef{Problem: problem}, true
	}
	if p.Namespace == nil || *p.Namespace == "" {
		return ParametersRef{Problem: fmt.Sprintf("parametersRef to %s %s has no namespace; GatewayConfig is namespaced", p.Kind, p.Name)}, true
	}
	return ParametersRef{Config: cache.ObjectName{Namespace: string(*p.Namespace), Name: p.Name}}, true
}

// GatewayParameters resolves a Gateway's spec.infrastructure.parametersRef, which
// names a GatewayConfig in the Gateway's namespace; ok is false when it has none.
func GatewayParameters(gateway *gatewayv1.Gateway) (ref ParametersRef, ok bool) {
	if gateway.Spec.Infrastructure == nil || gateway.Spec.Infrastructure.ParametersRef == nil {
		return ParametersRef{}, false
	}
	p := gateway.Spec.Infrastructure.ParametersRef
	if problem := configKindProblem(p.Group, p.Kind, p.Name); problem != "" {
		return ParametersRef{Problem: problem}, true
	}
	return ParametersRef{Config: cache.ObjectName{Namespace: gateway.Namespace, Name: p.Name}}, true
}

func configKindProblem(group gatewayv1.Group, kind gatewayv1.Kind, name string) string {
	if string(group) == v1alpha1.GroupName && kind == v1alpha1.GatewayConfigKind {
		return ""
	}
	return fmt.Sprintf("parametersRef names %s %s of group %q; this controller takes %s of group %s",
		kind, name, group, v1alpha1.GatewayConfigKind, v1alpha1.GroupName)
}
