package sync

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// routeKindsByProtocol are the route kinds each supported listener protocol serves.
// Consul's API gateway has http and tcp listeners (HTTPS is http with certificates);
// it has no gRPC, TLS-passthrough or UDP routes.
var routeKindsByProtocol = map[gatewayv1.ProtocolType][]gatewayv1.Kind{
	gatewayv1.HTTPProtocolType:  {gatewayapi.HTTPRouteKind},
	gatewayv1.HTTPSProtocolType: {gatewayapi.HTTPRouteKind},
	gatewayv1.TCPProtocolType:   {gatewayapi.TCPRouteKind},
}

// unservedRouteKinds are the route kinds no listener of Consul's API gateway serves,
// with what a route of the kind is told.
var unservedRouteKinds = map[gatewayv1.Kind]string{
	gatewayapi.GRPCRouteKind: "Consul's API gateway has no gRPC routes: GRPCRoute is not supported",
	gatewayapi.TLSRouteKind:  "Consul's API gateway has no TLS passthrough routes: TLSRoute is not supported",
	gatewayapi.UDPRouteKind:  "Consul's API gateway has no UDP routes: UDPRoute is not supported",
}

// listenerState is the verdict on one listener of a Gateway or of a ListenerSet
// merged into it.
type listenerState struct {
	listener gatewayv1.Listener
	// owner is the object the listener is declared in: its namespace is the one
	// allowedRoutes Same means, and certificateRefs are resolved from it.
	owner listenerOwner
	// entryName is the listener's name in the Gateway's api-gateway entry: its own
	// for a Gateway's listener, gatewayapi.ListenerSetListenerName for a ListenerSet's.
	// Dotted names can make two coincide; markNameConflicts keeps one.
	entryName      gatewayv1.SectionName
	supportedKinds []gatewayv1.RouteGroupKind

	accepted        bool
	acceptedReason  gatewayv1.ListenerConditionReason
	acceptedMessage string

	conflictReason  gatewayv1.ListenerConditionReason // "" when there is no conflict
	conflictMessage string

	refsResolved bool
	refsReason   gatewayv1.ListenerConditionReason
	refsMessage  string

	// certs are the certificates of an HTTPS listener whose references resolve.
	certs []listenerCert
	// consulListener is the entry name of the listener Consul serves this one's port
	// with: Gateway listeners sharing a port are one Consul listener (mergePort), named
	// after the first programmable one.
	consulListener gatewayv1.SectionName
}

// listenerCert is a certificate a listener names: the Secret, and the hosts Consul
// serves it for by SNI when a listener has several certificates (the certificate's
// common name, DNS names and IP addresses, as Consul 1.15.4's
// InlineCertificateConfigEntry.Hosts in agent/structs/config_entry_inline_certificate.go).
type listenerCert struct {
	secret string
	hosts  []string
}

// programmable reports whether the listener can be written to Consul.
func (l *listenerState) programmable() bool {
	return l.accepted && l.conflictReason == "" && l.servesRefs()
}

// servesRefs reports whether the listener's references allow serving it: all resolve,
// or the only unresolved ones are route kinds next to a kind it supports, whose routes
// it then serves (ResolvedRefs stays False/InvalidRouteKinds, as the spec requires).
func (l *listenerState) servesRefs() bool {
	return l.refsResolved || l.refsReason == gatewayv1.ListenerReasonInvalidRouteKinds && len(l.supportedKinds) > 0
}

// listenerRefs are the caches a listener's references are resolved in.
type listenerRefs struct {
	// secrets holds only the kubernetes.io/tls Secrets listeners name; a Get may answer
	// informers.ErrSecretNotSynced.
	secrets corelisters.SecretLister
	grants  gatewaylisters.ReferenceGrantLister
}

// listenerOwner is the object listeners are declared in: a Gateway, or a ListenerSet
// (set is nil for a Gateway).
type listenerOwner struct {
	kind      string
	namespace string
	name      string
	set       *gatewayv1.ListenerSet
}

func gatewayOwner(gw *gatewayv1.Gateway) listenerOwner {
	return listenerOwner{kind: gatewayapi.GatewayKind, namespace: gw.Namespace, name: gw.Name}
}

func listenerSetOwner(set *gatewayv1.ListenerSet) listenerOwner {
	return listenerOwner{kind: gatewayapi.ListenerSetKind, namespace: set.Namespace, name: set.Name, set: set}
}

