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
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
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
}

func newVerdicts(naming translate.Naming) *verdicts {
	return &verdicts{naming: naming, owners: map[ownerKey]ownerState{}, failing: map[translate.EntryKey]ownerKey{}}
}

// record takes what performing act on an entry did (res): a write, a delete, an entry
// found as desired, a failure, or an entry of someone else or one it depends on that
// holds it back. Each is reported on the owner of the entry the action concerned.
func (v *verdicts) record(st entryState, act action, res result, changed func(gatewayv1.Kind, cache.ObjectName)) {
	key, desiredMeta := st.key, map[string]string(nil)
	if st.desired != nil {
		desiredMeta = st.desired.GetMeta()
	}
	if act.op == opRewrite {
		v.settled(key, changed) // as desired, whether the rewrite lands or not
	}
	switch {
	case res.blocked != "":
		v.waits(key, desiredMeta, blockedMessage(key, res.blocked), changed)
		return
	case res.failure != nil && act.op == opDelete:
		v.writeFailed(key, st.actual.GetMeta(), res.failure, changed)
	case res.failure != nil && desiredMeta != nil:
		v.writeFailed(key, desiredMeta, res.failure, changed)
	}
	if res.err != nil {
		return
	}
	switch act.op {
	case opCreate, opUpdate, opRewrite:
		// A new entry: the verdict of any earlier one is not its verdict. Only once
		// created: a create the check-and-set refused (the watch's view was behind)
		// leaves the entry Consul holds, and its verdict, as they were.
		v.written(key, desiredMeta, act.op == opCreate, changed)
	case opDelete:
		v.written(key, st.actual.GetMeta(), true, changed)
	case opForeign:
		v.foreign(key, st.desired, changed)
	case opSettled:
		v.settled(key, changed)
	}
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
// condition for the Consul listener that serves it, else the one for the whole Gateway.
func (v *verdicts) binding(kind gatewayv1.Kind, route, gateway cache.ObjectName, listener, consulListener gatewayv1.SectionName) contract.Binding {
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
		case string(consulListener):
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

// written records a successful write of key, or its delete. A new entry (created, or
// deleted) has none of Consul's verdicts on the one before (absent).
func (v *verdicts) written(key translate.EntryKey, desiredMeta map[string]string, fresh bool, changed func(gatewayv1.Kind, cache.ObjectName)) {
	if fresh {
		defer v.absent(key, desiredMeta, changed)
	}
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

// writeFailed records a read or write that failed, with its reason (never the entry).
func (v *verdicts) writeFailed(key translate.EntryKey, desiredMeta map[string]string, err error, changed func(gatewayv1.Kind, cache.ObjectName)) {
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
