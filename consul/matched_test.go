package consul

import (
	"testing"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// TestMatchedEntries: what the drift watch remembers of the entries it found as desired
// lets it skip comparisons and the writer skip reads, and only while that is safe.
func TestMatchedEntries(t *testing.T) {
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
	m := newMatchedEntries()
	if m.unchanged(key, held(7, ""), desired) || m.holds(key, desired) {
		t.Fatal("an entry never matched counts as matched")
	}
	m.record(key, held(7, ""), desired)

	if !m.unchanged(key, held(7, ""), desired) {
		t.Error("the same index and desired entry: want unchanged")
	}
	if !m.unchanged(key, held(9, "True"), desired) {
		t.Error("a new index with only Consul's status changed: want unchanged")
	}
	edited := held(10, "True")
	edited.Hostnames = []string{"hijacked.example.com"}
	if m.unchanged(key, edited, desired) {
		t.Error("a hand edit: want a comparison")
	}
	next := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "r", Hostnames: []string{"b.example.com"}}
	if m.unchanged(key, held(9, "True"), next) {
		t.Error("a new desired entry: want a comparison")
	}
	if index, ok := m.replaceable(key, next); !ok || index != 9 {
		t.Errorf("replaceable for a new desired entry = %d, %v; want the last matched index 9", index, ok)
	}
	if _, ok := m.replaceable(key, desired); ok {
		t.Error("replaceable with the desired entry Consul already holds: want no write")
	}
	if !m.holds(key, desired) || m.holds(key, next) {
		t.Error("holds: want the matched desired entry only")
	}
	m.forgetKind(consulapi.TCPRoute)
	if !m.holds(key, desired) {
		t.Error("forgetting another kind forgot this one")
	}
	m.forgetKind(consulapi.HTTPRoute)
	if m.holds(key, desired) {
		t.Error("want nothing remembered once Consul's data may have been replaced")
	}
	if _, ok := m.replaceable(key, next); ok {
		t.Error("replaceable after forgetting: want a read first")
	}
}
