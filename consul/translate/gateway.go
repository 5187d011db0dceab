package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// gateway writes the api-gateway entry of an accepted Gateway and the certificate
// entries its listeners use.
func (t *pass) gateway(key cache.ObjectName, gw *gatewayv1.Gateway) {
	// A Gateway that is not accepted has no listener anyone may rely on; its status
	// already says so, so that is not a problem of the translation.
	if gw == nil || !conditionIs(gw.Status.Conditions, string(gatewayv1.GatewayConditionAccepted), metav1.ConditionTrue) {
		return
	}
	var listeners []consulapi.APIGatewayListener
	var certs []consulapi.ConfigEntry
	add := func(l gatewayv1.Listener, namespace string, entryName gatewayv1.SectionName) {
		listener, listenerCerts, problem := t.listener(namespace, l)
		listener.Name = string(entryName)
		if problem == "" {
			problem = cmp.Or(nameConflict(listeners, listener), portConflict(listeners, listener))
		}
		if problem != "" {
			t.problem("Gateway", key, "listener %s: %s; it is left out of Consul", entryName, problem)
			return
		}
		listeners = append(listeners, listener)
		certs = append(certs, listenerCerts...)
	}
	for _, l := range gw.Spec.Listeners {
		if listenerProgrammable(gw.Status.Listeners, l.Name) { // otherwise its status says why
			add(l, gw.Namespace, l.Name)
		}
	}
	// The listeners of its accepted ListenerSets follow, in the order they were judged.
	for _, set := range t.listenerSetsOf(key) {
		for _, l := range set.Spec.Listeners {
			if listenerEntryProgrammable(set.Status.Listeners, l.Name) {
				add(gatewayv1.Listener(l), set.Namespace, gatewayapi.ListenerSetListenerName(cache.MetaObjectToName(set), l.Name))
			}
		}
	}
	// Consul refuses an api-gateway without listeners (Consul 1.15.4 agent/structs/config_entry_gateways.go:774).
	if len(listeners) == 0 {
		t.problem("Gateway", key, "no listener can be programmed in Consul, so the Gateway has no api-gateway entry")
		return
	}
	entry := &consulapi.APIGatewayConfigEntry{
		Kind:      consulapi.APIGateway,
		Name:      t.naming.EntryName(gw.Namespace, gw.Name),
		Namespace: t.naming.Namespace(gw.Namespace),
		Partition: t.naming.Partition,
		Listeners: listeners,
		Meta:      t.owner.Meta(ownerOf("Gateway", gw)),
	}
	t.put(entry)
	for _, c := range certs {
		t.put(c)
	}
	pg := programmedGateway{entryName: entry.Name, namespace: entry.Namespace, listeners: map[gatewayv1.SectionName]consulapi.APIGatewayListener{}}
	for _, l := range listeners {
		pg.listeners[gatewayv1.SectionName(l.Name)] = l
	}
	t.out.gateway = &pg
}

// listenerSetsOf returns the confirmed ListenerSets whose status says they are
// accepted on the Gateway key, in the order their listeners take precedence, and
// records the read.
func (t *pass) listenerSetsOf(key cache.ObjectName) []*gatewayv1.ListenerSet {
	t.read(readListenerSets, key)
	return t.listenerSets[key]
}

// acceptedListenerSetsOf returns the accepted ListenerSets of sets whose parent is
// the Gateway parent, in precedence order.
func acceptedListenerSetsOf(sets map[cache.ObjectName]*gatewayv1.ListenerSet, parent cache.ObjectName) []*gatewayv1.ListenerSet {
	var out []*gatewayv1.ListenerSet
	for _, set := range sets {
		if p, ok := gatewayapi.ListenerSetParent(set); ok && p == parent &&
			conditionIs(set.Status.Conditions, string(gatewayv1.ListenerSetConditionAccepted), metav1.ConditionTrue) {
			out = append(out, set)
		}
	}
	slices.SortFunc(out, gatewayapi.CompareListenerSets)
	return out
}

