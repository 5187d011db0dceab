package consul

import (
	"reflect"
	"slices"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// ledger is what the syncer knows of each Consul entry: what is desired (the
// translation's), what Consul holds, what was written, what Consul refused, and what
// the entry waits for. One lock guards it all, so a worker reads one consistent line
// (stateOf) and records one outcome at a time. Consul's verdicts, which the status
// pipeline reads per object, are kept per object (verdicts).
//
// Besides what is desired, nothing in it is needed for correctness: every write is a
// check-and-set, so a line that is out of date costs a failed write and a read, never
// a wrong entry. It saves reads (a create where the watch saw nothing, an update of an
// entry the watch matched), comparisons (the watch skips entries it matched before),
// and it carries what Consul 1.15 needs written again (rewrites).
type ledger struct {
	mu      gosync.Mutex
	entries map[translate.EntryKey]*entryLine
	// listed are the kinds the watch listed since Consul's data was last possibly
	// replaced; of other kinds nothing is known to be absent.
	listed map[string]bool
	// referredBy is, per entry, the entries of ours Consul holds that refer to it
	// (entryLine.refersTo), which it may be deleted only after.
	referredBy map[translate.EntryKey]map[translate.EntryKey]bool
	// judged is how far Consul has come judging what was written (see passedOver).
	judged judgingProgress
	// desired counts the lines with a desired entry.
	desired int
	// listsSent counts the lists the watch sent (listSent); a line records the count
	// when the writer last found its entry in Consul (entryLine.presentSince).
	listsSent uint64
}

// entryLine is the ledger's line for one entry. A line that holds nothing is dropped.
type entryLine struct {
	// desired is the entry Consul must hold, the translation's; nil for none.
	desired consulapi.ConfigEntry
	// present: Consul holds an entry under the key, as the watch last listed it or as
	// the syncer wrote or read it since.
	present bool
	// presentSince is the ledger's listsSent when the writer last wrote the entry or
	// read it in Consul (0 when present comes from a list): a list sent before then
	// may have been answered without it.
	presentSince uint64
	// held is a fingerprint of the content Consul was last seen holding or was last
	// given, when known: writing that same content again puts back what something
	// else changed (drift).
	held      uint64
	heldKnown bool
	// match is what Consul held and what was desired when the watch last found them
	// equal; nil when it did not, or forgot.
	match *matchedEntry
	// refersTo are the entries this one, an entry of ours Consul holds, refers to and
	// that may be deleted only after it stops (see orderedReferences).
	refersTo []translate.EntryKey
	// judgement is set while a judged kind waits for Consul's verdict.
	judgement *judgement
	// refreshChain: the entry's service-defaults are due to be written again so that
	// Consul serves a backend bound again (see chains.go).
	refreshChain bool
	// undesiredSince is when an entry of ours was first found no longer desired.
	undesiredSince time.Time
	// refused is what Consul answered when it last refused to write the entry;
	// foreign, that the entry Consul holds is someone else's; heldBack, what the entry
	// waits for and cannot be written without. Each ends when the entry settles, and
	// an entry that waits for this one says why (dependencyState).
	refused  string
	foreign  bool
	heldBack string
}

// matchedEntry is what the watch last found equal: Consul's ModifyIndex and content
// (without what Consul manages), and the desired entry they matched.
type matchedEntry struct {
	modifyIndex uint64
	content     any
	desired     consulapi.ConfigEntry
}

// judgement is when an entry was written (or first seen unjudged) and how often it was
// written again for Consul to judge it.
type judgement struct {
	writtenAt time.Time
	rejudges  int
}

// judgingProgress is when an awaited entry was last seen judged.
type judgingProgress struct {
	at time.Time
}

func newLedger() *ledger {
	return &ledger{entries: map[translate.EntryKey]*entryLine{}, listed: map[string]bool{}, referredBy: map[translate.EntryKey]map[translate.EntryKey]bool{}}
}

// line returns key's line, adding an empty one. Callers hold l.mu.
func (l *ledger) line(key translate.EntryKey) *entryLine {
	e := l.entries[key]
	if e == nil {
		e = &entryLine{}
		l.entries[key] = e
	}
	return e
}

// tidy drops key's line when it holds nothing. Callers hold l.mu.
func (l *ledger) tidy(key translate.EntryKey) {
	if e := l.entries[key]; e != nil && reflect.ValueOf(*e).IsZero() {
		delete(l.entries, key)
	}
}

// setReferences replaces what from refers to, and returns what nothing refers to any
// more. Callers hold l.mu.
func (l *ledger) setReferences(from translate.EntryKey, to []translate.EntryKey) []translate.EntryKey {
	var released []translate.EntryKey
	if e := l.entries[from]; e != nil {
		for _, old := range e.refersTo {
			delete(l.referredBy[old], from)
			if len(l.referredBy[old]) == 0 {
				delete(l.referredBy, old)
				released = append(released, old)
			}
		}
		e.refersTo = nil
	}
	if len(to) > 0 {
		l.line(from).refersTo = to
		for _, k := range to {
			if l.referredBy[k] == nil {
				l.referredBy[k] = map[translate.EntryKey]bool{}
			}
			l.referredBy[k][from] = true
		}
	}
	l.tidy(from)
	return slices.DeleteFunc(released, func(k translate.EntryKey) bool { return len(l.referredBy[k]) > 0 })
}

// What the writer records in the ledger, once per sync of an entry (record). The
// helpers below it, like line and tidy, are called with l.mu held.

// recorded is what recording an outcome found: entries nothing refers to any more, a
// write that put back a drift, and the attempt of a rewrite for Consul's judgement.
type recorded struct {
	released []translate.EntryKey
	drift    bool
	attempt  int
}

// record takes what performing act on st did (res) at now.
func (l *ledger) record(st entryState, act action, res result, now time.Time) recorded {
	held := heldContent(st, act)
	l.mu.Lock()
	defer l.mu.Unlock()
	key := st.key
	if act.op == opRewrite {
		// Consul holds what is desired, whether the rewrite lands or not.
		l.settled(key, held, st.actual, now)
	}
	switch {
	case res.blocked != "":
		l.holdBack(key, res.blocked)
		return recorded{}
	case res.failure != nil && (act.op == opDelete || st.desired != nil):
		l.failed(key, refusalText(res.failure))
	}
	if res.err != nil {
		return recorded{}
	}
	var rec recorded
	switch act.op {
	case opCreate, opUpdate:
		rec.drift, rec.released = l.wrote(key, held, l.orderedReferences(st.desired), now)
	case opDelete:
		rec.released = l.deleted(key)
	case opRewrite:
		rec.attempt = l.rewrote(key, act.counter, now)
	case opForeign:
		l.foreignEntry(key)
	case opSettled:
		l.settled(key, held, st.actual, now)
	}
	l.tidy(key)
	return rec
}

// content is a fingerprint of an entry's content, when known.
type content struct {
	fingerprint uint64
	known       bool
}

// heldContent is the content Consul holds once act is done: the desired entry written,
// or found as Consul holds it. It is taken before the ledger's lock: it encodes the
// entry.
func heldContent(st entryState, act action) content {
	written := act.op == opCreate || act.op == opUpdate
	if st.desired == nil || !written && st.actual == nil {
		return content{}
	}
	fp, ok := fingerprint(st.desired)
	return content{fp, ok}
}

// wrote records that Consul now holds the written content under key, written at now,
// referring to refs. It reports whether Consul had held this very content before (the
// write put back a drift), and returns the entries nothing refers to any more.
func (l *ledger) wrote(key translate.EntryKey, written content, refs []translate.EntryKey, now time.Time) (drift bool, released []translate.EntryKey) {
	e := l.line(key)
	drift = written.known && e.heldKnown && e.held == written.fingerprint
	e.held, e.heldKnown = written.fingerprint, written.known
	l.foundPresent(e)
	e.refused, e.foreign, e.heldBack = "", false, ""
	if judgedKinds[key.Kind] {
		e.judgement = &judgement{writtenAt: now}
	}
	return drift, l.setReferences(key, refs)
}

// rewrote records that the desired entry was written again with a counter in its
// meta: a rewrite for Consul's judgement counts an attempt and restarts the wait; a
// chain refresh is done.
func (l *ledger) rewrote(key translate.EntryKey, counter string, now time.Time) int {
	e := l.line(key)
	e.refused, e.foreign, e.heldBack = "", false, ""
	if counter == metaChainRefresh {
		e.refreshChain = false
		return 0
	}
	j := judgement{}
	if e.judgement != nil {
		j = *e.judgement
	}
	j.writtenAt = now
	j.rejudges++
	e.judgement = &j
	return j.rejudges
}

// settled records that Consul holds the desired entry under key (actual, as read,
// whose content held is), or holds nothing and nothing is desired. What it refused
// before is over. A judged kind's judgement ends when Consul has judged it, and starts
// when it is found unjudged with none (written before this process started, or by an
// earlier leader).
func (l *ledger) settled(key translate.EntryKey, held content, actual consulapi.ConfigEntry, now time.Time) {
	e := l.line(key)
	e.refused, e.foreign, e.heldBack = "", false, ""
	if held.known {
		e.held, e.heldKnown = held.fingerprint, true
	}
	if actual != nil {
		l.foundPresent(e)
		l.noteJudgement(key, e, actual, now)
	}
	l.tidy(key)
}

// foundPresent records that the writer found Consul holding e's entry, by writing it
// or reading it. Callers hold l.mu.
func (l *ledger) foundPresent(e *entryLine) {
	e.present, e.presentSince = true, l.listsSent
}

// noteJudgement follows the verdict on an entry Consul holds as desired. It reports
// whether a wait for Consul's judgement started. Callers hold l.mu.
func (l *ledger) noteJudgement(key translate.EntryKey, e *entryLine, actual consulapi.ConfigEntry, now time.Time) bool {
	if !judgedKinds[key.Kind] {
		return false
	}
	if AcceptedCondition(actual) == nil {
		if e.judgement != nil {
			return false
		}
		e.judgement = &judgement{writtenAt: now}
		return true
	}
	if e.judgement == nil {
		return false
	}
	l.judged.at = now
	e.judgement = nil
	return false
}

// deleted records that Consul holds nothing under key any more: everything known of
// Consul's entry goes. It returns the entries nothing refers to any more.
func (l *ledger) deleted(key translate.EntryKey) []translate.EntryKey {
	released := l.setReferences(key, nil)
	if e := l.entries[key]; e != nil {
		// What is desired is the translation's: an entry desired again since the
		// delete was decided is written again.
		*e = entryLine{desired: e.desired}
		l.tidy(key)
	}
	return released
}

// failed records what Consul answered when it refused to write key ("" for a failure
// that is not an answer, which records nothing).
func (l *ledger) failed(key translate.EntryKey, refusal string) {
	if refusal == "" {
		return
	}
	l.line(key).refused = refusal
}

// foreignEntry records that the entry Consul holds under key is someone else's.
func (l *ledger) foreignEntry(key translate.EntryKey) {
	l.line(key).foreign = true
}

// holdBack records what the entry under key waits for and cannot be written without.
func (l *ledger) holdBack(key translate.EntryKey, reason string) {
	l.line(key).heldBack = reason
}
