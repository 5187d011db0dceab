package identity

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// TestEnqueueChanged: the first answer of an ACL list brings back every Gateway known
// and every one an object of ours names; a later answer only the Gateways whose objects
// in the list changed (edited, replaced, come or gone), and, when an object not ours
// changed, the Gateways with a problem. test/integration's
// TestIdentitySyncsOnlyTheChangedGateway shows it on a real Consul.
func TestEnqueueChanged(t *testing.T) {
	t.Parallel()
	namer := Namer{Ownership: translate.Ownership{Controller: "test.example.com/controller", ClusterID: "unit"}}
	a, b, c := cache.ObjectName{Namespace: "apps", Name: "a"}, cache.ObjectName{Namespace: "apps", Name: "b"}, cache.ObjectName{Namespace: "apps", Name: "c"}
	ours := func(owner cache.ObjectName, id string, index uint64) aclObject {
		return aclObject{id: id, description: namer.Description(owner), modifyIndex: index}
	}
	foreign := func(id string, index uint64) aclObject {
		return aclObject{id: id, description: "someone else's", modifyIndex: index}
	}
	base := []aclObject{ours(a, "pa", 10), ours(b, "pb", 11), foreign("px", 12)}
	tests := []struct {
		name     string
		first    bool // the answer is the list's first
		now      []aclObject
		problems []cache.ObjectName
		want     []cache.ObjectName
	}{
		{"first answer: every Gateway known and named", true, append(slices.Clone(base), ours(c, "pc", 13)), nil, []cache.ObjectName{a, b, c}},
		{"nothing of ours changed", false, slices.Clone(base), nil, nil},
		{"one Gateway's object edited", false, []aclObject{ours(a, "pa", 10), ours(b, "pb", 20), foreign("px", 12)}, nil, []cache.ObjectName{b}},
		{"one Gateway's object replaced", false, []aclObject{ours(a, "pa2", 21), ours(b, "pb", 11), foreign("px", 12)}, nil, []cache.ObjectName{a}},
		{"one Gateway's object gone", false, []aclObject{ours(b, "pb", 11), foreign("px", 12)}, nil, []cache.ObjectName{a}},
		{"a new Gateway's object", false, append(slices.Clone(base), ours(c, "pc", 13)), nil, []cache.ObjectName{c}},
		{"an object not ours changed: the Gateways with a problem", false, []aclObject{ours(a, "pa", 10), ours(b, "pb", 11)}, []cache.ObjectName{b}, []cache.ObjectName{b}},
		{"an object not ours changed, no problem", false, []aclObject{ours(a, "pa", 10), ours(b, "pb", 11), foreign("px", 30)}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := NewManager(Config{Namer: namer})
			m.gateways.Know(a)
			for _, p := range tt.problems {
				m.problems[p] = "in the way"
			}
			last := m.snapshot(base)
			if tt.first {
				last = aclSnapshot{}
			}
			m.enqueueChanged(last, m.snapshot(tt.now))
			if diff := cmp.Diff(tt.want, drain(m)); diff != "" {
				t.Errorf("Gateways queued (-want +got):\n%s", diff)
			}
		})
	}
}

// drain takes every key off m's queue, sorted.
func drain(m *Manager) []cache.ObjectName {
	var keys []cache.ObjectName
	for m.queue.Len() > 0 {
		key, _ := m.queue.Get()
		m.queue.Done(key)
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b cache.ObjectName) int { return strings.Compare(a.String(), b.String()) })
	return keys
}
