package consul

import (
	"context"
	"strconv"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// Consul 1.15's gateway controller now and then never judges an entry it was given:
// the entry keeps an empty status, and the object's status would say Pending for good.
// An entry Consul passed over is written again with a new metaRejudge value, which
// Consul sees as a change and judges; at most maxRejudges times per content.
//
// Consul judges one entry at a time, in about the order they were written, so after a
// cold start thousands of entries wait their turn for minutes. Waiting is not being
// passed over: an entry counts as passed over once it has waited judgeTimeout and
// either Consul judged nothing for judgeTimeout, or it judged an entry written
// judgeTimeout or more after this one.
const (
	judgeTimeout = 10 * time.Second
	maxRejudges  = 3
	// metaRejudge counts those writes. It is not part of the desired state: the
	// comparison with Consul's entry ignores it.
	metaRejudge = "gateway-controller-rejudge"
)

// judgedKinds are the entry kinds Consul gives a status.
var judgedKinds = map[string]bool{consulapi.APIGateway: true, consulapi.HTTPRoute: true, consulapi.TCPRoute: true}

// awaitingJudgement tracks the entries written and not yet judged by Consul.
type awaitingJudgement struct {
	mu      gosync.Mutex
	entries map[translate.EntryKey]judgement
	// lastJudgedAt is when an awaited entry was last seen judged, and lastJudgedWritten
	// the latest time at which an entry seen judged had been written: how far Consul
	// has come.
	lastJudgedAt, lastJudgedWritten time.Time
}

type judgement struct {
	writtenAt time.Time
	rejudges  int
}

func newAwaitingJudgement() *awaitingJudgement {
	return &awaitingJudgement{entries: map[translate.EntryKey]judgement{}}
}

// written notes new content under key, written at now.
func (a *awaitingJudgement) written(key translate.EntryKey, now time.Time) {
	if !judgedKinds[key.Kind] {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries[key] = judgement{writtenAt: now}
}

// rejudged notes that the same content was written again at now.
func (a *awaitingJudgement) rejudged(key translate.EntryKey, now time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	j := a.entries[key]
	j.writtenAt = now
	j.rejudges++
	a.entries[key] = j
	return j.rejudges
}

// noteUnjudged starts the wait for an entry seen unjudged, unless it is already
// waiting; it reports whether it started one.
func (a *awaitingJudgement) noteUnjudged(key translate.EntryKey, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.entries[key]; ok {
		return false
	}
	a.entries[key] = judgement{writtenAt: now}
	return true
}

// awaiting reports whether an entry written or seen unjudged still waits for Consul.
func (a *awaitingJudgement) awaiting(key translate.EntryKey) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.entries[key]
	return ok
}

func (a *awaitingJudgement) forget(key translate.EntryKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.entries, key)
}

// judged notes that Consul judged key, seen at now. Callers hold a.mu.
func (a *awaitingJudgement) judged(key translate.EntryKey, now time.Time) {
	j, ok := a.entries[key]
	if !ok {
		return
	}
	delete(a.entries, key)
	a.lastJudgedAt = now
	if j.writtenAt.After(a.lastJudgedWritten) {
		a.lastJudgedWritten = j.writtenAt
	}
}

// seenJudged is judged for callers that do not hold a.mu.
func (a *awaitingJudgement) seenJudged(key translate.EntryKey, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.judged(key, now)
}

// passedOver reports whether an entry that has waited since writtenAt counts as
// passed over at now, and otherwise how long to wait before looking again. Callers
// hold a.mu.
func (a *awaitingJudgement) passedOver(writtenAt, now time.Time) (bool, time.Duration) {
	if waited := now.Sub(writtenAt); waited < judgeTimeout {
		return false, judgeTimeout - waited
	}
	if a.lastJudgedWritten.Sub(writtenAt) >= judgeTimeout {
		return true, 0 // Consul judged entries written well after this one
	}
	if idle := now.Sub(a.lastJudgedAt); idle < judgeTimeout {
		return false, judgeTimeout - idle // Consul is still working through its backlog
	}
	return true, 0
}

// check decides, for an owned entry Consul holds as desired, whether to write it again
// now; otherwise, while it is unjudged, how long to wait before looking again (0: do
// not look again).
func (a *awaitingJudgement) check(key translate.EntryKey, actual consulapi.ConfigEntry, now time.Time) (rejudge bool, wait time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	j, ok := a.entries[key]
	if !ok && judgedKinds[key.Kind] && AcceptedCondition(actual) == nil {
		// Written before this process started, or by an earlier leader.
		a.entries[key] = judgement{writtenAt: now}
		return false, judgeTimeout
	}
	if !ok {
		return false, 0
	}
	if AcceptedCondition(actual) != nil {
		a.judged(key, now)
		return false, 0
	}
	if j.rejudges >= maxRejudges {
		return false, 0
	}
	return a.passedOver(j.writtenAt, now)
}

// rejudge writes desired again, with check-and-set on what Consul holds, carrying the
// next metaRejudge value.
func (s *Syncer) rejudge(ctx context.Context, logger klog.Logger, key translate.EntryKey, desired, actual consulapi.ConfigEntry) error {
	n, _ := strconv.Atoi(actual.GetMeta()[metaRejudge])
	again := withMeta(desired, metaRejudge, strconv.Itoa(n+1))
	err := s.write(ctx, logger, "Updated", key, desired.GetMeta(), func(w *consulapi.WriteOptions) (bool, error) {
		ok, _, err := s.cfg.Client.ConfigEntries().CAS(Compact(again), actual.GetModifyIndex(), w)
		return ok, err
	})
	if err != nil {
		return err
	}
	attempt := s.judging.rejudged(key, s.clock.Now())
	logger.V(2).Info("Consul passed over the entry; wrote it again so it judges it", "attempt", attempt)
	s.queue.AddAfter(key, judgeTimeout)
	return nil
}

// withMeta is a copy of entry with meta[k] = v, for the kinds Consul judges and
// service-defaults.
func withMeta(entry consulapi.ConfigEntry, k, v string) consulapi.ConfigEntry {
	meta := map[string]string{k: v}
	for mk, mv := range entry.GetMeta() {
		if mk != k {
			meta[mk] = mv
		}
	}
	switch e := entry.(type) {
	case *consulapi.APIGatewayConfigEntry:
		c := *e
		c.Meta = meta
		return &c
	case *consulapi.HTTPRouteConfigEntry:
		c := *e
		c.Meta = meta
		return &c
	case *consulapi.TCPRouteConfigEntry:
		c := *e
		c.Meta = meta
		return &c
	case *consulapi.ServiceConfigEntry:
		c := *e
		c.Meta = meta
		return &c
	}
	return entry
}
