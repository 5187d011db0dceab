package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// errCASMismatch means someone wrote the entry between our read and our write. The
// key is requeued; the next attempt reads again and decides again.
var errCASMismatch = errors.New("check-and-set index did not match: the entry changed since it was read")

// syncEntry makes Consul's entry under key equal to the desired one, or removes it when
// nothing desires it. Every create, update and delete is a check-and-set on the
// ModifyIndex just read (0 for a create). Entries that do not carry our ownership meta
// are never changed or deleted.
func (s *Syncer) syncEntry(ctx context.Context, key translate.EntryKey) error {
	logger := klog.FromContext(ctx).WithValues("kind", key.Kind, "entry", key.Name)
	desired, want := s.desiredEntry(key)
	if want {
		s.forgetUndesired(key)
	}
	if done, err := s.writeWithoutReading(ctx, logger, key, desired, want); done {
		return err
	}
	actual, err := s.readEntry(ctx, key)
	if err != nil {
		if want {
			s.verdicts.writeFailed(key, desired.GetMeta(), err, s.statusChanged)
		}
		return err
	}
	// Consul's verdicts are taken from the watch alone: its answers for one kind come in
	// index order, while this read may be older than the watch's last answer, and
	// recording it would put back a verdict Consul had already replaced (a route stuck
	// at Pending, a Gateway stuck at InvalidCertificates).
	switch {
	case !want && actual == nil:
		s.verdicts.settled(key, s.statusChanged)
		return nil
	case !want:
		return s.removeUndesired(ctx, logger, key, actual)
	case actual == nil:
		return s.put(ctx, logger, "Created", key, desired, 0)
	case !s.cfg.Ownership.Owns(actual.GetMeta()):
		s.verdicts.foreign(key, desired, s.statusChanged)
		logger.V(4).Info("Entry exists and is not ours; leaving it alone")
		return nil
	case sameEntry(desired, actual):
		return s.keepSettled(ctx, logger, key, desired, actual)
	default:
		return s.put(ctx, logger, "Updated", key, desired, actual.GetModifyIndex())
	}
}

// removeUndesired deletes an entry nothing desires any more, when it is ours and
// nothing holds it back.
func (s *Syncer) removeUndesired(ctx context.Context, logger klog.Logger, key translate.EntryKey, actual consulapi.ConfigEntry) error {
	if !s.cfg.Ownership.Owns(actual.GetMeta()) {
		s.verdicts.settled(key, s.statusChanged)
		return nil // not ours: never deleted
	}
	if s.unconfirmedOwner(actual.GetMeta()) {
		logger.V(4).Info("Keeping the entry of an object not confirmed yet")
		return nil
	}
	if wait := s.serviceDefaultsGrace(key, actual.GetMeta()); wait > 0 {
		logger.V(4).Info("Keeping the service-defaults of an existing Service a while after their last route", "for", wait)
		s.queue.AddAfter(key, wait)
		return nil
	}
	// Consul refuses the delete, or the referrer breaks, while an entry of ours
	// still refers to this one (see dependencies.go); the key is queued again
	// when the last referrer goes. A referrer that is not ours is not known here:
	// Consul's refusal then requeues the key with backoff until its owner changes it.
	if err := s.stillReferred(key); err != nil {
		return err
	}
	err := s.write(ctx, logger, "Deleted", key, actual.GetMeta(), func(w *consulapi.WriteOptions) (bool, error) {
		ok, _, err := s.cfg.Client.ConfigEntries().DeleteCAS(key.Kind, key.Name, actual.GetModifyIndex(), w)
		return ok, err
	})
	if err != nil {
		return err
	}
	metrics.GCDeletions.WithLabelValues(key.Kind).Inc()
	s.queueAll(s.refs.deleted(key))
	s.verdicts.absent(key, actual.GetMeta(), s.statusChanged)
	s.matched.forget(key)
	s.view.deleted(key)
	s.held.forget(key)
	s.judging.forget(key)
	s.forgetUndesired(key)
	return nil
}