// judgeListeners judges each listener of owner on its own: protocol, route kinds and
// certificate references. Conflicts need every listener of the Gateway (markPortConflicts).
func judgeListeners(owner listenerOwner, listeners []gatewayv1.Listener, refs listenerRefs) ([]listenerState, error) {
	states := make([]listenerState, len(listeners))
	for i, l := range listeners {
		states[i] = listenerState{listener: l, owner: owner, entryName: l.Name, accepted: true, acceptedReason: gatewayv1.ListenerReasonAccepted,
			refsResolved: true, refsReason: gatewayv1.ListenerReasonResolvedRefs}
		if owner.set != nil {
			states[i].entryName = gatewayapi.ListenerSetListenerName(cache.MetaObjectToName(owner.set), l.Name)
		}
		st := &states[i]
		if _, ok := routeKindsByProtocol[l.Protocol]; !ok {
			st.accepted, st.acceptedReason = false, gatewayv1.ListenerReasonUnsupportedProtocol
			st.acceptedMessage = fmt.Sprintf("protocol %s is not supported by Consul's API gateway; use HTTP, HTTPS or TCP", l.Protocol)
		}
		if msg := listenerHostnameProblem(l.Hostname); msg != "" && st.accepted {
			st.accepted, st.acceptedReason, st.acceptedMessage = false, gatewayv1.ListenerReasonUnsupportedValue, msg
		}
		if msg := allowedNamespacesProblem(l.AllowedRoutes); msg != "" && st.accepted {
			st.accepted, st.acceptedReason, st.acceptedMessage = false, gatewayv1.ListenerReasonUnsupportedValue, msg
		}
		st.supportedKinds, st.refsMessage = supportedKinds(l)
		if st.refsMessage != "" {
			st.refsResolved, st.refsReason = false, gatewayv1.ListenerReasonInvalidRouteKinds
		}
		if err := checkCertificates(owner, st, refs); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// listenerHostnameProblem says why the listener's hostname cannot be used, "" when it
// can. Consul would take an IP address as a Host header to match, which is not what
// Gateway API means by a hostname.
func listenerHostnameProblem(host *gatewayv1.Hostname) string {
	if host == nil || !isIPAddress(*host) {
		return ""
	}
	return fmt.Sprintf("hostname %q is an IP address; Gateway API allows only DNS names as a listener hostname", *host)
}

// allowedNamespacesProblem says why allowedRoutes.namespaces cannot select namespaces,
// "" when it can. A selector that does not parse would otherwise select nothing, and
// routes would be refused with no word on the listener about why.
func allowedNamespacesProblem(allowed *gatewayv1.AllowedRoutes) string {
	if allowed == nil || allowed.Namespaces == nil || allowed.Namespaces.From == nil || *allowed.Namespaces.From != gatewayv1.NamespacesFromSelector {
		return ""
	}
	if allowed.Namespaces.Selector == nil {
		return "allowedRoutes.namespaces.from is Selector, but no selector is given; no route can attach"
	}
	if _, err := metav1.LabelSelectorAsSelector(allowed.Namespaces.Selector); err != nil {
		return fmt.Sprintf("allowedRoutes.namespaces.selector is not a valid label selector (%v); no route can attach", err)
	}
	return ""
}

// supportedKinds returns the route kinds the listener serves, and a message naming the
// requested kinds it cannot serve ("" when there are none).
func supportedKinds(l gatewayv1.Listener) ([]gatewayv1.RouteGroupKind, string) {
	served := routeKindsByProtocol[l.Protocol]
	if l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		kinds := make([]gatewayv1.RouteGroupKind, 0, len(served))
		for _, k := range served {
			kinds = append(kinds, gatewayv1.RouteGroupKind{Group: ptrTo(gatewayv1.Group(gatewayv1.GroupName)), Kind: k})
		}
		return kinds, ""
	}
	kinds := []gatewayv1.RouteGroupKind{}
	var invalid []string
	for _, k := range l.AllowedRoutes.Kinds {
		group := gatewayv1.Group(gatewayv1.GroupName)
		if k.Group != nil {
			group = *k.Group
		}
		if group == gatewayv1.GroupName && slices.Contains(served, k.Kind) {
			kinds = append(kinds, gatewayv1.RouteGroupKind{Group: ptrTo(group), Kind: k.Kind})
			continue
		}
		invalid = append(invalid, fmt.Sprintf("%s/%s", group, k.Kind))
	}
	if len(invalid) == 0 {
		return kinds, ""
	}
	return kinds, fmt.Sprintf("route kinds %v are not supported on a %s listener", invalid, l.Protocol)
}

// checkCertificates resolves an HTTPS listener's certificateRefs. Only the first
// problem is reported; the listener cannot be programmed until all refs resolve.
func checkCertificates(owner listenerOwner, st *listenerState, refs listenerRefs) error {
	l := st.listener
	if l.Protocol != gatewayv1.HTTPSProtocolType || !st.accepted {
		return nil
	}
	if l.TLS == nil {
		st.refsResolved, st.refsReason = false, gatewayv1.ListenerReasonInvalidCertificateRef
		st.refsMessage = "an HTTPS listener needs tls with mode Terminate and at least one certificateRef; this listener has no tls block"
		return nil
	}
	if l.TLS.Mode != nil && *l.TLS.Mode != gatewayv1.TLSModeTerminate {
		st.accepted, st.acceptedReason = false, gatewayv1.ListenerReasonUnsupportedProtocol
		st.acceptedMessage = fmt.Sprintf("tls.mode %s: HTTPS listeners must terminate TLS; Consul's API gateway has no TLS passthrough", *l.TLS.Mode)
		return nil
	}
	if len(l.TLS.CertificateRefs) == 0 {
		st.refsResolved, st.refsReason = false, gatewayv1.ListenerReasonInvalidCertificateRef
		st.refsMessage = "an HTTPS listener needs at least one certificateRef"
		return nil
	}
	var certs []listenerCert
	for _, ref := range l.TLS.CertificateRefs {
		cert, reason, message, err := checkCertificateRef(owner, ref, refs)
		if err != nil {
			return err
		}
		if reason != "" {
			st.refsResolved, st.refsReason, st.refsMessage = false, reason, message
			return nil
		}
		certs = append(certs, cert)
	}
	st.certs = certs
	return nil
}

// checkCertificateRef resolves one certificateRef of a listener of owner. A ListenerSet
// needs a ReferenceGrant of its own: its Gateway's grants are not inherited.
func checkCertificateRef(owner listenerOwner, ref gatewayv1.SecretObjectReference, refs listenerRefs) (listenerCert, gatewayv1.ListenerConditionReason, string, error) {
	referent := gatewayapi.Referent(owner.namespace, ref.Namespace, ref.Name)
	namespace, name := referent.Namespace, referent.String()
	if !gatewayapi.RefersTo(ref.Group, ref.Kind, gatewayapi.CoreGroup, gatewayapi.SecretKind) {
		return listenerCert{}, gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("certificateRef %s must be a core Secret", name), nil
	}
	permitted, err := referencePermitted(refs.grants,
		referenceFrom{Group: gatewayv1.GroupName, Kind: owner.kind, Namespace: owner.namespace},
		referenceTo{Group: gatewayapi.CoreGroup, Kind: gatewayapi.SecretKind, Namespace: namespace, Name: string(ref.Name)})
	if err != nil {
		return listenerCert{}, "", "", err
	}
	if !permitted {
		return listenerCert{}, gatewayv1.ListenerReasonRefNotPermitted, fmt.Sprintf("no ReferenceGrant in namespace %s permits this %s to use Secret %s", namespace, owner.kind, name), nil
	}
	secret, err := refs.secrets.Secrets(namespace).Get(string(ref.Name))
	if apierrors.IsNotFound(err) {
		return listenerCert{}, gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("Secret %s does not exist or is not of type %s", name, corev1.SecretTypeTLS), nil
	}
	if overCap := (*informers.SecretOverCapError)(nil); errors.As(err, &overCap) {
		return listenerCert{}, gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("Secret %s is not watched: %v; the oldest Gateways' and ListenerSets' references are served first", name, overCap), nil
	}
	if errors.Is(err, informers.ErrSecretNotSynced) {
		// Not known yet, so not missing: judging now could write a condition, and send
		// Consul a listener, that the next sync takes back. The cache enqueues the
		// owner again when the Secret's watch has listed.
		return listenerCert{}, "", "", workqueue.Expected(fmt.Errorf("wait for Secret %s: %w", name, err))
	}
	if err != nil {
		return listenerCert{}, "", "", fmt.Errorf("get Secret %s: %w", name, err)
	}
	if refusal := informers.SecretRefusal(secret); refusal != "" {
		return listenerCert{}, gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("Secret %s is refused: %s", name, refusal), nil
	}
	// The parse error is not passed on: it is not needed to fix the Secret, and status
	// must never carry anything derived from key material.
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return listenerCert{}, gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("Secret %s does not hold a valid PEM certificate and matching private key", name), nil
	}
	leaf := pair.Leaf
	if leaf == nil { // only when GODEBUG x509keypairleaf=0
		leaf, _ = x509.ParseCertificate(pair.Certificate[0])
	}
	return listenerCert{secret: name, hosts: certificateHosts(leaf)}, "", "", nil
}

