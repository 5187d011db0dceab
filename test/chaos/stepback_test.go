package chaos

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// A route's ConsulAccepted condition carries Consul's verdict on the route's entry. At
// one generation it may step back from Accepted only because something changed in
// Consul: the entry was rewritten (drift, data loss, a grant or a backend going, a
// foreign writer), or Consul itself stopped accepting it. A verdict read from an older
// state of Consul, such as a restarted server answering before it has replayed its
// log, would show as a step back with neither behind it.
//
// The oracle's consistent watch records, per route, the moments the content of its
// entries changed (anything but the status Consul writes into them: Consul judging an
// entry again is not a change of it) and the moments one of them was not accepted by
// Consul: when the watch saw it so, and when a refusal it did not see ended. Consul
// stamps a condition with the time it last changed (lastTransitionTime), so an
// Accepted or Bound condition that is True since a moment says it was not just
// before; a refusal that lasted less than the watch's pause between two answers is
// seen only that way. After the run, each step back needs one of those while the route parent
// was Accepted at that generation: from the moment the oracle saw it Accepted to the
// moment it saw it leave. The writes that led to the Accepted verdict come before it
// and do not count, nor do the writes of the next generation, which the controller
// makes only after it has written that generation's status. verdictLag extends the
// interval past the step back by the oracle's own lag: its Consul watch may see a
// change a little after the controller acted on it. A step back to ConsulWriteFailed
// is the controller's own report of a write that failed, which Consul never saw: it is
// counted, not checked.
const verdictLag = time.Second

// verdictKey is one parent of ours on one route.
type verdictKey struct {
	uid    types.UID
	parent string
}

// accepted is when a route parent's ConsulAccepted was first seen True at generation gen.
type accepted struct {
	gen   int64
	since time.Time
}

// stepBack is a ConsulAccepted condition leaving True at the generation it was True at.
type stepBack struct {
	route, parent    string
	gen              int64
	accepted, leftAt time.Time
	reason, message  string
}

// verdicts is the oracle's record for the step-back check; o.mu guards it.
type verdicts struct {
	accepted  map[verdictKey]accepted
	stepBacks []stepBack
	// entries is, per Consul kind and route ("HTTPRoute/r-1"), the content of its
	// entries last seen, Consul's status left out; changes the moments it changed, and
	// refusals the moments one of them was seen not accepted by Consul.
	entries  map[string]map[string]string
	changes  map[string][]time.Time
	refusals map[string][]time.Time
}

func newVerdicts() verdicts {
	return verdicts{accepted: map[verdictKey]accepted{}, entries: map[string]map[string]string{}, changes: map[string][]time.Time{}, refusals: map[string][]time.Time{}}
}

// observeVerdict follows one route parent's ConsulAccepted condition; o.mu is held.
func (o *oracle) observeVerdict(uid types.UID, route, parent string, c metav1.Condition) {
	o.checks["no regression (verdict)"]++
	key := verdictKey{uid, parent}
	prev, wasAccepted := o.verdicts.accepted[key]
	if c.Status == metav1.ConditionTrue {
		if !wasAccepted || prev.gen != c.ObservedGeneration {
			o.verdicts.accepted[key] = accepted{gen: c.ObservedGeneration, since: time.Now()}
		}
		return
	}
	delete(o.verdicts.accepted, key)
	if wasAccepted && prev.gen == c.ObservedGeneration {
		o.verdicts.stepBacks = append(o.verdicts.stepBacks, stepBack{
			route: route, parent: parent, gen: c.ObservedGeneration,
			accepted: prev.since, leftAt: time.Now(), reason: c.Reason, message: c.Message,
		})
	}
}

// forgetVerdictsOfParentsGone ends the record of the route's parents that have no
// status of ours any more (their Gateway left our class, or the route left them): when
// one comes back, it is a new attachment, whose ConsulAccepted starts again from
// Pending, and not a step back. o.mu is held.
func (o *oracle) forgetVerdictsOfParentsGone(uid types.UID, ours map[string]bool) {
	for key := range o.verdicts.accepted {
		if key.uid == uid && !ours[key.parent] {
			delete(o.verdicts.accepted, key)
		}
	}
}