// addListenerSetParent adds the Gateway set names as its parent, if any, to parents.
func addListenerSetParent(parents map[cache.ObjectName]bool, set *gatewayv1.ListenerSet) {
	if set == nil {
		return
	}
	if p, ok := gatewayapi.ListenerSetParent(set); ok {
		parents[p] = true
	}
}

// listenerSetsVersion identifies a group of ListenerSets by their identities, for the
// memo: confirmed objects are never modified in place.
func listenerSetsVersion(sets []*gatewayv1.ListenerSet) string {
	var b strings.Builder
	for _, set := range sets {
		fmt.Fprintf(&b, "%p;", set)
	}
	return b.String()
}

// listenerEntryProgrammable is listenerProgrammable for a ListenerSet's listener.
func listenerEntryProgrammable(statuses []gatewayv1.ListenerEntryStatus, name gatewayv1.SectionName) bool {
	i := slices.IndexFunc(statuses, func(s gatewayv1.ListenerEntryStatus) bool { return s.Name == name })
	return i >= 0 && conditionsProgrammable(statuses[i].Conditions, len(statuses[i].SupportedKinds))
}

// listenerProgrammable reports whether the confirmed status says the listener can be
// written: Accepted True, Conflicted not True, and ResolvedRefs True or False only for
// route kinds next to a supported one. A listener without a status entry promises
// nothing.
func listenerProgrammable(statuses []gatewayv1.ListenerStatus, name gatewayv1.SectionName) bool {
	i := slices.IndexFunc(statuses, func(s gatewayv1.ListenerStatus) bool { return s.Name == name })
	if i < 0 {
		return false
	}
	return conditionsProgrammable(statuses[i].Conditions, len(statuses[i].SupportedKinds))
}

func conditionsProgrammable(conds []metav1.Condition, supportedKinds int) bool {
	refs := meta.FindStatusCondition(conds, string(gatewayv1.ListenerConditionResolvedRefs))
	refsServed := refs != nil && (refs.Status == metav1.ConditionTrue ||
		refs.Reason == string(gatewayv1.ListenerReasonInvalidRouteKinds) && supportedKinds > 0)
	return conditionIs(conds, string(gatewayv1.ListenerConditionAccepted), metav1.ConditionTrue) && refsServed &&
		!conditionIs(conds, string(gatewayv1.ListenerConditionConflicted), metav1.ConditionTrue)
}

// listener translates one listener the status says is programmable, with the
// certificate entries it needs. problem is non-empty when it cannot be written as the
// status promises; the status said it was fine, so that means the caches moved on since
// the confirmation, and the next confirmation settles it.
func (t *pass) listener(namespace string, l gatewayv1.Listener) (consulapi.APIGatewayListener, []consulapi.ConfigEntry, string) {
	protocol := listenerProtocol(l.Protocol)
	if protocol == "" {
		return consulapi.APIGatewayListener{}, nil, fmt.Sprintf("protocol %s %s", l.Protocol, consullimits.NotSupported)
	}
	out := consulapi.APIGatewayListener{Name: string(l.Name), Port: int(l.Port), Protocol: protocol}
	// Consul refuses a hostname on a tcp listener (Consul 1.15.4 agent/structs/config_entry_gateways.go:827), and
	// Gateway API ignores it there.
	if protocol == "http" && l.Hostname != nil {
		out.Hostname = string(*l.Hostname)
	}
	if l.Protocol != gatewayv1.HTTPSProtocolType {
		return out, nil, ""
	}
	// HTTPS without certificates would be served as plain HTTP: never write that.
	if l.TLS == nil || len(l.TLS.CertificateRefs) == 0 || (l.TLS.Mode != nil && *l.TLS.Mode != gatewayv1.TLSModeTerminate) {
		return consulapi.APIGatewayListener{}, nil, "an HTTPS listener must terminate TLS with at least one certificateRef"
	}
	var certs []consulapi.ConfigEntry
	for _, ref := range l.TLS.CertificateRefs {
		cert, problem := t.certificate(namespace, ref)
		if problem != "" {
			return consulapi.APIGatewayListener{}, nil, problem
		}
		out.TLS.Certificates = append(out.TLS.Certificates, consulapi.ResourceReference{
			Kind: consulapi.InlineCertificate, Name: cert.Name, Namespace: cert.Namespace, Partition: cert.Partition,
		})
		certs = append(certs, cert)
	}
	return out, certs, ""
}