// markNameConflicts marks the listeners whose name in the api-gateway entry an
// earlier listener (in precedence order) already has: a ListenerSet's listener
// "l0.x" of ListenerSet "s" and "x" of ListenerSet "s.l0" are both "ns.s.l0.x", and a
// Gateway's own listener may be named so too. Consul refuses an entry with two
// listeners of one name, and a route bound to one would be bound to the other, so the
// later listener loses. Only accepted listeners count, as for port conflicts. A
// Gateway's own listeners are unique by the CRD and come
// first, so the loser is a ListenerSet's listener.
func markNameConflicts(states []listenerState) {
	first := map[gatewayv1.SectionName]int{}
	for i := range states {
		if !states[i].accepted {
			continue
		}
		name := states[i].entryName
		if j, taken := first[name]; taken {
			markConflict(&states[i], gatewayv1.ListenerConditionReason(gatewayv1.ListenerEntryReasonListenerConflict),
				fmt.Sprintf("listener %s of %s %s/%s is named %s in Consul's api-gateway entry too", states[j].listener.Name, states[j].owner.kind, states[j].owner.namespace, states[j].owner.name, name))
			continue
		}
		first[name] = i
	}
}

// markPortConflicts finds listeners that cannot share their port. Gateway API
// conflicts: different protocols on one port (ProtocolConflict), or the same protocol
// and hostname twice (HostnameConflict). The listeners left on a port become one
// listener of Consul's api-gateway (mergePort); those Consul cannot serve beside the
// others get PortUnavailable.
func markPortConflicts(states []listenerState) {
	byPort := map[gatewayv1.PortNumber][]int{}
	var ports []gatewayv1.PortNumber
	for i := range states {
		if states[i].accepted && states[i].conflictReason == "" {
			port := states[i].listener.Port
			if _, seen := byPort[port]; !seen {
				ports = append(ports, port)
			}
			byPort[port] = append(byPort[port], i)
		}
	}
	for _, port := range ports {
		idx := byPort[port]
		if len(idx) > 1 {
			markProtocolConflicts(states, idx, port)
			markHostnameConflicts(states, unconflicted(states, idx), port)
		}
		mergePort(states, unconflicted(states, idx), port)
	}
	for i := range states {
		if states[i].conflictReason != "" {
			states[i].accepted = false
			states[i].acceptedReason = states[i].conflictReason
			states[i].acceptedMessage = states[i].conflictMessage
		}
	}
}

