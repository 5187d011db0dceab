package dataplane

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// policyRefusal is the API server's answer when the ValidatingAdmissionPolicy of
// deploy/ refuses a request by rule.
func policyRefusal(resource, name, rule string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, name,
		errors.New("ValidatingAdmissionPolicy 'consul-gateway-controller' with binding 'consul-gateway-controller' denied request: rule "+rule+": refused"))
}

// CheckAdmissionPolicy passes only on the policy's refusal of its probe by the rule
// namespace; anything else says the policy is not in force, or that the check failed.
func TestCheckAdmissionPolicy(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer error // nil: admitted
		want   string
	}{
		{"refused by the policy's rule namespace", policyRefusal("serviceaccounts", policyProbeName, "namespace"), "in force"},
		{"admitted", nil, "not in force"},
		{"refused by RBAC", apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, policyProbeName,
			errors.New(`User "x" cannot create resource "serviceaccounts"`)), "check failed"},
		{"refused by another rule", policyRefusal("serviceaccounts", policyProbeName, "managed-by"), "check failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := fake.NewClientset()
			var dryRun []string
			client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
				dryRun = a.(k8stesting.CreateActionImpl).CreateOptions.DryRun
				return true, nil, c.answer
			})
			err := CheckAdmissionPolicy(t.Context(), client)
			got := "in force"
			switch {
			case errors.Is(err, errAdmissionPolicyNotInForce):
				got = "not in force"
			case err != nil:
				got = "check failed"
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("CheckAdmissionPolicy: %v (-want +got):\n%s", err, diff)
			}
			if diff := cmp.Diff([]string{"All"}, dryRun); diff != "" {
				t.Errorf("the probe's dryRun (-want +got):\n%s", diff)
			}
		})
	}
}

// An admission policy's refusal of a gateway object becomes the Gateway's problem,
// with the rule that refused, and the sync asks to be retried: the namespace's label,
// which lifts it, is no event of the Gateway.
func TestPolicyRefusalBecomesTheGatewaysProblem(t *testing.T) {
	h := newProblemHarness(t, acceptedGateway("web"))
	refusal := policyRefusal("deployments", Name(h.gw), "namespace-label")
	h.client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, refusal
	})
	if _, err := h.c.sync(t.Context(), cache.MetaObjectToName(h.gw)); !errors.Is(err, refusal) {
		t.Errorf("sync: %v, want the refusal, to be retried", err)
	}
	if state := h.c.State(h.gw); !strings.HasPrefix(state.Invalid, "An admission policy refused a gateway object: ") ||
		!strings.Contains(state.Invalid, "rule namespace-label: refused") {
		t.Errorf("State.Invalid = %q, want the policy's refusal with its rule", state.Invalid)
	}
}