// keepSettled records an entry Consul holds as desired, then runs the Consul 1.15
// workarounds it may still need (a chain refresh, a rejudge) or waits for its verdict.
func (s *Syncer) keepSettled(ctx context.Context, logger klog.Logger, key translate.EntryKey, desired, actual consulapi.ConfigEntry) error {
	s.verdicts.settled(key, s.statusChanged)
	s.held.record(key, desired)
	if s.chains.take(key) {
		return s.refreshChain(ctx, logger, key, desired, actual)
	}
	rejudge, wait := s.judging.check(key, actual, s.clock.Now())
	if rejudge {
		return s.rejudge(ctx, logger, key, desired, actual)
	}
	if wait > 0 {
		s.queue.AddAfter(key, wait)
	}
	return nil
}

// writeWithoutReading settles key from what the drift watch last saw, without the read
// before each write: nothing to do when Consul held this very desired entry and judged
// it; a create when the entry was absent; an update of an entry of ours whose index
// the watch knows. It reports done = false when none applies or the check-and-set met
// an entry that changed since; the caller then reads and decides.
func (s *Syncer) writeWithoutReading(ctx context.Context, logger klog.Logger, key translate.EntryKey, desired consulapi.ConfigEntry, want bool) (bool, error) {
	if !want || s.chains.waiting(key) {
		return false, nil
	}
	var err error
	switch index, replaceable := s.matched.replaceable(key, desired); {
	case s.matched.holds(key, desired) && !s.judging.awaiting(key):
		s.verdicts.settled(key, s.statusChanged)
		return true, nil
	case s.view.absent(key):
		err = s.put(ctx, logger, "Created", key, desired, 0)
	case replaceable:
		err = s.put(ctx, logger, "Updated", key, desired, index)
	default:
		return false, nil
	}
	if errors.Is(err, errCASMismatch) {
		logger.V(4).Info("The entry changed since the watch saw it; reading it")
		return false, nil
	}
	return true, err
}

// put creates (index 0) or updates the entry under key with check-and-set, and counts
// it as a drift correction when Consul had held exactly this content before.
func (s *Syncer) put(ctx context.Context, logger klog.Logger, verb string, key translate.EntryKey, desired consulapi.ConfigEntry, index uint64) error {
	if err := s.dependenciesWritten(ctx, key, desired); err != nil {
		return err
	}
	drift := s.held.held(key, desired)
	err := s.write(ctx, logger, verb, key, desired.GetMeta(), func(w *consulapi.WriteOptions) (bool, error) {
		ok, _, err := s.cfg.Client.ConfigEntries().CAS(Compact(desired), index, w)
		return ok, err
	})
	var refused consulapi.StatusError
	if errors.As(err, &refused) && len(s.leavingReferrers(key)) > 0 {
		// Consul refuses dropping a subset that a redirect of ours still names
		// until the redirect goes; its delete queues this key again (queueAll).
		return workqueue.Expected(err)
	}
	if err != nil {
		return err
	}
	s.queueAll(s.refs.wrote(key, s.orderedReferences(desired)))
	if index == 0 {
		// A new entry: the verdict of any earlier one is not its verdict. Only once
		// created: a create the check-and-set refused (the watch's view was behind)
		// leaves the entry Consul holds, and its verdict, as they were.
		s.verdicts.absent(key, desired.GetMeta(), s.statusChanged)
	}
	s.held.record(key, desired)
	s.view.wrote(key)
	if judgedKinds[key.Kind] {
		s.judging.written(key, s.clock.Now())
		s.queue.AddAfter(key, judgeTimeout)
	}
	if drift {
		metrics.DriftCorrections.WithLabelValues(key.Kind).Inc()
		logger.V(2).Info("Put back a Consul config entry that was changed or removed outside the controller")
	}
	return nil
}

