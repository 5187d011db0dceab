package consul

import (
	"fmt"
	"slices"
	"strings"
	gosync "sync"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// Reasons of the verdicts the syncer reports; Consul's own reasons pass through.
const (
	ReasonTranslation  = "NotExpressible"
	ReasonForeignEntry = "ConsulEntryNotOwned"
	ReasonWriteFailed  = "ConsulWriteFailed"
)

type ownerKey struct {
	kind gatewayv1.Kind
	key  cache.ObjectName
}

// ownerState is everything known about the entries of one object.
type ownerState struct {
	problem  string
	foreign  string
	writeErr string
	// Consul's Accepted condition on the entry, once it computed one.
	consulKnown    bool
	consulAccepted bool
	consulReason   string
	consulMessage  string
}

func (o ownerState) verdict() gwsync.Verdict {
	switch {
	case o.problem != "":
		return gwsync.Verdict{Known: true, Reason: ReasonTranslation, Message: o.problem}
	case o.foreign != "":
		return gwsync.Verdict{Known: true, Reason: ReasonForeignEntry, Message: o.foreign}
	case o.writeErr != "":
		return gwsync.Verdict{Known: true, Reason: ReasonWriteFailed, Message: o.writeErr}
	case !o.consulKnown:
		return gwsync.Verdict{}
	case o.consulAccepted:
		return gwsync.Verdict{Known: true, Programmed: true, Reason: o.consulReason, Message: o.consulMessage}
	default:
		return gwsync.Verdict{Known: true, Reason: o.consulReason, Message: o.consulMessage}
	}
}

// verdicts holds what Consul and the syncer said about each object's entries, and tells
// the status pipeline when that changes.
type verdicts struct {
	mu     gosync.Mutex
	owners map[ownerKey]ownerState
	// problems are the translation problems last set; most translations repeat them.
	problems []Problem
}

func newVerdicts() *verdicts { return &verdicts{owners: map[ownerKey]ownerState{}} }

// get returns the verdict on an object.
func (v *verdicts) get(kind gatewayv1.Kind, key cache.ObjectName) gwsync.Verdict {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.owners[ownerKey{kind, key}].verdict()
}

// update changes an owner's state and reports the change when the verdict moved.
func (v *verdicts) update(owner ownerKey, changed func(gatewayv1.Kind, cache.ObjectName), mutate func(*ownerState)) {
	v.mu.Lock()
	before := v.owners[owner]
	after := before
	mutate(&after)
	v.owners[owner] = after
	v.mu.Unlock()
	if before.verdict() != after.verdict() && changed != nil {
		changed(owner.kind, owner.key)
	}
}

// reportedOwner is the object whose status carries the verdict on an entry's owner;
// only Gateways and routes have one.
func reportedOwner(meta map[string]string) (ownerKey, bool) {
	o := OwnerOf(meta)
	kind := gatewayv1.Kind(o.Kind)
	if kind != gatewayapi.GatewayKind && !translatesRoutes(kind) {
		return ownerKey{}, false
	}
	return ownerKey{kind, cache.ObjectName{Namespace: o.Namespace, Name: o.Name}}, true
}

// observe records Consul's own status on an entry of ours.
func (v *verdicts) observe(key EntryKey, entry consulapi.ConfigEntry, owned bool, changed func(gatewayv1.Kind, cache.ObjectName)) {
	if !owned {
		return
	}
	owner, ok := reportedOwner(entry.GetMeta())
	if !ok {
		return
	}
	accepted := acceptedCondition(entry)
	v.update(owner, changed, func(o *ownerState) {
		o.foreign = ""
		if accepted == nil {
			o.consulKnown = false
			return
		}
		o.consulKnown = true
		o.consulAccepted = accepted.Status == consulapi.ConditionStatusTrue
		o.consulReason = accepted.Reason
		o.consulMessage = fmt.Sprintf("Consul %s %s: %s", key.Kind, key.Name, accepted.Message)
	})
}

// acceptedCondition is Consul's Accepted condition on an entry, nil before Consul
// computed one.
func acceptedCondition(entry consulapi.ConfigEntry) *consulapi.Condition {
	var status consulapi.ConfigEntryStatus
	switch e := entry.(type) {
	case *consulapi.APIGatewayConfigEntry:
		status = e.Status
	case *consulapi.HTTPRouteConfigEntry:
		status = e.Status
	case *consulapi.TCPRouteConfigEntry:
		status = e.Status
	default:
		return nil
	}
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type == "Accepted" && c.Resource == nil {
			return c
		}
	}
	for i := range status.Conditions {
		if status.Conditions[i].Type == "Accepted" {
			return &status.Conditions[i]
		}
	}
	return nil
}

// written records a successful write.
func (v *verdicts) written(key EntryKey, desiredMeta map[string]string, changed func(gatewayv1.Kind, cache.ObjectName)) {
	owner, ok := reportedOwner(desiredMeta)
	if !ok {
		return
	}
	// Consul's previous verdict stands until it computes one for the new entry, so a
	// routine update does not flap the object's status through Pending.
	v.update(owner, changed, func(o *ownerState) {
		o.writeErr, o.foreign = "", ""
	})
}

// writeFailed records a read or write Consul refused, with its reason (never the
// entry).
func (v *verdicts) writeFailed(key EntryKey, desiredMeta map[string]string, err error, changed func(gatewayv1.Kind, cache.ObjectName)) {
	owner, ok := reportedOwner(desiredMeta)
	if !ok {
		return
	}
	v.update(owner, changed, func(o *ownerState) {
		o.writeErr = fmt.Sprintf("syncing %s %s failed: %v", key.Kind, key.Name, err)
	})
}

// foreign records that the entry an object needs exists and belongs to someone else.
func (v *verdicts) foreign(key EntryKey, desired consulapi.ConfigEntry, changed func(gatewayv1.Kind, cache.ObjectName)) {
	owner, ok := reportedOwner(desired.GetMeta())
	if !ok {
		return
	}
	v.update(owner, changed, func(o *ownerState) {
		o.foreign = fmt.Sprintf("Consul already has a %s named %s that this controller does not own; it is left alone", key.Kind, key.Name)
	})
}

// setProblems replaces the translation problems of every object.
func (v *verdicts) setProblems(problems []Problem, changed func(gatewayv1.Kind, cache.ObjectName)) {
	v.mu.Lock()
	same := slices.Equal(problems, v.problems)
	v.problems = problems
	v.mu.Unlock()
	if same {
		return
	}
	byOwner := map[ownerKey][]string{}
	for _, p := range problems {
		k := ownerKey{gatewayv1.Kind(p.Kind), p.Object}
		byOwner[k] = append(byOwner[k], p.Message)
	}
	v.mu.Lock()
	var owners []ownerKey
	for k := range v.owners {
		owners = append(owners, k)
	}
	v.mu.Unlock()
	for k := range byOwner {
		owners = append(owners, k)
	}
	for _, k := range owners {
		msg := strings.Join(byOwner[k], "; ")
		v.update(k, changed, func(o *ownerState) { o.problem = msg })
	}
}

// forget drops what is known about objects that are gone.
func (v *verdicts) forget(owner ownerKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.owners, owner)
}
