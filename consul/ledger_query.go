package consul

import (
	"maps"
	"slices"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// What the others ask of the ledger and set in it: the translation's desired entries,
// the state of an entry for decide, what refers to what, and the chain refreshes the
// watch asks for.

// desire takes the translation's changes to the desired entries (nil: none desired
// any more). It returns the keys whose desired entry changed, appeared or went away,
// and how many entries are desired now.
func (l *ledger) desire(changes map[translate.EntryKey]consulapi.ConfigEntry) ([]translate.EntryKey, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var changed []translate.EntryKey
	for key, entry := range changes {
		e := l.line(key)
		if entry == nil || e.desired == nil || !sameDesired(e.desired, entry) {
			changed = append(changed, key)
		}
		switch {
		case e.desired == nil && entry != nil:
			l.desired++
		case e.desired != nil && entry == nil:
			l.desired--
		}
		e.desired = entry
		l.tidy(key)
	}
	return changed, l.desired
}

// sameDesired reports whether two desired entries are equal. A kept translation hands
// back the very same entry, which needs no deep comparison.
func sameDesired(a, b consulapi.ConfigEntry) bool {
	return a == b || apiequality.Semantic.DeepEqual(a, b)
}

// desiredEntry returns the entry Consul must hold under key, if any.
func (l *ledger) desiredEntry(key translate.EntryKey) (consulapi.ConfigEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[key]; e != nil && e.desired != nil {
		return e.desired, true
	}
	return nil, false
}

// desiredKeys lists every desired entry of kind.
func (l *ledger) desiredKeys(kind string) []translate.EntryKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys []translate.EntryKey
	for key, e := range l.entries {
		if key.Kind == kind && e.desired != nil {
			keys = append(keys, key)
		}
	}
	return keys
}

// stateOf is what the ledger knows of key, for decide. A desired entry is not
// undesired any more.
func (l *ledger) stateOf(key translate.EntryKey) entryState {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := entryState{key: key, judged: l.judged}
	e := l.entries[key]
	if e == nil {
		st.knownAbsent = l.listed[key.Kind]
		return st
	}
	desired := e.desired
	st.desired = desired
	if desired != nil {
		e.undesiredSince = time.Time{}
	}
	st.knownAbsent = l.listed[key.Kind] && !e.present
	if e.match != nil {
		st.matched = true
		st.matchedDesired = desired != nil && e.match.desired == desired
		st.matchedIndex = e.match.modifyIndex
	}
	st.refreshChain = e.refreshChain
	if e.judgement != nil {
		j := *e.judgement
		st.judgement = &j
	}
	l.tidy(key)
	return st
}

// undesiredSince returns when key was first found no longer desired, now if this is
// the first time.
func (l *ledger) undesiredSince(key translate.EntryKey, now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.line(key)
	if e.undesiredSince.IsZero() {
		e.undesiredSince = now
	}
	return e.undesiredSince
}

// referencesOf are the ordered references of entry (orderedReferences).
func (l *ledger) referencesOf(entry consulapi.ConfigEntry) []translate.EntryKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.orderedReferences(entry)
}

// referrers are the entries of ours Consul holds that refer to key, sorted.
func (l *ledger) referrers(key translate.EntryKey) []translate.EntryKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Collect(maps.Keys(l.referredBy[key]))
	slices.SortFunc(out, compareKeys)
	return out
}

// dependencyState is what the ledger knows of dep, an entry another one needs
// written first: the entry desired under it (nil for none), whether Consul holds that
// very entry, or any entry, or one of someone else; what Consul answered when it
// refused it, and what it waits for.
type dependencyState struct {
	desired                consulapi.ConfigEntry
	held, present, foreign bool
	refused, heldBack      string
}

// dependency is what the ledger knows of dep.
func (l *ledger) dependency(dep translate.EntryKey) dependencyState {
	l.mu.Lock()
	e := l.entries[dep]
	if e == nil {
		l.mu.Unlock()
		return dependencyState{}
	}
	d := dependencyState{desired: e.desired, present: e.present, foreign: e.foreign, refused: e.refused, heldBack: e.heldBack}
	held, heldKnown := e.held, e.heldKnown
	l.mu.Unlock()
	if d.desired != nil && heldKnown {
		// Outside the lock: a fingerprint encodes the entry.
		fp, ok := fingerprint(d.desired)
		d.held = ok && fp == held
	}
	return d
}

// requestChainRefresh marks key's service-defaults to be written again.
func (l *ledger) requestChainRefresh(key translate.EntryKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.line(key).refreshChain = true
}
