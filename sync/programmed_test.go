package sync

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// The Gateway's Programmed condition for what its deployment says, once Consul has
// accepted its api-gateway entry.
func TestGatewayProgrammedByDeployment(t *testing.T) {
	clusterIP := []gatewayv1.GatewayStatusAddress{{Type: new(gatewayv1.IPAddressType), Value: "10.96.0.10"}}
	const crashing = "pod apps/edge-a: container consul-dataplane: CrashLoopBackOff; last exit 1 (Error): failed to log in"
	type programmed struct{ Status, Reason, Message string }
	for _, tc := range []struct {
		name     string
		deployed contract.DeploymentState
		want     programmed
	}{{
		name:     "a Ready pod behind an address",
		deployed: contract.DeploymentState{Addresses: clusterIP, ReadyPods: 1},
		want:     programmed{"True", "Programmed", "Consul accepted the api-gateway entry, and gateway pods are Ready behind the Gateway's addresses"},
	}, {
		name:     "no pod Ready, none saying why",
		deployed: contract.DeploymentState{Addresses: clusterIP},
		want:     programmed{"False", "Pending", "Consul accepted the api-gateway entry; waiting for a gateway pod to be Ready"},
	}, {
		name:     "no pod Ready, one saying why",
		deployed: contract.DeploymentState{Addresses: clusterIP, PodProblem: crashing},
		want:     programmed{"False", "Pending", "Consul accepted the api-gateway entry; no gateway pod is Ready: " + crashing},
	}, {
		// A LoadBalancer's address would not make the pods serve.
		name:     "what the pods say comes before a missing address",
		deployed: contract.DeploymentState{PodProblem: crashing},
		want:     programmed{"False", "Pending", "Consul accepted the api-gateway entry; no gateway pod is Ready: " + crashing},
	}, {
		name:     "a Ready pod: what another pod says does not matter",
		deployed: contract.DeploymentState{Addresses: clusterIP, ReadyPods: 1, PodProblem: crashing},
		want:     programmed{"True", "Programmed", "Consul accepted the api-gateway entry, and gateway pods are Ready behind the Gateway's addresses"},
	}, {
		name:     "an object in the way",
		deployed: contract.DeploymentState{Problem: "Service apps/edge-ours exists and is not controlled by Gateway edge; rename or delete it", PodProblem: crashing},
		want:     programmed{"False", "Pending", "Service apps/edge-ours exists and is not controlled by Gateway edge; rename or delete it"},
	}, {
		name:     "a Gateway that cannot be deployed",
		deployed: contract.DeploymentState{Invalid: "The Gateway's pods cannot be deployed", Problem: "Gateway pods cannot log in to Consul"},
		want:     programmed{"False", "Invalid", "The Gateway's pods cannot be deployed"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := gatewayProgrammed(gatewayVerdict{accepted: true}, contract.Verdict{Known: true, Programmed: true}, &tc.deployed, nil, 4)
			if diff := cmp.Diff(tc.want, programmed{string(c.Status), c.Reason, c.Message}); diff != "" {
				t.Errorf("Programmed (-want +got):\n%s", diff)
			}
			if c.ObservedGeneration != 4 {
				t.Errorf("observedGeneration %d, want 4", c.ObservedGeneration)
			}
		})
	}
}

// However long what the deployment says, the message fits a condition, cut at a
// character boundary.
func TestProgrammedMessageFitsACondition(t *testing.T) {
	long := contract.DeploymentState{Invalid: strings.Repeat("é", gatewayapi.MaxConditionMessage)}
	c := gatewayProgrammed(gatewayVerdict{accepted: true}, contract.Verdict{Known: true, Programmed: true}, &long, nil, 1)
	if len(c.Message) > gatewayapi.MaxConditionMessage || !utf8.ValidString(c.Message) || !strings.HasSuffix(c.Message, "é…") {
		t.Errorf("message of %d bytes, valid UTF-8 %v, ends %q; want at most %d, valid, cut with an ellipsis",
			len(c.Message), utf8.ValidString(c.Message), c.Message[len(c.Message)-8:], gatewayapi.MaxConditionMessage)
	}
}
