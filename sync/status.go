package sync

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/consts"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayconfig"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// gatewayClassStatus computes the status of a class of ours. bundleVersion is the
// bundle-version annotation of the installed Gateway API CRDs ("" when unknown).
// params is the decision on its parametersRef.
func gatewayClassStatus(class *gatewayv1.GatewayClass, params gatewayconfig.Resolved, bundleVersion string, caps consullimits.Capabilities, now metav1.Time) gatewayv1.GatewayClassStatus {
	gen := class.Generation
	accepted := condition(gatewayv1.GatewayClassConditionStatusAccepted, true, gatewayv1.GatewayClassReasonAccepted, "GatewayClass is accepted", gen)
	if params.Problem != "" {
		accepted = condition(gatewayv1.GatewayClassConditionStatusAccepted, false, gatewayv1.GatewayClassReasonInvalidParameters, params.Problem, gen)
	}
	if heldClass(class) {
		accepted.Message += "; the GatewayClass is being deleted: its Gateways are held as they are, and the class goes once they are deleted"
	}
	supported, message := bundleSupported(bundleVersion)
	reason := gatewayv1.GatewayClassReasonSupportedVersion
	if !supported {
		reason = gatewayv1.GatewayClassReasonUnsupportedVersion
	}
	return gatewayv1.GatewayClassStatus{
		Conditions: mergeConditions(class.Status.Conditions, []metav1.Condition{
			accepted,
			condition(gatewayv1.GatewayClassConditionStatusSupportedVersion, supported, reason, message, gen),
		}, now),
		SupportedFeatures: supportedFeatures(caps),
	}
}

// bundleSupported accepts CRDs of the Gateway API minor release this controller is
// built against (any patch release of it): patch releases do not change the API.
func bundleSupported(bundleVersion string) (bool, string) {
	built := utilversion.MustParseSemantic(consts.BundleVersion)
	installed, err := utilversion.ParseSemantic(bundleVersion)
	if err != nil {
		return false, fmt.Sprintf("the installed Gateway API CRDs have no valid bundle version (%q); this controller supports v%d.%d.x",
			bundleVersion, built.Major(), built.Minor())
	}
	if installed.Major() != built.Major() || installed.Minor() != built.Minor() {
		return false, fmt.Sprintf("the installed Gateway API CRDs are %s; this controller supports v%d.%d.x", bundleVersion, built.Major(), built.Minor())
	}
	return true, fmt.Sprintf("Gateway API %s is supported", bundleVersion)
}

// supportedFeatures lists, in the ascending order the API requires, the features
// implemented end to end for caps (consullimits.Features).
func supportedFeatures(caps consullimits.Capabilities) []gatewayv1.SupportedFeature {
	names := consullimits.SupportedFeatures(caps)
	out := make([]gatewayv1.SupportedFeature, len(names))
	for i, n := range names {
		out[i] = gatewayv1.SupportedFeature{Name: gatewayv1.FeatureName(n)}
	}
	return out
}

// gatewayStatus computes the status of a Gateway of one of our classes.
func (d *decider) gatewayStatus(gw *gatewayv1.Gateway, class *gatewayv1.GatewayClass, now metav1.Time) (gatewayv1.GatewayStatus, error) {
	v, err := d.evaluateGateway(gw, class)
	if err != nil {
		return gatewayv1.GatewayStatus{}, err
	}
	attached, err := d.attachedRoutes(gw, v)
	if err != nil {
		return gatewayv1.GatewayStatus{}, err
	}
	gen := gw.Generation
	deployed := d.deployed(gw)
	programmed := gatewayProgrammed(v, d.verdicts.Verdict(gatewayapi.GatewayKind, cache.MetaObjectToName(gw)), deployed, gw.Spec.Addresses, gen)
	status := gatewayv1.GatewayStatus{
		Conditions: mergeConditions(gw.Status.Conditions, []metav1.Condition{
			condition(gatewayv1.GatewayConditionAccepted, v.accepted, v.reason, v.message, gen),
			programmed,
		}, now),
	}
	if deployed != nil {
		status.Addresses = deployed.Addresses
	}
	// Only a Gateway that allows ListenerSets, or has some naming it, says how many
	// are attached: the others' status stays as it was before ListenerSets.
	if gw.Spec.AllowedListeners != nil || len(v.sets) > 0 {
		status.AttachedListenerSets = ptrTo(v.attachedListenerSets())
	}
	for i := range v.listeners {
		st := &v.listeners[i]
		status.Listeners = append(status.Listeners, gatewayv1.ListenerStatus{
			Name:           st.listener.Name,
			SupportedKinds: st.supportedKinds,
			AttachedRoutes: attached[st.listener.Name],
			Conditions:     mergeConditions(existingListenerConditions(gw, st.listener.Name), listenerConditions(st, programmed, gen), now),
		})
	}
	return status, nil
}

// deployed is the state of the Gateway's deployment, nil when this controller deploys
// no gateways.
func (d *decider) deployed(gw *gatewayv1.Gateway) *contract.DeploymentState {
	if d.deployments == nil {
		return nil
	}
	state := d.deployments.State(gw)
	return &state
}