// observeRouteEntries notes which routes' entries of one Consul kind changed content
// since the last read, and which are not accepted by Consul now; o.mu is held.
func (o *oracle) observeRouteEntries(kind string, entries []consulapi.ConfigEntry) {
	versions := map[string][]string{}
	now := time.Now()
	for _, e := range entries {
		meta := e.GetMeta()
		if !o.env.owns(meta) {
			continue
		}
		route := meta["k8s-kind"] + "/" + meta["k8s-name"]
		versions[route] = append(versions[route], e.GetName()+"="+entryContent(e))
		if !acceptedAndBound(e) {
			o.verdicts.refusals[route] = append(o.verdicts.refusals[route], now)
		}
		for _, ended := range refusalsEnded(e) {
			if !slices.ContainsFunc(o.verdicts.refusals[route], ended.Equal) {
				o.verdicts.refusals[route] = append(o.verdicts.refusals[route], ended)
			}
		}
	}
	seen := o.verdicts.entries[kind]
	if seen == nil {
		seen = map[string]string{}
		o.verdicts.entries[kind] = seen
	}
	for route, vs := range versions {
		slices.Sort(vs)
		v := strings.Join(vs, ",")
		if seen[route] != v {
			o.verdicts.changes[route] = append(o.verdicts.changes[route], now)
			seen[route] = v
		}
	}
	for route := range seen {
		if _, present := versions[route]; !present {
			o.verdicts.changes[route] = append(o.verdicts.changes[route], now)
			delete(seen, route)
		}
	}
}

// acceptedAndBound reports whether Consul accepted a route entry and bound it to every
// parent it names.
func acceptedAndBound(e consulapi.ConfigEntry) bool {
	if c := consul.AcceptedCondition(e); c == nil || c.Status != consulapi.ConditionStatusTrue {
		return false
	}
	for _, c := range consul.EntryStatus(e).Conditions {
		if c.Type == string(consulapi.RouteConditionBound) && c.Status != consulapi.ConditionStatusTrue {
			return false
		}
	}
	return true
}

// refusalsEnded are the moments the Accepted and Bound conditions of a route entry
// became True, as Consul stamped them: each ended a time the entry was not accepted or
// not bound, which the oracle's watch may not have seen.
func refusalsEnded(e consulapi.ConfigEntry) []time.Time {
	var ended []time.Time
	for _, c := range consul.EntryStatus(e).Conditions {
		accepted := c.Type == "Accepted" || c.Type == string(consulapi.RouteConditionBound)
		if accepted && c.Status == consulapi.ConditionStatusTrue && c.LastTransitionTime != nil {
			ended = append(ended, *c.LastTransitionTime)
		}
	}
	return ended
}

// entryContent is what was written of a route entry: everything but the status and
// the indexes Consul keeps, which change when Consul judges the entry again.
func entryContent(e consulapi.ConfigEntry) string {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Sprint(e.GetModifyIndex())
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return fmt.Sprint(e.GetModifyIndex())
	}
	delete(fields, "Status")
	delete(fields, "CreateIndex")
	delete(fields, "ModifyIndex")
	b, _ = json.Marshal(fields) // map keys marshal sorted
	return string(b)
}

// checkStepBacks runs after the run: each step back from Accepted, other than to
// ConsulWriteFailed, needs a change of its route's entries, or one of them seen not
// accepted by Consul, while it was Accepted (and verdictLag after).
func (o *oracle) checkStepBacks() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range o.verdicts.stepBacks {
		o.checks["no regression (verdict): steps back from Accepted"]++
		if b.reason == consul.ReasonWriteFailed {
			continue
		}
		from, to := b.accepted, b.leftAt.Add(verdictLag)
		near := func(t time.Time) bool { return !t.Before(from) && !t.After(to) }
		if slices.ContainsFunc(o.verdicts.changes[b.route], near) || slices.ContainsFunc(o.verdicts.refusals[b.route], near) {
			continue
		}
		o.violations = append(o.violations, fmt.Sprintf("%s no regression (verdict): %s parent %s left %s=True at generation %d for %s %q (Accepted since %s) while Consul accepted its unchanged entries from %s to %s",
			b.leftAt.Format("15:04:05.000"), b.route, b.parent, gwsync.ConsulAcceptedCondition, b.gen, b.reason, b.message,
			b.accepted.Format("15:04:05.000"), from.Format("15:04:05.000"), to.Format("15:04:05.000")))
	}
}
