package dataplane

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// unfit says why a Gateway's ServiceAccount, Deployment, Service and pods cannot be
// written under the name and labels this controller gives them; "" when they can.
// Every value checked is a fact of the Gateway (its name, its class's name, its
// spec.infrastructure), so no retry changes the answer: nothing is written for an
// unfit Gateway, and its Programmed condition says why (State).
//
// None is shortened to fit, unlike a long Name: the gateway-name label must be the
// Gateway's name (GEP-1762), the owned-object event handlers find the Gateway by it,
// and the admission policy (deploy/validatingadmissionpolicy.yaml) accepts an object
// only when the label equals its owner's name and its name is "<gateway>-<class>",
// which a name made of anything else could not show.
func unfit(gw *gatewayv1.Gateway, allowed gatewayapi.KeyAllowlist) string {
	problems := nameProblems(gw)
	problems = append(problems, labelProblems(objectLabels(Gateway{Gateway: gw}, allowed))...)
	for _, err := range apivalidation.ValidateAnnotations(infrastructureAnnotations(gw, allowed), field.NewPath("spec", "infrastructure", "annotations")) {
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		return ""
	}
	return "The Gateway's pods cannot be deployed, and nothing is written for them: " + strings.Join(problems, "; ")
}

// nameProblems checks the name of the Gateway's objects against the strictest of
// their kinds', a Service's: a DNS-1123 label. Name keeps it within 63 characters; a
// '.' in the Gateway's or its class's name is what breaks it.
func nameProblems(gw *gatewayv1.Gateway) []string {
	name := Name(gw)
	errs := validation.IsDNS1123Label(name)
	if len(errs) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("its ServiceAccount, Deployment and Service would be named %q (<gateway>-<class>), which is not a valid Service name: %s; "+
		"a Gateway deployed by this controller needs a name, and a GatewayClass name, without '.'", name, strings.Join(errs, ", "))}
}

// labelHints say what to do about a label of ours whose value does not fit.
var labelHints = map[string]string{
	GatewayNameLabel:  "the label holds the Gateway's name (GEP-1762), so a Gateway deployed by this controller needs a name of at most 63 characters",
	GatewayClassLabel: "the label holds the GatewayClass's name (GEP-1762), so a class whose Gateways this controller deploys needs a name of at most 63 characters",
}

// labelProblems checks every label of the Gateway's objects, in key order.
func labelProblems(labels map[string]string) []string {
	var problems []string
	for _, key := range slices.Sorted(maps.Keys(labels)) {
		value := labels[key]
		errs := append(validation.IsQualifiedName(key), validation.IsValidLabelValue(value)...)
		if len(errs) == 0 {
			continue
		}
		problem := fmt.Sprintf("label %s=%q: %s", key, value, strings.Join(errs, ", "))
		if hint, ok := labelHints[key]; ok {
			problem += " (" + hint + ")"
		}
		problems = append(problems, problem)
	}
	return problems
}