// listenerProtocol is Consul's protocol for a Gateway API listener protocol ("" when
// Consul has none): HTTPS is an http listener with certificates.
func listenerProtocol(p gatewayv1.ProtocolType) string {
	switch p {
	case gatewayv1.HTTPProtocolType, gatewayv1.HTTPSProtocolType:
		return "http"
	case gatewayv1.TCPProtocolType:
		return "tcp"
	}
	return ""
}

// certificate is the inline-certificate entry of a certificateRef of a Gateway in
// gatewayNamespace. The entry is named and placed by the Secret's namespace, so every
// Gateway that uses one Secret shares one entry.
func (t *pass) certificate(listenerNamespace string, ref gatewayv1.SecretObjectReference) (*consulapi.InlineCertificateConfigEntry, string) {
	key := gatewayapi.Referent(listenerNamespace, ref.Namespace, ref.Name)
	if !gatewayapi.RefersTo(ref.Group, ref.Kind, gatewayapi.CoreGroup, gatewayapi.SecretKind) {
		return nil, fmt.Sprintf("certificateRef %s is not a core Secret", key)
	}
	secret, _ := t.read(readSecret, key).(*corev1.Secret)
	if secret == nil || len(secret.Data[corev1.TLSCertKey]) == 0 || len(secret.Data[corev1.TLSPrivateKeyKey]) == 0 {
		return nil, fmt.Sprintf("Secret %s with %s and %s is not in the cache", key, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	return &consulapi.InlineCertificateConfigEntry{
		Kind:        consulapi.InlineCertificate,
		Name:        t.naming.CertificateName(key.Namespace, key.Name),
		Namespace:   t.naming.Namespace(key.Namespace),
		Partition:   t.naming.Partition,
		Certificate: string(secret.Data[corev1.TLSCertKey]),
		PrivateKey:  string(secret.Data[corev1.TLSPrivateKeyKey]),
		Meta:        t.owner.Meta(ownerOf("Secret", secret)),
	}, ""
}

// nameConflict returns why l cannot join listeners under its name: Consul refuses an
// api-gateway with two listeners of one name (Consul 1.15.4 agent/structs/config_entry_gateways.go:795), and a
// ListenerSet's listener can be named like another's or like a Gateway's own (see
// gatewayapi.ListenerSetListenerName). The status pipeline conflicts the later one;
// this keeps a stale mix of confirmations from producing an entry Consul refuses.
func nameConflict(listeners []consulapi.APIGatewayListener, l consulapi.APIGatewayListener) string {
	if slices.ContainsFunc(listeners, func(other consulapi.APIGatewayListener) bool { return other.Name == l.Name }) {
		return fmt.Sprintf("an earlier listener is named %s in Consul too", l.Name)
	}
	return ""
}

// portConflict returns why l cannot join listeners: Consul merges listeners on one port
// only when their hostname and protocol are equal (Consul 1.15.4 agent/structs/config_entry_gateways.go:802-811). The
// status pipeline never accepts two such listeners; this keeps a stale mix of
// confirmations from producing an entry Consul refuses.
func portConflict(listeners []consulapi.APIGatewayListener, l consulapi.APIGatewayListener) string {
	for _, other := range listeners {
		if other.Port == l.Port && (other.Hostname != l.Hostname || other.Protocol != l.Protocol) {
			return fmt.Sprintf("port %d is taken by listener %s", l.Port, other.Name)
		}
	}
	return ""
}
