package consul

import (
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// What was written is recognised in what Consul answers (its indexes and filled-in
// defaults aside): writing it again is a drift correction, and only then.
func TestLedgerKnowsWhatConsulHeld(t *testing.T) {
	key := translate.EntryKey{Kind: consulapi.ServiceDefaults, Name: "web"}
	written := &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "web", Protocol: "http"}
	// What Consul answers for the same entry: indexes and defaults it fills in.
	stored := &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "web", Protocol: "http",
		Namespace: "default", ModifyIndex: 42, TransparentProxy: &consulapi.TransparentProxyConfig{}}
	edited := &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "web", Protocol: "tcp"}

	l := newLedger()
	if dependencyWith(l, key, written).held {
		t.Fatal("an entry never recorded is held")
	}
	if recordWritten(l, written).drift {
		t.Error("a first write counts as drift")
	}
	l.record(entryState{key: key, desired: stored, read: true, actual: stored}, action{op: opSettled}, result{}, time.Time{})
	if !l.dependency(key).held {
		t.Error("the written entry is not held after Consul was seen holding it with its own fields")
	}
	if dependencyWith(l, key, edited).held {
		t.Error("other content is held")
	}
	l.desire(map[translate.EntryKey]consulapi.ConfigEntry{key: written})
	if !recordWritten(l, written).drift {
		t.Error("writing again what Consul held: want a drift correction")
	}
	if dependencyWith(l, translate.EntryKey{Kind: consulapi.ServiceDefaults, Name: "api"}, written).held {
		t.Error("another key is held")
	}
	recordDeleted(l, key)
	if known := l.dependency(key); known.held || known.present {
		t.Error("a deleted entry is held or present")
	}
	l.desire(map[translate.EntryKey]consulapi.ConfigEntry{key: nil, {Kind: consulapi.ServiceDefaults, Name: "api"}: nil})
	if len(l.entries) != 0 {
		t.Errorf("the ledger keeps %d lines once nothing is desired and the only entry was deleted", len(l.entries))
	}
}

// What the drift watch remembers of the entries it found as desired lets it skip
// comparisons and the writer skip reads, and only while that is safe.
func TestLedgerMatches(t *testing.T) {
	key := translate.EntryKey{Kind: consulapi.HTTPRoute, Name: "r"}
	desired := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "r", Hostnames: []string{"a.example.com"}}
	held := func(index uint64, status string) *consulapi.HTTPRouteConfigEntry {
		e := *desired
		e.ModifyIndex = index
		if status != "" {
			e.Status.Conditions = []consulapi.Condition{{Type: "Accepted", Status: consulapi.ConditionStatus(status)}}
		}
		return &e
	}
	l := newLedger()
	if l.unchanged(key, held(7, ""), desired) || stateWith(l, key, desired).matched {
		t.Fatal("an entry never matched counts as matched")
	}
	l.matched(key, held(7, ""), desired)

	if !l.unchanged(key, held(7, ""), desired) {
		t.Error("the same index and desired entry: want unchanged")
	}
	if !l.unchanged(key, held(9, "True"), desired) {
		t.Error("a new index with only Consul's status changed: want unchanged")
	}
	edited := held(10, "True")
	edited.Hostnames = []string{"hijacked.example.com"}
	if l.unchanged(key, edited, desired) {
		t.Error("a hand edit: want a comparison")
	}
	next := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "r", Hostnames: []string{"b.example.com"}}
	if l.unchanged(key, held(9, "True"), next) {
		t.Error("a new desired entry: want a comparison")
	}
	if st := stateWith(l, key, next); !st.matched || st.matchedDesired || st.matchedIndex != 9 {
		t.Errorf("state for a new desired entry = matched %v, this one %v, index %d; want the last matched index 9 of another", st.matched, st.matchedDesired, st.matchedIndex)
	}
	if st := stateWith(l, key, desired); !st.matchedDesired {
		t.Error("the desired entry the watch matched: want matchedDesired")
	}
	l.forgetKind(consulapi.TCPRoute, 0)
	if !stateWith(l, key, desired).matchedDesired {
		t.Error("forgetting another kind forgot this one")
	}
	l.forgetKind(consulapi.HTTPRoute, 0)
	if st := stateWith(l, key, next); st.matched || st.knownAbsent {
		t.Error("want nothing remembered once Consul's data may have been replaced: no match, and nothing known absent")
	}
}

