package identity

import (
	"context"
	"fmt"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// aclList is one of the ACL lists a blocking query watches: its answer names the
// Gateways of the objects of ours it holds, and says which objects changed.
type aclList struct {
	name  string
	query func(q *consulapi.QueryOptions) (objects []aclObject, meta *consulapi.QueryMeta, err error)
}

// aclObject is one entry of an ACL list: its description names its owner when it is
// ours; its ID and ModifyIndex change when it is replaced or edited.
type aclObject struct {
	id, description string
	modifyIndex     uint64
}

func (m *Manager) lists() []aclList {
	acl := m.cfg.Client.ACL()
	return []aclList{
		{"policies", func(q *consulapi.QueryOptions) ([]aclObject, *consulapi.QueryMeta, error) {
			list, meta, err := acl.PolicyList(q)
			out := make([]aclObject, 0, len(list))
			for _, p := range list {
				out = append(out, aclObject{id: p.ID, description: p.Description, modifyIndex: p.ModifyIndex})
			}
			return out, meta, err
		}},
		{"roles", func(q *consulapi.QueryOptions) ([]aclObject, *consulapi.QueryMeta, error) {
			list, meta, err := acl.RoleList(q)
			out := make([]aclObject, 0, len(list))
			for _, r := range list {
				out = append(out, aclObject{id: r.ID, description: r.Description, modifyIndex: r.ModifyIndex})
			}
			return out, meta, err
		}},
		// An auth method that appears may be the one a Gateway waits for; none is ours.
		{"auth methods", func(q *consulapi.QueryOptions) ([]aclObject, *consulapi.QueryMeta, error) {
			list, meta, err := acl.AuthMethodList(q)
			out := make([]aclObject, 0, len(list))
			for _, a := range list {
				out = append(out, aclObject{id: a.Name, modifyIndex: a.ModifyIndex})
			}
			return out, meta, err
		}},
		{"binding rules", func(q *consulapi.QueryOptions) ([]aclObject, *consulapi.QueryMeta, error) {
			list, meta, err := acl.BindingRuleList("", q)
			out := make([]aclObject, 0, len(list))
			for _, r := range list {
				out = append(out, aclObject{id: r.ID, description: r.Description, modifyIndex: r.ModifyIndex})
			}
			return out, meta, err
		}},
	}
}

// aclWatchWait is how long one blocking query on an ACL list may wait for a change.
const aclWatchWait = 10 * time.Second

// watch follows one ACL list: its first answer brings back every Gateway known and
// those whose objects of ours outlived them (they went while no leader ran); each
// later change only the Gateways whose objects in the list changed, came or went, so
// a hand edit or deletion is put back without a sync of every other Gateway (each a
// few consistent reads), and the Gateways with a problem when an object that is not
// ours changed (one in the way may be gone, an auth method awaited may have come).
func (m *Manager) watch(ctx context.Context, list aclList) {
	logger := klog.FromContext(ctx).WithName("identity")
	var index uint64
	var last aclSnapshot
	for ctx.Err() == nil {
		opts := (&consulapi.QueryOptions{WaitIndex: index, WaitTime: aclWatchWait, Partition: m.cfg.Naming.Partition}).WithContext(ctx)
		objects, meta, err := list.query(opts)
		if err != nil {
			if ctx.Err() == nil {
				logger.V(4).Info("ACL watch failed; retrying", "list", list.name, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
				}
			}
			continue
		}
		if meta.LastIndex != index {
			now := m.snapshot(objects)
			m.enqueueChanged(last, now)
			last = now
		}
		index = meta.LastIndex
	}
}

// aclSnapshot is what one answer of an ACL list holds, as far as the watch cares.
type aclSnapshot struct {
	// owned says, per Gateway, which of its objects the list holds (ID and
	// ModifyIndex of each, in list order); nil before the first answer.
	owned map[cache.ObjectName]string
	// foreign is the same of the objects that are not ours.
	foreign string
}

// snapshot records objects by owner.
func (m *Manager) snapshot(objects []aclObject) aclSnapshot {
	s := aclSnapshot{owned: map[cache.ObjectName]string{}}
	var foreign strings.Builder
	for _, o := range objects {
		version := fmt.Sprintf("%s@%d;", o.id, o.modifyIndex)
		owner, ok := m.cfg.Namer.OwnerOf(o.description)
		if !ok {
			foreign.WriteString(version)
			continue
		}
		s.owned[owner] += version
	}
	s.foreign = foreign.String()
	return s
}

// enqueueChanged queues the Gateways whose identity may have changed from last to
// now: every one known, and every one an object of ours names, on the first answer;
// later those whose objects changed, and those with a problem when an object not
// ours did.
func (m *Manager) enqueueChanged(last, now aclSnapshot) {
	for owner := range now.owned {
		m.gateways.Know(owner)
	}
	if last.owned == nil {
		for _, k := range m.gateways.Known() {
			m.queue.Add(k)
		}
		return
	}
	for owner, objects := range now.owned {
		if last.owned[owner] != objects {
			m.queue.Add(owner)
		}
	}
	for owner := range last.owned {
		if _, ok := now.owned[owner]; !ok {
			m.queue.Add(owner)
		}
	}
	if last.foreign != now.foreign {
		for _, k := range m.withProblems() {
			m.queue.Add(k)
		}
	}
}

// withProblems are the Gateways whose identity has a problem (see Problem).
func (m *Manager) withProblems() []cache.ObjectName {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]cache.ObjectName, 0, len(m.problems))
	for k := range m.problems {
		out = append(out, k)
	}
	return out
}
