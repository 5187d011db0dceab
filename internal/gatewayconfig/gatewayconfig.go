// Package gatewayconfig decides which GatewayConfig an object is deployed with: the one
// its GatewayClass names as parameters, with what a Gateway's own
// spec.infrastructure.parametersRef may change on top. The status workers judge the
// references with it (a GatewayClass's or a Gateway's Accepted condition says why one
// cannot be used), and the data plane and the identity manager deploy with its answer,
// so the rules are written once.
package gatewayconfig

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/listers"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// Configs is the GatewayConfig cache the decisions read.
type Configs = listers.ResourceIndexer[*v1alpha1.GatewayConfig]

// Resolved is the decision on the GatewayConfig an object names as its parameters.
type Resolved struct {
	// Config is the GatewayConfig named; nil when none is named or Problem is set.
	Config *v1alpha1.GatewayConfig
	// Problem says why the reference cannot be used; "" when it can.
	Problem string
}

// OfClass judges a class's parametersRef.
func OfClass(configs Configs, class *gatewayv1.GatewayClass) (Resolved, error) {
	ref, ok := gatewayapi.ClassParameters(class)
	if !ok {
		return Resolved{}, nil
	}
	return resolve(configs, ref)
}

// For returns the GatewayConfig a Gateway of class is deployed with: its class's,
// with what the Gateway's own spec.infrastructure.parametersRef may change on top
// (effective); nil when neither names one. problem says why a named one cannot be
// used, as the Gateway's or the class's Accepted condition says it.
func For(configs Configs, gw *gatewayv1.Gateway, class *gatewayv1.GatewayClass) (config *v1alpha1.GatewayConfig, problem string, err error) {
	p, err := OfClass(configs, class)
	if err != nil || p.Problem != "" {
		return nil, p.Problem, err
	}
	own, _, err := OfGateway(configs, gw, p.Config)
	if err != nil || own.Problem != "" {
		return nil, own.Problem, err
	}
	return own.Config, "", nil
}

// OfGateway judges a Gateway's own spec.infrastructure.parametersRef against its
// class's GatewayConfig (nil for none). The result's Config is the one the Gateway is
// deployed with: the class's when the Gateway names none. named is false then.
func OfGateway(configs Configs, gw *gatewayv1.Gateway, classConfig *v1alpha1.GatewayConfig) (r Resolved, named bool, err error) {
	ref, ok := gatewayapi.GatewayParameters(gw)
	if !ok {
		return Resolved{Config: classConfig}, false, nil
	}
	p, err := resolve(configs, ref)
	if err != nil || p.Problem != "" {
		return p, true, err
	}
	config, problem := effective(classConfig, p.Config)
	if problem != "" {
		return Resolved{Problem: fmt.Sprintf("GatewayConfig %s %s", ref.Config, problem)}, true, nil
	}
	return Resolved{Config: config}, true, nil
}

// resolve finds and validates the GatewayConfig ref names. A missing config
// is a problem of the reference, not an error: it may be created later, and its event
// brings the referrers back (the informers index of GatewayClasses by parametersRef).
func resolve(configs Configs, ref gatewayapi.ParametersRef) (Resolved, error) {
	if ref.Problem != "" {
		return Resolved{Problem: ref.Problem}, nil
	}
	config, err := listers.NewNamespaced(configs, ref.Config.Namespace).Get(ref.Config.Name)
	if apierrors.IsNotFound(err) {
		return Resolved{Problem: fmt.Sprintf("GatewayConfig %s does not exist", ref.Config)}, nil
	}
	if err != nil {
		return Resolved{}, fmt.Errorf("get GatewayConfig %s: %w", ref.Config, err)
	}
	if problems := config.Spec.Validate(); len(problems) > 0 {
		return Resolved{Problem: fmt.Sprintf("GatewayConfig %s is invalid: %s", ref.Config, strings.Join(problems, "; "))}, nil
	}
	return Resolved{Config: config}, nil
}