// The watch's list says what exists; what the writer wrote or deleted since adds to it.
func TestLedgerKnowsWhatExists(t *testing.T) {
	a := translate.EntryKey{Kind: consulapi.HTTPRoute, Name: "a"}
	b := translate.EntryKey{Kind: consulapi.HTTPRoute, Name: "b"}
	l := newLedger()
	if l.stateOf(a).knownAbsent {
		t.Fatal("before any list nothing is known absent")
	}
	l.list(consulapi.HTTPRoute, 0, []translate.EntryKey{a}, nil)
	if l.stateOf(a).knownAbsent || !l.stateOf(b).knownAbsent {
		t.Error("after a list of a: want a present and b absent")
	}
	recordWritten(l, &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "b"})
	recordDeleted(l, a)
	if !l.stateOf(a).knownAbsent || l.stateOf(b).knownAbsent {
		t.Error("after writing b and deleting a: want b present and a absent")
	}
}

// stateWith is l's state of key once desired is what the translation wants there.
func stateWith(l *ledger, key translate.EntryKey, desired consulapi.ConfigEntry) entryState {
	l.desire(map[translate.EntryKey]consulapi.ConfigEntry{key: desired})
	return l.stateOf(key)
}

// A line keeps what is desired through a delete of Consul's entry: an entry desired
// again while its delete was under way is written again.
func TestLedgerKeepsWhatIsDesiredThroughADelete(t *testing.T) {
	key := translate.EntryKey{Kind: consulapi.HTTPRoute, Name: "r"}
	desired := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "r"}
	l := newLedger()
	l.list(consulapi.HTTPRoute, 0, []translate.EntryKey{key}, nil)
	changed, count := l.desire(map[translate.EntryKey]consulapi.ConfigEntry{key: desired})
	if len(changed) != 1 || count != 1 {
		t.Fatalf("desire = %v, %d; want the key changed and one entry desired", changed, count)
	}
	if changed, _ := l.desire(map[translate.EntryKey]consulapi.ConfigEntry{key: desired}); len(changed) != 0 {
		t.Errorf("the same desired entry again: changed %v, want none", changed)
	}
	recordDeleted(l, key)
	st := l.stateOf(key)
	if st.desired != desired || !st.knownAbsent {
		t.Errorf("after the delete: desired %v, known absent %v; want the desired entry kept and Consul's known absent", st.desired, st.knownAbsent)
	}
	if _, count := l.desire(map[translate.EntryKey]consulapi.ConfigEntry{key: nil}); count != 0 {
		t.Errorf("%d entries desired after the last went; want 0", count)
	}
}

// dependencyWith is what l knows of key as a dependency once wanted is desired there.
func dependencyWith(l *ledger, key translate.EntryKey, wanted consulapi.ConfigEntry) dependencyState {
	l.desire(map[translate.EntryKey]consulapi.ConfigEntry{key: wanted})
	return l.dependency(key)
}

// recordWritten records in l that the writer created entry, and returns what the
// ledger found.
func recordWritten(l *ledger, entry consulapi.ConfigEntry) recorded {
	return l.record(entryState{key: translate.KeyOf(entry), desired: entry}, action{op: opCreate}, result{}, time.Time{})
}

// recordDeleted records in l that the writer deleted the entry under key, and returns
// the entries nothing refers to any more.
func recordDeleted(l *ledger, key translate.EntryKey) []translate.EntryKey {
	st := entryState{key: key, read: true, actual: &consulapi.HTTPRouteConfigEntry{Kind: key.Kind, Name: key.Name}}
	return l.record(st, action{op: opDelete}, result{}, time.Time{}).released
}

// A list sent before the writer found an entry in Consul (writing it, or reading it)
// does not make it known absent, nor does a fresh list that forgets the kind; a list
// sent after does.
func TestLedgerTakesNoAbsenceFromAnAnswerOlderThanTheWriter(t *testing.T) {
	key := translate.EntryKey{Kind: consulapi.HTTPRoute, Name: "r"}
	entry := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "r"}
	l := newLedger()
	l.list(consulapi.HTTPRoute, l.listSent(), nil, nil)
	older := l.listSent()
	recordWritten(l, entry)
	l.list(consulapi.HTTPRoute, older, nil, nil)
	if stateWith(l, key, entry).knownAbsent {
		t.Error("written after the list was sent: known absent")
	}
	l.forgetKind(consulapi.HTTPRoute, older)
	l.list(consulapi.HTTPRoute, older, nil, nil)
	if stateWith(l, key, entry).knownAbsent {
		t.Error("written after a fresh list was sent: known absent")
	}
	l.list(consulapi.HTTPRoute, l.listSent(), nil, nil)
	if !stateWith(l, key, entry).knownAbsent {
		t.Error("missing from a list sent after the write: not known absent")
	}

	older = l.listSent()
	l.record(entryState{key: key, desired: entry, read: true, actual: entry}, action{op: opSettled}, result{}, time.Time{})
	l.list(consulapi.HTTPRoute, older, nil, nil)
	if stateWith(l, key, entry).knownAbsent {
		t.Error("read in Consul after the list was sent: known absent")
	}
}