// programmedCondition is the Gateway's Programmed condition for its verdict v.
func (d *decider) programmedCondition(gw *gatewayv1.Gateway, v gatewayVerdict, gen int64) metav1.Condition {
	return gatewayProgrammed(v, d.verdicts.Verdict(gatewayapi.GatewayKind, cache.MetaObjectToName(gw)), d.deployed(gw), gw.Spec.Addresses, gen)
}

func existingListenerConditions(gw *gatewayv1.Gateway, name gatewayv1.SectionName) []metav1.Condition {
	for _, l := range gw.Status.Listeners {
		if l.Name == name {
			return l.Conditions
		}
	}
	return nil
}

// gatewayProgrammed is the Gateway's Programmed condition once it is accepted:
// Consul's verdict on its api-gateway entry and, when this controller deploys the
// Gateway (deployed is not nil), an address and a Ready gateway pod.
func gatewayProgrammed(v gatewayVerdict, verdict contract.Verdict, deployed *contract.DeploymentState, requested []gatewayv1.GatewaySpecAddress, gen int64) metav1.Condition {
	const programmedType = gatewayv1.GatewayConditionProgrammed
	switch {
	case !v.accepted:
		return condition(programmedType, false, gatewayv1.GatewayReasonInvalid, "The Gateway is not accepted", gen)
	case v.unservable != "":
		return condition(programmedType, false, ReasonNotExpressible, v.unservable, gen)
	case deployed != nil && deployed.Invalid != "":
		return condition(programmedType, false, gatewayv1.GatewayReasonInvalid, gatewayapi.Truncate(deployed.Invalid, gatewayapi.MaxConditionMessage), gen)
	case deployed != nil && deployed.Problem != "":
		return condition(programmedType, false, gatewayv1.GatewayReasonPending, gatewayapi.Truncate(deployed.Problem, gatewayapi.MaxConditionMessage), gen)
	case !verdict.Known:
		return condition(programmedType, false, gatewayv1.GatewayReasonPending, "Waiting for Consul to accept the gateway", gen)
	case !verdict.Programmed:
		return condition(programmedType, false, verdict.Reason, verdict.Message, gen)
	case deployed == nil:
		return condition(programmedType, true, gatewayv1.GatewayReasonProgrammed, "Consul accepted the api-gateway entry", gen)
	case deployed.ReadyPods == 0 && deployed.PodProblem != "":
		// Before the address: pods that cannot start are what to fix first, and a
		// LoadBalancer's address would not make them serve.
		return condition(programmedType, false, gatewayv1.GatewayReasonPending,
			gatewayapi.Truncate("Consul accepted the api-gateway entry; no gateway pod is Ready: "+deployed.PodProblem, gatewayapi.MaxConditionMessage), gen)
	case len(unassignedAddresses(requested, deployed.Addresses)) > 0:
		return condition(programmedType, false, gatewayv1.GatewayReasonAddressNotAssigned,
			fmt.Sprintf("Consul accepted the api-gateway entry; the requested address %s is not the gateway Service's yet",
				strings.Join(unassignedAddresses(requested, deployed.Addresses), ", ")), gen)
	case len(deployed.Addresses) == 0:
		return condition(programmedType, false, gatewayv1.GatewayReasonAddressNotAssigned,
			"Consul accepted the api-gateway entry; the gateway's Service has no address yet (a LoadBalancer waits for its load balancer)", gen)
	case deployed.ReadyPods == 0:
		return condition(programmedType, false, gatewayv1.GatewayReasonPending,
			"Consul accepted the api-gateway entry; waiting for a gateway pod to be Ready", gen)
	default:
		return condition(programmedType, true, gatewayv1.GatewayReasonProgrammed,
			"Consul accepted the api-gateway entry, and gateway pods are Ready behind the Gateway's addresses", gen)
	}
}

func listenerConditions(st *listenerState, gatewayProgrammed metav1.Condition, gen int64) []metav1.Condition {
	accepted := condition(gatewayv1.ListenerConditionAccepted, st.accepted, st.acceptedReason, st.acceptedMessage, gen)
	if st.accepted {
		accepted.Message = "Listener is valid"
	}
	refsMessage := st.refsMessage
	if st.refsResolved {
		refsMessage = "All references are resolved"
	}
	conflicted := condition(gatewayv1.ListenerConditionConflicted, false, gatewayv1.ListenerReasonNoConflicts, "No conflicts", gen)
	if st.conflictReason != "" {
		conflicted = condition(gatewayv1.ListenerConditionConflicted, true, st.conflictReason, st.conflictMessage, gen)
	}
	// A valid listener is programmed exactly when its Gateway is.
	programmed := gatewayProgrammed
	programmed.Type = string(gatewayv1.ListenerConditionProgrammed)
	switch {
	case st.conflictReason != "":
		// The conformance suite (ListenerSetHostnameConflict, ...ProtocolConflict)
		// expects the conflict as the reason a conflicted listener is not programmed.
		programmed = condition(gatewayv1.ListenerConditionProgrammed, false, st.conflictReason, st.conflictMessage, gen)
	case !st.programmable():
		programmed = condition(gatewayv1.ListenerConditionProgrammed, false, gatewayv1.ListenerReasonInvalid, "The listener is not valid", gen)
	}
	return []metav1.Condition{
		accepted,
		programmed,
		condition(gatewayv1.ListenerConditionResolvedRefs, st.refsResolved, st.refsReason, refsMessage, gen),
		conflicted,
	}
}
