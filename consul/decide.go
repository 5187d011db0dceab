package consul

import (
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// entryState is everything decide needs about one entry: what is desired, what the
// ledger knows without asking Consul, and, once read, what Consul holds.
type entryState struct {
	key translate.EntryKey
	// desired is the entry Consul must hold under key; nil when nothing desires one.
	desired consulapi.ConfigEntry

	// What the ledger knows without reading.
	knownAbsent bool
	// matched: the watch last found Consul holding an entry of ours as desired then,
	// at matchedIndex; matchedDesired: that entry is this very desired one.
	matched, matchedDesired bool
	matchedIndex            uint64
	refreshChain            bool
	judgement               *judgement
	judged                  judgingProgress

	// What a read of Consul said; read is false before one.
	read   bool
	actual consulapi.ConfigEntry
	owned  bool
	// Of an entry of ours that nothing desires: its owner exists but was never
	// confirmed; how much longer its grace lasts (ServiceDefaultsGrace); the entries
	// of ours Consul holds that refer to it and are to stop (leavingReferrers).
	ownerUnconfirmed bool
	graceLeft        time.Duration
	referrers        []translate.EntryKey
}

// op is what the writer does with an entry.
type op int

const (
	// opSettled: Consul holds what is desired (or nothing, as desired); record it,
	// and look again after action.after when that is set (Consul has not judged it).
	opSettled op = iota
	// opRead: what the ledger knows is not enough; read the entry and decide again.
	opRead
	// opCreate, opUpdate and opDelete write with check-and-set on action.index.
	opCreate
	opUpdate
	opDelete
	// opRewrite writes the desired entry again with the next action.counter in its
	// meta, a change Consul sees (its 1.15 workarounds: judge.go, chains.go).
	opRewrite
	// opForeign: an entry of someone else stands where ours should; it is left alone
	// and its owner told.
	opForeign
	// opKeep leaves an entry of ours that nothing desires, for action.why, and looks
	// again after action.after when that is set.
	opKeep
	// opAwaitReferrers leaves an entry of ours that nothing desires until the entries
	// of ours that refer to it stop (Consul refuses the delete before).
	opAwaitReferrers
)

// action is decide's answer: what to do, and what it needs.
type action struct {
	op      op
	index   uint64
	counter string
	after   time.Duration
	why     string
}

// decide returns what to do with an entry, from its state at now. Before a read it
// acts only where the ledger knows enough: nothing to do, a create, or an update on
// the index the watch saw; otherwise it asks for a read.
func decide(st entryState, now time.Time) action {
	if !st.read {
		return decideUnread(st)
	}
	switch {
	case st.desired == nil && st.actual == nil:
		return action{op: opSettled}
	case st.desired == nil:
		return decideUndesired(st)
	case st.actual == nil:
		return action{op: opCreate}
	case !st.owned:
		return action{op: opForeign}
	case sameEntry(st.desired, st.actual):
		return decideSettled(st, now)
	default:
		return action{op: opUpdate, index: st.actual.GetModifyIndex()}
	}
}

// decideUnread acts on what the ledger knows. An entry awaiting Consul's judgement,
// due for a chain refresh, or not desired is read first.
func decideUnread(st entryState) action {
	switch {
	case st.desired == nil || st.refreshChain:
		return action{op: opRead}
	case st.matchedDesired && st.judgement == nil:
		return action{op: opSettled}
	case st.knownAbsent:
		return action{op: opCreate}
	case st.matched && !st.matchedDesired:
		return action{op: opUpdate, index: st.matchedIndex}
	default:
		return action{op: opRead}
	}
}

// decideUndesired deletes an entry nothing desires any more, when it is ours and
// nothing holds it back.
func decideUndesired(st entryState) action {
	switch {
	case !st.owned:
		return action{op: opSettled} // not ours: never deleted
	case st.ownerUnconfirmed:
		return action{op: opKeep, why: "Keeping the entry of an object not confirmed yet"}
	case st.graceLeft > 0:
		return action{op: opKeep, after: st.graceLeft, why: "Keeping the service-defaults of an existing Service a while after their last route"}
	case len(st.referrers) > 0:
		return action{op: opAwaitReferrers}
	default:
		return action{op: opDelete, index: st.actual.GetModifyIndex()}
	}
}

// decideSettled handles an entry Consul holds as desired: a chain refresh that is due,
// a judgement Consul passed over, or a wait for Consul's judgement.
func decideSettled(st entryState, now time.Time) action {
	index := st.actual.GetModifyIndex()
	if st.refreshChain {
		return action{op: opRewrite, counter: metaChainRefresh, index: index}
	}
	judged := AcceptedCondition(st.actual) != nil
	switch j := st.judgement; {
	case !judgedKinds[st.key.Kind] || judged:
		return action{op: opSettled}
	case j == nil:
		// Written before this process started, or by an earlier leader: the wait
		// starts now.
		return action{op: opSettled, after: judgeTimeout}
	case j.rejudges >= maxRejudges:
		return action{op: opSettled}
	}
	if over, wait := passedOver(st.judgement.writtenAt, st.judged, now); !over {
		return action{op: opSettled, after: wait}
	}
	return action{op: opRewrite, counter: metaRejudge, index: index}
}
