package consul

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
// nothing desires it, in four steps: gather the entry's state, decide, perform what was
// decided against Consul, and record the result. Where the ledger does not know
// enough, or a write made without a read met an entry that changed, it reads the entry
// and decides again. Every create, update and delete is a check-and-set on the
// ModifyIndex last seen (0 for a create). Entries that do not carry our ownership meta
// are never changed or deleted.
func (s *Syncer) syncEntry(ctx context.Context, key translate.EntryKey) error {
	logger := klog.FromContext(ctx).WithValues("kind", key.Kind, "entry", key.Name)
	st := s.entryState(key)
	if act := decide(st, s.clock.Now()); act.op != opRead {
		res := s.perform(ctx, logger, st, act)
		if !errors.Is(res.err, errCASMismatch) {
			return s.record(logger, st, act, res)
		}
		logger.V(4).Info("The entry changed since the watch saw it; reading it")
	}
	actual, err := s.readEntry(ctx, key)
	if err != nil {
		return s.record(logger, st, action{op: opRead}, result{err: err, failure: err})
	}
	// Consul's verdicts are taken from the watch alone: its answers for one kind come in
	// index order, while this read may be older than the watch's last answer, and
	// recording it would put back a verdict Consul had already replaced (a route stuck
	// at Pending, a Gateway stuck at InvalidCertificates).
	st = s.withActual(st, actual)
	act := decide(st, s.clock.Now())
	return s.record(logger, st, act, s.perform(ctx, logger, st, act))
}

// result is what performing an action did in Consul.
type result struct {
	// err is why the action did not happen: a failed request, a lost check-and-set,
	// or an entry it depends on that is not written yet.
	err error
	// failure is Consul's answer, or the failed request, to record on the entry and
	// its owner; nil when there is nothing to record.
	failure error
	// blocked is what an entry it depends on, that cannot be written, holds the entry
	// back by.
	blocked string
	// queue are entries to sync: dependencies to write first.
	queue []translate.EntryKey
}

// perform carries out what decide said, in Consul; nothing else is changed here.
func (s *Syncer) perform(ctx context.Context, logger klog.Logger, st entryState, act action) result {
	switch act.op {
	case opCreate, opUpdate:
		if res := s.dependenciesWritten(ctx, st.key, st.desired); res.err != nil || res.blocked != "" {
			return res
		}
		return s.put(ctx, logger, verbs[act.op], st.key, st.desired, act.index)
	case opRewrite:
		n, _ := strconv.Atoi(st.actual.GetMeta()[act.counter])
		return s.put(ctx, logger, verbs[act.op], st.key, withMeta(st.desired, act.counter, strconv.Itoa(n+1)), act.index)
	case opDelete:
		return s.write(ctx, logger, verbs[act.op], st.key, func(w *consulapi.WriteOptions) (bool, error) {
			ok, _, err := s.cfg.Client.ConfigEntries().DeleteCAS(st.key.Kind, st.key.Name, act.index, w)
			return ok, err
		})
	default:
		return result{}
	}
}

// verbs name the writes in logs.
var verbs = map[op]string{opCreate: "Created", opUpdate: "Updated", opRewrite: "Updated", opDelete: "Deleted"}

// put writes entry under key with check-and-set on index (0: create).
func (s *Syncer) put(ctx context.Context, logger klog.Logger, verb string, key translate.EntryKey, entry consulapi.ConfigEntry, index uint64) result {
	return s.write(ctx, logger, verb, key, func(w *consulapi.WriteOptions) (bool, error) {
		ok, _, err := s.cfg.Client.ConfigEntries().CAS(Compact(entry), index, w)
		return ok, err
	})
}

// write runs one check-and-set operation, counts it and logs the change.
func (s *Syncer) write(ctx context.Context, logger klog.Logger, verb string, key translate.EntryKey, op func(*consulapi.WriteOptions) (bool, error)) result {
	w := (&consulapi.WriteOptions{Namespace: key.Namespace, Partition: key.Partition}).WithContext(ctx)
	start := time.Now()
	ok, err := op(w)
	metrics.ConsulRequestDuration.WithLabelValues(operations[verb]).Observe(time.Since(start).Seconds())
	metrics.ConsulWrites.WithLabelValues(key.Kind, operations[verb], consulWriteResult(ok, err)).Inc()
	if err != nil {
		return result{err: fmt.Errorf("%s %s %s in Consul: %w", verb, key.Kind, key.Name, err), failure: err}
	}
	if !ok {
		logger.V(4).Info("Check-and-set lost a race; reading again")
		return result{err: workqueue.Expected(errCASMismatch)}
	}
	logger.V(2).Info(verb + " Consul config entry")
	return result{}
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