// maxGatewayReplicas bounds the replicas a Gateway's own GatewayConfig may ask for
// when its class's GatewayConfig sets no max (consul-k8s's default maxInstances).
const maxGatewayReplicas = 8

// effective is the GatewayConfig a Gateway with its own GatewayConfig is deployed
// with: the class's (nil for none), with the fields a Gateway may choose taken from
// its own. Whoever may create a GatewayConfig in a namespace is a tenant there; the
// class's GatewayConfig is its owner's. So a Gateway's may not choose what the pods
// run or where they connect (image, consul: address, TLS, auth method), nor which of
// the Gateway's own annotations are copied to its Service, and asks for replicas within
// the class's bounds. problem says which rule own breaks.
func effective(class, own *v1alpha1.GatewayConfig) (*v1alpha1.GatewayConfig, string) {
	if locked := classOnlyFields(own.Spec); len(locked) > 0 {
		return nil, fmt.Sprintf("sets %s, which only its GatewayClass's GatewayConfig may set", strings.Join(locked, " and "))
	}
	var spec v1alpha1.GatewayConfigSpec
	if class != nil {
		spec = *class.Spec.DeepCopy()
	}
	o := own.Spec.DeepCopy()
	if o.Replicas != nil {
		r, problem := boundedReplicas(spec.Replicas, o.Replicas)
		if problem != "" {
			return nil, problem
		}
		spec.Replicas = r
	}
	if o.Resources != nil {
		spec.Resources = o.Resources
	}
	if o.NodeSelector != nil {
		spec.NodeSelector = o.NodeSelector
	}
	if o.Tolerations != nil {
		spec.Tolerations = o.Tolerations
	}
	if o.LogLevel != "" {
		spec.LogLevel = o.LogLevel
	}
	if o.Metrics != nil {
		spec.Metrics = o.Metrics
	}
	if o.Service != nil && o.Service.Type != nil {
		if spec.Service == nil {
			spec.Service = &v1alpha1.ServiceConfig{}
		}
		spec.Service.Type = o.Service.Type
	}
	config := own.DeepCopy()
	config.Spec = spec
	return config, ""
}

// classOnlyFields are the fields of a Gateway's own GatewayConfig that only a class's
// may set.
func classOnlyFields(spec v1alpha1.GatewayConfigSpec) []string {
	var fields []string
	if spec.Image != "" {
		fields = append(fields, "spec.image")
	}
	if spec.Consul != nil {
		fields = append(fields, "spec.consul")
	}
	if spec.Service != nil && len(spec.Service.CopyAnnotations) > 0 {
		fields = append(fields, "spec.service.copyAnnotations")
	}
	return fields
}

// boundedReplicas is what a Gateway's own GatewayConfig asks for, within its class's
// min and max (maxGatewayReplicas when the class sets none); problem names the
// request outside them.
func boundedReplicas(class, own *v1alpha1.Replicas) (*v1alpha1.Replicas, string) {
	lo, hi := int32(0), int32(maxGatewayReplicas)
	if class != nil && class.Min != nil {
		lo = *class.Min
	}
	if class != nil && class.Max != nil {
		hi = *class.Max
	}
	for _, f := range []struct {
		name string
		n    *int32
	}{{"default", own.Default}, {"min", own.Min}, {"max", own.Max}} {
		if f.n != nil && (*f.n < lo || *f.n > hi) {
			return nil, fmt.Sprintf("asks for spec.replicas.%s %d; its class allows %d to %d", f.name, *f.n, lo, hi)
		}
	}
	r := own.DeepCopy()
	if r.Min == nil {
		r.Min = &lo
	}
	if r.Max == nil {
		r.Max = &hi
	}
	if r.Default == nil && class != nil && class.Default != nil {
		r.Default = new(*class.Default)
	}
	return r, ""
}
