package consul

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	gosync "sync"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// Reasons of the verdicts the syncer reports; Consul's own reasons pass through.
const (
	ReasonTranslation  = "NotExpressible"
	ReasonForeignEntry = "ConsulEntryNotOwned"
	ReasonWriteFailed  = "ConsulWriteFailed"
)

// verdicts holds what Consul and the syncer said about each object's entries, and tells
// the status pipeline when that changes.
type verdicts struct {
	// naming turns the Gateway entry names in Consul's Bound conditions back into
	// Gateways.
	naming translate.Naming
	mu     gosync.Mutex
	owners map[ownerKey]ownerState
	// failing names the owner of each entry in some owner's writeErrs, so that the
	// entry settling clears it also when nothing desires the entry any more.
	failing map[translate.EntryKey]ownerKey
	// problems are the translation problems last set; most translations repeat them.
	problems []translate.Problem
	// refused and foreignKeys are, per entry whatever its owner, what Consul answered
	// when it last refused to write it, and that the entry Consul holds is someone
	// else's: an entry that waits for it says why (dependenciesWritten), also when
	// its own owner has no status to carry that (a service-resolver written for a
	// Service). Both end when the entry settles.
	refused     map[translate.EntryKey]string
	foreignKeys map[translate.EntryKey]bool
	// heldBack is, per entry that cannot be written until something else is
	// resolved, what it waits for (see blocked); it ends when the entry settles.
	heldBack map[translate.EntryKey]string
}

func newVerdicts(naming translate.Naming) *verdicts {
	return &verdicts{naming: naming, owners: map[ownerKey]ownerState{}, failing: map[translate.EntryKey]ownerKey{},
		refused: map[translate.EntryKey]string{}, foreignKeys: map[translate.EntryKey]bool{}, heldBack: map[translate.EntryKey]string{}}
}

// holdBack records what the entry under key waits for and cannot be written without.
func (v *verdicts) holdBack(key translate.EntryKey, reason string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.heldBack[key] = reason
}

// heldBackBy is what the entry under key was last held back by, "" when it was not
// since it settled.
func (v *verdicts) heldBackBy(key translate.EntryKey) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.heldBack[key]
}

// refusal is what Consul answered when it last refused to write key, "" when it has
// not since key settled.
func (v *verdicts) refusal(key translate.EntryKey) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.refused[key]
}

// notOurs reports whether the entry Consul holds under key was last found to be
// someone else's.
func (v *verdicts) notOurs(key translate.EntryKey) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.foreignKeys[key]
}

// waits records that the entry under key is held back, with why, on its owner, until
// the entry settles.
func (v *verdicts) waits(key translate.EntryKey, desiredMeta map[string]string, why string, changed func(gatewayv1.Kind, cache.ObjectName)) {
	owner, ok := reportedOwner(desiredMeta)
	if !ok {
		return
	}
	v.update(owner, changed, func(o *ownerState) {
		errs := maps.Clone(o.writeErrs)
		if errs == nil {
			errs = map[translate.EntryKey]string{}
		}
		errs[key] = why
		o.writeErrs = errs
		v.failing[key] = owner // update holds v.mu while it mutates
	})
}

// refusalText is Consul's own words when it answered err with a status, "" for any
// other failure (Consul unreachable): only an answer is a refusal.
func refusalText(err error) string {
	var status consulapi.StatusError
	if !errors.As(err, &status) {
		return ""
	}
	return cmp.Or(strings.TrimSpace(status.Body), fmt.Sprintf("HTTP %d", status.Code))
}

// get returns the verdict on an object.
func (v *verdicts) get(kind gatewayv1.Kind, key cache.ObjectName) contract.Verdict {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.owners[ownerKey{kind, key}].verdict()
}

// binding returns the verdict on serving a route on one listener of gateway: the
// translation problem that left the route out of that listener, else Consul's Bound
// condition for that listener, else the one for the whole Gateway.
func (v *verdicts) binding(kind gatewayv1.Kind, route, gateway cache.ObjectName, listener gatewayv1.SectionName) contract.Binding {
	v.mu.Lock()
	defer v.mu.Unlock()
	o := v.owners[ownerKey{kind, route}]
	if msg, ok := o.parentProblems[translate.ProblemParent{Gateway: gateway, Listener: listener}]; ok {
		return contract.Binding{State: contract.BindingRefused, Reason: ReasonTranslation, Message: msg}
	}
	var whole contract.Binding
	for _, b := range o.bindings {
		if b.gateway != gateway {
			continue
		}
		switch b.section {
		case string(listener):
			return b.verdict
		case "":
			whole = b.verdict
		}
	}
	return whole
}

// update changes an owner's state and reports the change when the verdict moved.
func (v *verdicts) update(owner ownerKey, changed func(gatewayv1.Kind, cache.ObjectName), mutate func(*ownerState)) {
	v.mu.Lock()
	moved := v.mutateLocked(owner, mutate)
	v.mu.Unlock()
	if moved && changed != nil {
		changed(owner.kind, owner.key)
	}
}

// mutateLocked changes an owner's state and reports whether its verdict moved.
// Callers hold v.mu.
func (v *verdicts) mutateLocked(owner ownerKey, mutate func(*ownerState)) bool {
	before := v.owners[owner]
	after := before
	mutate(&after)
	v.owners[owner] = after
	return !before.sameVerdicts(after)
}

