package sync

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/listers"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// parameters is the decision on the GatewayConfig an object names as its parameters.
type parameters struct {
	// config is the GatewayConfig named; nil when none is named or problem is set.
	config *v1alpha1.GatewayConfig
	// problem says why the reference cannot be used; "" when it can.
	problem string
}

// classParameters judges a class's parametersRef.
func (d *decider) classParameters(class *gatewayv1.GatewayClass) (parameters, error) {
	return classParameters(d.configs, class)
}

func classParameters(configs listers.ResourceIndexer[*v1alpha1.GatewayConfig], class *gatewayv1.GatewayClass) (parameters, error) {
	ref, ok := gatewayapi.ClassParameters(class)
	if !ok {
		return parameters{}, nil
	}
	return resolveParameters(configs, ref)
}

// GatewayConfigFor returns the GatewayConfig a Gateway of class is deployed with: the
// one its own spec.infrastructure.parametersRef names, else its class's; nil when
// neither names one. problem says why a named one cannot be used, as the Gateway's or
// the class's Accepted condition says it.
func GatewayConfigFor(configs listers.ResourceIndexer[*v1alpha1.GatewayConfig], gw *gatewayv1.Gateway, class *gatewayv1.GatewayClass) (config *v1alpha1.GatewayConfig, problem string, err error) {
	p, err := classParameters(configs, class)
	if err != nil || p.problem != "" {
		return nil, p.problem, err
	}
	if ref, ok := gatewayapi.GatewayParameters(gw); ok {
		p, err = resolveParameters(configs, ref)
	}
	return p.config, p.problem, err
}

// gatewayParameters judges a Gateway's own spec.infrastructure.parametersRef; a
// Gateway without one is deployed with its class's parameters.
func (d *decider) gatewayParameters(gw *gatewayv1.Gateway) (parameters, bool, error) {
	ref, ok := gatewayapi.GatewayParameters(gw)
	if !ok {
		return parameters{}, false, nil
	}
	p, err := resolveParameters(d.configs, ref)
	return p, true, err
}

// resolveParameters finds and validates the GatewayConfig ref names. A missing config
// is a problem of the reference, not an error: it may be created later, and its event
// brings the referrers back (informers.GatewayClassParametersIndex).
func resolveParameters(configs listers.ResourceIndexer[*v1alpha1.GatewayConfig], ref gatewayapi.ParametersRef) (parameters, error) {
	if ref.Problem != "" {
		return parameters{problem: ref.Problem}, nil
	}
	config, err := listers.NewNamespaced(configs, ref.Config.Namespace).Get(ref.Config.Name)
	if apierrors.IsNotFound(err) {
		return parameters{problem: fmt.Sprintf("GatewayConfig %s does not exist", ref.Config)}, nil
	}
	if err != nil {
		return parameters{}, fmt.Errorf("get GatewayConfig %s: %w", ref.Config, err)
	}
	if problems := config.Spec.Validate(); len(problems) > 0 {
		return parameters{problem: fmt.Sprintf("GatewayConfig %s is invalid: %s", ref.Config, strings.Join(problems, "; "))}, nil
	}
	return parameters{config: config}, nil
}
