package consul

import (
	"reflect"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// What the watch records in the ledger: the entries of a kind Consul holds, what they
// refer to, which match what is desired, and whether Consul has judged them.

// listSent records that the watch is about to send a list, and returns the mark to
// give list with its answer.
func (l *ledger) listSent() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listsSent++
	return l.listsSent - 1
}

// list records that the entries of kind Consul holds are exactly present, the entries
// of ours among them referring to refs, as a list sent at mark (listSent) answered. It
// returns the entries nothing refers to any more.
//
// An entry the writer wrote or read after the list was sent stays present: Consul may
// have answered before the write. Taking the answer's word for it made a cold start
// create such entries again, each a lost check-and-set or, before Consul judged the
// entry, a create Consul answers true without writing (it skips an upsert equal to
// what it holds), logged as a drift put back. An entry really removed since is seen
// missing by the next list.
func (l *ledger) list(kind string, mark uint64, present []translate.EntryKey, refs map[translate.EntryKey][]translate.EntryKey) []translate.EntryKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	var released []translate.EntryKey
	for key, e := range l.entries {
		if key.Kind != kind {
			continue
		}
		e.keepIfFoundSince(mark)
		if len(e.refersTo) > 0 {
			released = append(released, l.setReferences(key, nil)...)
		}
		l.tidy(key)
	}
	for _, key := range present {
		l.line(key).present = true
	}
	for from, to := range refs {
		released = append(released, l.setReferences(from, to)...)
	}
	l.listed[kind] = true
	out := released[:0]
	for _, k := range released {
		if len(l.referredBy[k]) == 0 {
			out = append(out, k)
		}
	}
	return out
}

// forgetKind drops what the watch knew of kind's entries, when Consul's data may have
// been replaced: which exist, and which matched. What the writer found in Consul after
// the list at mark was sent is of the Consul that answers now, and is kept (see list).
func (l *ledger) forgetKind(kind string, mark uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.listed, kind)
	for key, e := range l.entries {
		if key.Kind == kind {
			e.keepIfFoundSince(mark)
			e.match = nil
			l.tidy(key)
		}
	}
}

// keepIfFoundSince leaves e present only when the writer found its entry in Consul
// after the list at mark was sent (see list).
func (e *entryLine) keepIfFoundSince(mark uint64) {
	if e.presentSince <= mark {
		e.present, e.presentSince = false, 0
	}
}

// knownPresent reports whether Consul is known to hold an entry under key.
func (l *ledger) knownPresent(key translate.EntryKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[key]
	return e != nil && e.present
}

// unchanged reports whether key matched before with this very desired entry, and
// Consul holds what it held then: the same ModifyIndex, or after a status-only update
// by Consul's gateway controller (which rewrites the status of every route of a gateway
// when one of them changes) the same content. Indexes are compared for equality only.
func (l *ledger) unchanged(key translate.EntryKey, actual, desired consulapi.ConfigEntry) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[key]
	switch {
	case e == nil || e.match == nil || e.match.desired != desired:
		return false
	case e.match.modifyIndex == actual.GetModifyIndex():
		return true
	case reflect.DeepEqual(e.match.content, contentOf(actual)):
		e.match.modifyIndex = actual.GetModifyIndex()
		return true
	default:
		return false
	}
}

// matched records that Consul holds desired under key, as actual.
func (l *ledger) matched(key translate.EntryKey, actual, desired consulapi.ConfigEntry) {
	m := &matchedEntry{modifyIndex: actual.GetModifyIndex(), content: contentOf(actual), desired: desired}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.line(key).match = m
}

// differs records that Consul does not hold what is desired under key.
func (l *ledger) differs(key translate.EntryKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[key]; e != nil {
		e.match = nil
		l.tidy(key)
	}
}

// settledSeen records an entry the watch found as desired: what it refused before is
// over, and its judgement is followed (noteJudgement). It reports whether a wait for
// Consul's judgement started.
func (l *ledger) settledSeen(key translate.EntryKey, actual consulapi.ConfigEntry, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.line(key)
	e.refused, e.foreign, e.heldBack = "", false, ""
	started := l.noteJudgement(key, e, actual, now)
	l.tidy(key)
	return started
}
