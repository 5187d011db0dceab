package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// A route's ConsulAccepted condition carries Consul's verdict on the route's entry. At
// one generation it may step back from Accepted only because something changed in
// Consul: the entry was rewritten (drift, data loss, a grant or a backend going), or
// Consul judged it again (it writes its verdict into the entry, as a new version). A
// verdict read from an older state of Consul, such as a restarted server answering
// before it has replayed its log, would show as a step back with nothing behind it.
//
// The oracle keeps the moments its consistent watch saw each route's entries change,
// and every step back from Accepted; after the run, each step back must have a change
// of that route's entries near it. The slack covers the controller's lag from Consul
// to status on one side and the oracle's watch lag on the other, so a step back that
// follows a change by more than that is a violation even when the change was real:
// the slack is generous (faults add latency) at the cost of missing a step back that
// happens to fall near an unrelated change of the same route.
const stepBackSlack = 8 * time.Second

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
	// entries is, per Consul kind and route ("HTTPRoute/r-1"), the versions of its
	// entries last seen ("name@modifyIndex", sorted); changes the moments they changed.
	entries map[string]map[string]string
	changes map[string][]time.Time
}

func newVerdicts() verdicts {
	return verdicts{accepted: map[verdictKey]accepted{}, entries: map[string]map[string]string{}, changes: map[string][]time.Time{}}
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

// observeRouteEntries notes which routes' entries of one Consul kind changed since the
// last read; o.mu is held.
func (o *oracle) observeRouteEntries(kind string, entries []consulapi.ConfigEntry) {
	versions := map[string][]string{}
	for _, e := range entries {
		meta := e.GetMeta()
		if !o.env.owns(meta) {
			continue
		}
		route := meta["k8s-kind"] + "/" + meta["k8s-name"]
		versions[route] = append(versions[route], fmt.Sprintf("%s@%d", e.GetName(), e.GetModifyIndex()))
	}
	seen := o.verdicts.entries[kind]
	if seen == nil {
		seen = map[string]string{}
		o.verdicts.entries[kind] = seen
	}
	now := time.Now()
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

// checkStepBacks runs after the run: each step back from Accepted needs a change of its
// route's entries within stepBackSlack of the time it was Accepted and the time it left.
func (o *oracle) checkStepBacks() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range o.verdicts.stepBacks {
		o.checks["no regression (verdict): steps back from Accepted"]++
		from, to := b.accepted.Add(-stepBackSlack), b.leftAt.Add(stepBackSlack)
		changed := slices.ContainsFunc(o.verdicts.changes[b.route], func(t time.Time) bool {
			return !t.Before(from) && !t.After(to)
		})
		if !changed {
			o.violations = append(o.violations, fmt.Sprintf("%s no regression (verdict): %s parent %s left %s=True at generation %d for %s %q (Accepted since %s) with no change of its Consul entries from %s to %s",
				b.leftAt.Format("15:04:05.000"), b.route, b.parent, gwsync.ConsulAcceptedCondition, b.gen, b.reason, b.message,
				b.accepted.Format("15:04:05.000"), from.Format("15:04:05.000"), to.Format("15:04:05.000")))
		}
	}
}