// absent records that Consul holds no entry under key: it was deleted, or is about to
// be created. What Consul said before was about an entry that no longer exists, and a
// verdict kept from it would report a new entry as accepted before Consul judged it.
func (v *verdicts) absent(key translate.EntryKey, meta map[string]string, changed func(gatewayv1.Kind, cache.ObjectName)) {
	if !judgedKinds[key.Kind] {
		return
	}
	owner, ok := reportedOwner(meta)
	if !ok {
		return
	}
	v.update(owner, changed, func(o *ownerState) {
		o.consulKnown, o.consulAccepted, o.consulReason, o.consulMessage = false, false, "", ""
		o.bindings = nil
	})
}

// written records a successful write of key, or its delete.
func (v *verdicts) written(key translate.EntryKey, desiredMeta map[string]string, changed func(gatewayv1.Kind, cache.ObjectName)) {
	v.settled(key, changed)
	owner, ok := reportedOwner(desiredMeta)
	if !ok {
		return
	}
	// Consul's previous verdict stands until it computes one for the new entry, so a
	// routine update does not flap the object's status through Pending.
	v.update(owner, changed, func(o *ownerState) { o.foreign = "" })
}

// settled records that Consul holds what is desired under key: written by us, found so
// by the watch or a read (a write whose answer was lost may have landed), or absent and
// no longer desired. A failure recorded for key is over. Clearing it only on our own
// successful write would leave ConsulWriteFailed for good on an entry that needs none.
func (v *verdicts) settled(key translate.EntryKey, changed func(gatewayv1.Kind, cache.ObjectName)) {
	v.mu.Lock()
	delete(v.refused, key)
	delete(v.foreignKeys, key)
	delete(v.heldBack, key)
	owner, failed := v.failing[key]
	moved := false
	if failed {
		// Looked up and cleared under one lock: a failure recorded in between would
		// otherwise be cleared with the one that ended.
		delete(v.failing, key)
		moved = v.mutateLocked(owner, func(o *ownerState) {
			errs := maps.Clone(o.writeErrs)
			delete(errs, key)
			o.writeErrs = errs
		})
	}
	v.mu.Unlock()
	if moved && changed != nil {
		changed(owner.kind, owner.key)
	}
}

// writeFailed records a read or write Consul refused, with its reason (never the
// entry).
func (v *verdicts) writeFailed(key translate.EntryKey, desiredMeta map[string]string, err error, changed func(gatewayv1.Kind, cache.ObjectName)) {
	if text := refusalText(err); text != "" {
		v.mu.Lock()
		v.refused[key] = text
		v.mu.Unlock()
	}
	owner, ok := reportedOwner(desiredMeta)
	if !ok {
		return
	}
	msg := fmt.Sprintf("syncing %s %s failed: %v", key.Kind, key.Name, err)
	v.update(owner, changed, func(o *ownerState) {
		errs := maps.Clone(o.writeErrs)
		if errs == nil {
			errs = map[translate.EntryKey]string{}
		}
		errs[key] = msg
		o.writeErrs = errs
		v.failing[key] = owner // update holds v.mu while it mutates
	})
}

// foreign records that the entry an object needs exists and belongs to someone else.
func (v *verdicts) foreign(key translate.EntryKey, desired consulapi.ConfigEntry, changed func(gatewayv1.Kind, cache.ObjectName)) {
	v.mu.Lock()
	v.foreignKeys[key] = true
	v.mu.Unlock()
	owner, ok := reportedOwner(desired.GetMeta())
	if !ok {
		return
	}
	v.update(owner, changed, func(o *ownerState) {
		o.foreign = fmt.Sprintf("Consul already has a %s named %s that this controller does not own; it is left alone", key.Kind, key.Name)
	})
}

// setProblems replaces the translation problems of every object.
func (v *verdicts) setProblems(problems []translate.Problem, changed func(gatewayv1.Kind, cache.ObjectName)) {
	v.mu.Lock()
	same := slices.Equal(problems, v.problems)
	v.problems = problems
	v.mu.Unlock()
	if same {
		return
	}
	byOwner, byParent := problemsByOwner(problems)
	v.mu.Lock()
	var owners []ownerKey
	for k := range v.owners {
		owners = append(owners, k)
	}
	v.mu.Unlock()
	for k := range byOwner {
		owners = append(owners, k)
	}
	for k := range byParent {
		owners = append(owners, k)
	}
	for _, k := range owners {
		msg := strings.Join(byOwner[k], "; ")
		v.update(k, changed, func(o *ownerState) {
			o.problem = msg
			o.parentProblems = byParent[k]
		})
	}
}

// problemsByOwner groups problems by the object they concern: the messages about the
// whole object, in order, and per parent listener the messages about it, joined.
func problemsByOwner(problems []translate.Problem) (map[ownerKey][]string, map[ownerKey]map[translate.ProblemParent]string) {
	byOwner := map[ownerKey][]string{}
	byParent := map[ownerKey]map[translate.ProblemParent]string{}
	for _, p := range problems {
		k := ownerKey{gatewayv1.Kind(p.Kind), p.Object}
		if p.Parent == (translate.ProblemParent{}) {
			byOwner[k] = append(byOwner[k], p.Message)
			continue
		}
		if byParent[k] == nil {
			byParent[k] = map[translate.ProblemParent]string{}
		}
		msg := p.Message
		if prev := byParent[k][p.Parent]; prev != "" {
			msg = prev + "; " + msg
		}
		byParent[k][p.Parent] = msg
	}
	return byOwner, byParent
}

// forget drops what is known about objects that are gone.
func (v *verdicts) forget(owner ownerKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for key := range v.owners[owner].writeErrs {
		delete(v.failing, key)
	}
	delete(v.owners, owner)
}
