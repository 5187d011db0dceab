package consul

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

type ownerKey struct {
	kind gatewayv1.Kind
	key  cache.ObjectName
}

// ownerState is everything known about the entries of one object.
type ownerState struct {
	// problem is what the translation could not express for the whole object, and
	// parentProblems what it could not for one parent listener of a route written for
	// its other parents (replaced whole, like writeErrs).
	problem        string
	parentProblems map[translate.ProblemParent]string
	foreign        string
	// writeErrs are the failed reads or writes of the object's entries that Consul does
	// not hold as desired yet, by entry. Replaced whole on change, like bindings.
	writeErrs map[translate.EntryKey]string
	// Consul's Accepted condition on the entry, once it computed one.
	consulKnown    bool
	consulAccepted bool
	consulReason   string
	consulMessage  string
	// bindings are Consul's Bound conditions on a route's entry, sorted. States are
	// copied (update), so the slice is replaced whole, never changed in place.
	bindings []binding
}

// binding is Consul's Bound condition on a route entry for one parent listener.
type binding struct {
	gateway cache.ObjectName
	section string // "" when Consul's condition names the whole Gateway
	verdict contract.Binding
}

// sameVerdicts reports whether o and p tell the status pipeline the same.
func (o ownerState) sameVerdicts(p ownerState) bool {
	return o.verdict() == p.verdict() && slices.Equal(o.bindings, p.bindings) && maps.Equal(o.parentProblems, p.parentProblems)
}

// joinSorted joins the messages of errs in the order of their entries, so the same
// failures always read the same.
func joinSorted(errs map[translate.EntryKey]string) string {
	keys := slices.SortedFunc(maps.Keys(errs), func(a, b translate.EntryKey) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	msgs := make([]string, len(keys))
	for i, k := range keys {
		msgs[i] = errs[k]
	}
	return strings.Join(msgs, "; ")
}

func (o ownerState) verdict() contract.Verdict {
	switch {
	case o.problem != "":
		return contract.Verdict{Known: true, Reason: ReasonTranslation, Message: o.problem}
	case o.foreign != "":
		return contract.Verdict{Known: true, Reason: ReasonForeignEntry, Message: o.foreign}
	case len(o.writeErrs) > 0:
		return contract.Verdict{Known: true, Reason: ReasonWriteFailed, Message: joinSorted(o.writeErrs)}
	case !o.consulKnown:
		return contract.Verdict{}
	case o.consulAccepted:
		return contract.Verdict{Known: true, Programmed: true, Reason: o.consulReason, Message: o.consulMessage}
	default:
		return contract.Verdict{Known: true, Reason: o.consulReason, Message: o.consulMessage}
	}
}

// reportedOwner is the object whose status carries the verdict on an entry's owner;
// only Gateways and routes have one.
func reportedOwner(meta map[string]string) (ownerKey, bool) {
	o := translate.OwnerOf(meta)
	kind := gatewayv1.Kind(o.Kind)
	if kind != gatewayapi.GatewayKind && !translate.TranslatesRoutes(kind) {
		return ownerKey{}, false
	}
	return ownerKey{kind, cache.ObjectName{Namespace: o.Namespace, Name: o.Name}}, true
}
