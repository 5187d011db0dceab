package consul

import (
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	route := func(hostname string, index uint64, accepted bool) *consulapi.HTTPRouteConfigEntry {
		e := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "web", Hostnames: []string{hostname}, ModifyIndex: index,
			Meta: testOwnership.Meta(translate.Owner{Kind: "HTTPRoute", Namespace: "apps", Name: "web", UID: "u"})}
		if accepted {
			e.Status.Conditions = []consulapi.Condition{{Type: "Accepted", Status: consulapi.ConditionStatusTrue}}
		}
		return e
	}
	desired := route("a.example.com", 0, false)
	theirs := route("a.example.com", 5, false)
	theirs.Meta = nil
	key := translate.KeyOf(desired)
	waited := func(d time.Duration, rejudges int) *judgement {
		return &judgement{writtenAt: now.Add(-d), rejudges: rejudges}
	}
	read := func(st entryState, actual consulapi.ConfigEntry) entryState {
		st.read, st.actual = true, actual
		st.owned = actual != nil && testOwnership.Owns(actual.GetMeta())
		return st
	}
	tests := []struct {
		name string
		st   entryState
		want action
	}{
		// Before a read: only what the ledger knows for sure is acted on.
		{"nothing desired: read first", entryState{key: key}, action{op: opRead}},
		{"the watch matched this very entry", entryState{key: key, desired: desired, matched: true, matchedDesired: true}, action{op: opSettled}},
		{"matched but awaiting Consul's judgement: read", entryState{key: key, desired: desired, matched: true, matchedDesired: true, judgement: waited(0, 0)}, action{op: opRead}},
		{"a chain refresh is due: read", entryState{key: key, desired: desired, matched: true, matchedDesired: true, refreshChain: true}, action{op: opRead}},
		{"known absent: create", entryState{key: key, desired: desired, knownAbsent: true}, action{op: opCreate}},
		{"matched another desired entry: update on its index", entryState{key: key, desired: desired, matched: true, matchedIndex: 7}, action{op: opUpdate, index: 7}},
		{"nothing known: read", entryState{key: key, desired: desired}, action{op: opRead}},

		// After a read.
		{"absent and not desired", read(entryState{key: key}, nil), action{op: opSettled}},
		{"absent: create", read(entryState{key: key, desired: desired}, nil), action{op: opCreate}},
		{"someone else's: left alone", read(entryState{key: key, desired: desired}, theirs), action{op: opForeign}},
		{"differs: update on the index read", read(entryState{key: key, desired: desired}, route("b.example.com", 9, true)), action{op: opUpdate, index: 9}},
		{"as desired and judged", read(entryState{key: key, desired: desired}, route("a.example.com", 9, true)), action{op: opSettled}},
		{"as desired, unjudged, never waited: the wait starts", read(entryState{key: key, desired: desired}, route("a.example.com", 9, false)),
			action{op: opSettled, after: judgeTimeout}},
		{"unjudged within the timeout: wait the rest", read(entryState{key: key, desired: desired, judgement: waited(4*time.Second, 0)}, route("a.example.com", 9, false)),
			action{op: opSettled, after: judgeTimeout - 4*time.Second}},
		{"unjudged past the timeout, Consul idle: rewrite", read(entryState{key: key, desired: desired, judgement: waited(2*judgeTimeout, 0)}, route("a.example.com", 9, false)),
			action{op: opRewrite, counter: metaRejudge, index: 9}},
		{"unjudged after the last attempt: left", read(entryState{key: key, desired: desired, judgement: waited(2*judgeTimeout, maxRejudges)}, route("a.example.com", 9, false)),
			action{op: opSettled}},
		{"Consul still judging: wait", read(entryState{key: key, desired: desired, judgement: waited(3*judgeTimeout, 0),
			judged: judgingProgress{at: now.Add(-time.Second)}}, route("a.example.com", 9, false)),
			action{op: opSettled, after: judgeTimeout - time.Second}},
		{"a chain refresh is due: rewrite", read(entryState{key: key, desired: desired, refreshChain: true}, route("a.example.com", 9, true)),
			action{op: opRewrite, counter: metaChainRefresh, index: 9}},

		// An entry nothing desires any more.
		{"not ours: never deleted", read(entryState{key: key}, theirs), action{op: opSettled}},
		{"ours, its owner not confirmed: kept", func() entryState {
			st := read(entryState{key: key}, route("a.example.com", 9, true))
			st.ownerUnconfirmed = true
			return st
		}(), action{op: opKeep, why: "Keeping the entry of an object not confirmed yet"}},
		{"ours, in its grace: kept and looked at again", func() entryState {
			st := read(entryState{key: key}, route("a.example.com", 9, true))
			st.graceLeft = 5 * time.Second
			return st
		}(), action{op: opKeep, after: 5 * time.Second, why: "Keeping the service-defaults of an existing Service a while after their last route"}},
		{"ours, still referred to: waits", func() entryState {
			st := read(entryState{key: key}, route("a.example.com", 9, true))
			st.referrers = []translate.EntryKey{{Kind: consulapi.ServiceResolver, Name: "x"}}
			return st
		}(), action{op: opAwaitReferrers}},
		{"ours: deleted on the index read", read(entryState{key: key}, route("a.example.com", 9, true)), action{op: opDelete, index: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(tt.st, now); got != tt.want {
				t.Errorf("decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}