// readEntry returns the entry under key, or nil when there is none.
func (s *Syncer) readEntry(ctx context.Context, key translate.EntryKey) (consulapi.ConfigEntry, error) {
	q := (&consulapi.QueryOptions{Namespace: key.Namespace, Partition: key.Partition}).WithContext(ctx)
	start := time.Now()
	entry, _, err := s.cfg.Client.ConfigEntries().Get(key.Kind, key.Name, q)
	metrics.ConsulRequestDuration.WithLabelValues("read").Observe(time.Since(start).Seconds())
	var status consulapi.StatusError
	if errors.As(err, &status) && status.Code == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s from Consul: %w", key.Kind, key.Name, err)
	}
	return entry, nil
}

// write runs one check-and-set operation and logs the change.
func (s *Syncer) write(ctx context.Context, logger klog.Logger, verb string, key translate.EntryKey, meta map[string]string, op func(*consulapi.WriteOptions) (bool, error)) error {
	w := (&consulapi.WriteOptions{Namespace: key.Namespace, Partition: key.Partition}).WithContext(ctx)
	start := time.Now()
	ok, err := op(w)
	metrics.ConsulRequestDuration.WithLabelValues(operations[verb]).Observe(time.Since(start).Seconds())
	metrics.ConsulWrites.WithLabelValues(key.Kind, operations[verb], consulWriteResult(ok, err)).Inc()
	if err != nil {
		s.verdicts.writeFailed(key, meta, err, s.statusChanged)
		return fmt.Errorf("%s %s %s in Consul: %w", verb, key.Kind, key.Name, err)
	}
	if !ok {
		logger.V(4).Info("Check-and-set lost a race; reading again")
		return workqueue.Expected(errCASMismatch)
	}
	s.verdicts.written(key, meta, s.statusChanged)
	logger.V(2).Info(verb + " Consul config entry")
	return nil
}

// operations names the write verbs in metrics.
var operations = map[string]string{"Created": "create", "Updated": "update", "Deleted": "delete"}

func consulWriteResult(ok bool, err error) string {
	switch {
	case err != nil:
		return metrics.ResultError
	case !ok:
		return metrics.ResultConflict
	default:
		return metrics.ResultOK
	}
}

// sameEntry reports whether Consul's entry already says what desired says. Both are
// compared in the encoding the syncer writes, without the fields Consul manages
// (indexes, status) and the defaults it fills in when it stores an entry.
func sameEntry(desired, actual consulapi.ConfigEntry) bool {
	want, err := comparableForm(desired)
	if err != nil {
		return false
	}
	got, err := comparableForm(actual)
	if err != nil {
		return false
	}
	return reflect.DeepEqual(want, got)
}

// serverManaged are top-level fields Consul sets on every entry it stores.
var serverManaged = []string{"CreateIndex", "ModifyIndex", "Status", "Hash"}

// comparableForm is an entry as a generic map, in the encoding the syncer writes,
// without what Consul manages or fills in.
func comparableForm(entry consulapi.ConfigEntry) (map[string]any, error) {
	raw, err := json.Marshal(Compact(entry))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for _, k := range serverManaged {
		delete(m, k)
	}
	if meta, ok := m["Meta"].(map[string]any); ok {
		delete(meta, metaRejudge)
		delete(meta, metaChainRefresh)
	}
	// Consul answers with empty objects for optional blocks nobody set (a
	// service-defaults' TransparentProxy {}), which Compact keeps when written as
	// non-nil pointers; both sides lose every zero value before comparing.
	pruneZero(m)
	// Consul CE reports the default namespace and partition by name on read.
	for _, k := range []string{"Namespace", "Partition"} {
		if m[k] == "default" {
			delete(m, k)
		}
	}
	return m, nil
}

// pruneZero removes, recursively, map keys whose values are null, false, 0, "", or
// become empty objects or arrays.
func pruneZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		for k, child := range x {
			if pruneZero(child) {
				delete(x, k)
			}
		}
		return len(x) == 0
	case []any:
		for _, child := range x {
			pruneZero(child)
		}
		return len(x) == 0
	case bool:
		return !x
	case float64:
		return x == 0
	case string:
		return x == ""
	default:
		return false
	}
}
