package translate

import (
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
	var merged portListeners
	var certs []consulapi.ConfigEntry
	add := func(l gatewayv1.Listener, namespace string, entryName gatewayv1.SectionName) {
		listener, listenerCerts, problem := t.listener(namespace, l)
		listener.Name = string(entryName)
		if problem == "" {
			problem = merged.add(listener)
		}
		if problem != "" {
			t.problem("Gateway", key, "listener %s: %s; it is left out of Consul", entryName, problem)
			return
		}
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
	listeners := merged.consulListeners()
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
	for _, c := range uniqueEntries(certs) {
		t.put(c)
	}
	pg := programmedGateway{entryName: entry.Name, namespace: entry.Namespace, listeners: map[gatewayv1.SectionName]gatewayListener{}}
	for _, port := range merged {
		hosts := make([]string, len(port.members))
		for i, m := range port.members {
			hosts[i] = m.Hostname
		}
		for _, m := range port.members {
			pg.listeners[gatewayv1.SectionName(m.Name)] = gatewayListener{consul: port.listener, hostname: m.Hostname, portHosts: hosts}
		}
	}
	t.out.gateway = &pg
}

// uniqueEntries drops repeats of an entry: listeners merged on a port may name one
// certificate each.
func uniqueEntries(entries []consulapi.ConfigEntry) []consulapi.ConfigEntry {
	var out []consulapi.ConfigEntry
	for _, e := range entries {
		if !slices.ContainsFunc(out, func(o consulapi.ConfigEntry) bool {
			return o.GetKind() == e.GetKind() && o.GetName() == e.GetName() && o.GetNamespace() == e.GetNamespace()
		}) {
			out = append(out, e)
		}
	}
	return out
}

// portListeners are the Consul listeners of an api-gateway entry, one per port, each
// with the Gateway listeners it serves. Consul's api-gateway has one listener per
// port: it refuses two on a port with different hostnames (Consul 1.15.4
// agent/structs/config_entry_gateways.go:802-811), and its xDS keys listeners by port
// and protocol. So the Gateway listeners on a port become one, named after the first,
// and their hostnames reach Consul in the routes' hostnames (routeHostnames); Envoy
// then picks a virtual host by exact hostname, then longest wildcard, as Gateway API
// picks a listener. The status pipeline (sync's mergePort) accepts only listeners
// one Consul listener can serve; add keeps a stale mix of confirmations from writing
// one that serves another.
type portListeners []*portListener

type portListener struct {
	listener consulapi.APIGatewayListener
	members  []consulapi.APIGatewayListener // as translated alone
}

// add merges l into the Consul listener of its port, or says why it cannot.
func (ps *portListeners) add(l consulapi.APIGatewayListener) string {
	for _, p := range *ps {
		// Consul refuses two listeners of one name (Consul 1.15.4
		// agent/structs/config_entry_gateways.go:795), and routes find a listener by
		// name: a ListenerSet's listener can be named like another's or like a
		// Gateway's own (see gatewayapi.ListenerSetListenerName). The status pipeline
		// conflicts the later one.
		if slices.ContainsFunc(p.members, func(m consulapi.APIGatewayListener) bool { return m.Name == l.Name }) {
			return fmt.Sprintf("an earlier listener is named %s in Consul too", l.Name)
		}
	}
	i := slices.IndexFunc(*ps, func(p *portListener) bool { return p.listener.Port == l.Port })
	if i < 0 {
		*ps = append(*ps, &portListener{listener: l, members: []consulapi.APIGatewayListener{l}})
		return ""
	}
	p := (*ps)[i]
	first := p.members[0]
	switch {
	case first.Protocol != l.Protocol:
		return fmt.Sprintf("port %d is taken by %s listener %s", l.Port, first.Protocol, first.Name)
	case (len(first.TLS.Certificates) == 0) != (len(l.TLS.Certificates) == 0):
		return fmt.Sprintf("port %d is taken by listener %s, and one of them has TLS", l.Port, first.Name)
	}
	if other := widePortConflict(p.members, l); other != nil {
		return fmt.Sprintf("port %d has listener %s with hostname %q already, and one Consul listener cannot serve %q beside it", l.Port, other.Name, other.Hostname, l.Hostname)
	}
	p.members = append(p.members, l)
	p.listener.Hostname = mergedHostname(p.members)
	for _, c := range l.TLS.Certificates {
		if !slices.Contains(p.listener.TLS.Certificates, c) {
			p.listener.TLS.Certificates = append(p.listener.TLS.Certificates, c)
		}
	}
	return ""
}

// mergedHostname is the hostname of the Consul listener serving members: a lone
// listener's own; else the wildcard of the one member with one, which routes cannot
// name, when Consul's suffix filter keeps every other member's hostname there; else
// none, every hostname coming from the routes, and wildcards from a header match
// (authorityMatch).
func mergedHostname(members []consulapi.APIGatewayListener) string {
	if len(members) == 1 {
		return members[0].Hostname
	}
	wide := slices.DeleteFunc(slices.Clone(members), func(m consulapi.APIGatewayListener) bool { return !isWideListener(m) })
	if len(wide) != 1 || wide[0].Hostname == "" {
		return ""
	}
	suffix := strings.TrimPrefix(strings.TrimPrefix(wide[0].Hostname, "*"), ".")
	for _, m := range members {
		if !isWideListener(m) && !strings.HasSuffix(m.Hostname, suffix) {
			return ""
		}
	}
	return wide[0].Hostname
}

// widePortConflict returns the member l cannot join: a listener without hostname
// beside a wildcard one (the catch-all virtual host would need to leave the wildcard's
// hosts out), or a wildcard within another (a host would match both).
func widePortConflict(members []consulapi.APIGatewayListener, l consulapi.APIGatewayListener) *consulapi.APIGatewayListener {
	if !isWideListener(l) {
		return nil
	}
	for i, m := range members {
		if isWideListener(m) && (m.Hostname == "" || l.Hostname == "" || nestedWildcards(m.Hostname, l.Hostname)) {
			return &members[i]
		}
	}
	return nil
}

// nestedWildcards reports whether one of two wildcards matches hosts of the other.
func nestedWildcards(a, b string) bool {
	sa, sb := strings.TrimPrefix(a, "*"), strings.TrimPrefix(b, "*")
	return strings.HasSuffix(sa, sb) || strings.HasSuffix(sb, sa)
}

func isWideListener(l consulapi.APIGatewayListener) bool {
	return l.Protocol == "http" && (l.Hostname == "" || isWildcard(l.Hostname))
}

func (ps portListeners) consulListeners() []consulapi.APIGatewayListener {
	out := make([]consulapi.APIGatewayListener, len(ps))
	for i, p := range ps {
		out[i] = p.listener
	}
	return out
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