// markProtocolConflicts marks the listeners of idx (in precedence order: a Gateway's
// own listeners, then its ListenerSets') that cannot share port for their protocol.
// Among a Gateway's own listeners, a mix of protocols conflicts them all, as before
// ListenerSets; a ListenerSet's listener conflicts, alone, when its protocol is not
// the one the first listener on the port has: the later listener loses.
func markProtocolConflicts(states []listenerState, idx []int, port gatewayv1.PortNumber) {
	own := slices.DeleteFunc(slices.Clone(idx), func(i int) bool { return states[i].owner.set != nil })
	if len(own) > 1 && mixedProtocols(states, own) {
		for _, i := range own {
			markConflict(&states[i], gatewayv1.ListenerReasonProtocolConflict, fmt.Sprintf("port %d is used by listeners of different protocols", port))
		}
	}
	first := states[idx[0]].listener.Protocol
	for _, i := range idx {
		if states[i].owner.set != nil && states[i].listener.Protocol != first {
			markConflict(&states[i], gatewayv1.ListenerReasonProtocolConflict,
				fmt.Sprintf("port %d is used by a listener of protocol %s that takes precedence", port, first))
		}
	}
}

func markConflict(st *listenerState, reason gatewayv1.ListenerConditionReason, message string) {
	st.conflictReason, st.conflictMessage = reason, message
}

// unconflicted returns the listeners of idx without a conflict yet.
func unconflicted(states []listenerState, idx []int) []int {
	return slices.DeleteFunc(slices.Clone(idx), func(i int) bool { return states[i].conflictReason != "" })
}

func mixedProtocols(states []listenerState, idx []int) bool {
	for _, i := range idx[1:] {
		if states[i].listener.Protocol != states[idx[0]].listener.Protocol {
			return true
		}
	}
	return false
}

func markHostnameConflicts(states []listenerState, idx []int, port gatewayv1.PortNumber) {
	seen := map[gatewayv1.Hostname]int{}
	for _, i := range idx {
		host := hostnameOf(states[i].listener)
		if first, ok := seen[host]; ok {
			// A ListenerSet's listener loses to the one that takes precedence; two
			// listeners of the Gateway itself both conflict.
			losers := []int{first, i}
			if states[i].owner.set != nil {
				losers = []int{i}
			}
			for _, j := range losers {
				states[j].conflictReason = gatewayv1.ListenerReasonHostnameConflict
				states[j].conflictMessage = fmt.Sprintf("another listener on port %d has hostname %q", port, host)
			}
			continue
		}
		seen[host] = i
	}
}

// hostnameOf is the listener's hostname for conflict purposes; TCP ignores hostnames.
func hostnameOf(l gatewayv1.Listener) gatewayv1.Hostname {
	if l.Hostname == nil || l.Protocol == gatewayv1.TCPProtocolType {
		return ""
	}
	return *l.Hostname
}

func ptrTo[T any](v T) *T { return &v }
