package consul

import (
	"errors"
	"fmt"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// record takes what performing act did (res) into the ledger and into the verdicts,
// queues what it leads to, and returns the error of a key to try again.
func (s *Syncer) record(logger klog.Logger, st entryState, act action, res result) error {
	rec := s.ledger.record(st, act, res, s.clock.Now())
	s.verdicts.record(st, act, res, s.statusChanged)
	s.queueAll(res.queue)
	s.queueAll(rec.released)
	if err := s.retryError(st, act, res); err != nil {
		return err
	}
	switch act.op {
	case opCreate, opUpdate:
		if rec.drift {
			metrics.DriftCorrections.WithLabelValues(st.key.Kind).Inc()
			logger.V(2).Info("Put back a Consul config entry that was changed or removed outside the controller")
		}
		if judgedKinds[st.key.Kind] {
			s.queue.AddAfter(st.key, judgeTimeout)
		}
	case opDelete:
		metrics.GCDeletions.WithLabelValues(st.key.Kind).Inc()
	case opRewrite:
		if act.counter == metaChainRefresh {
			logger.V(2).Info("A backend is bound again to a gateway it had left; wrote its service-defaults again so that Consul serves it")
			break
		}
		logger.V(2).Info("Consul passed over the entry; wrote it again so it judges it", "attempt", rec.attempt)
		s.queue.AddAfter(st.key, judgeTimeout)
	case opForeign:
		logger.V(4).Info("Entry exists and is not ours; leaving it alone")
	case opKeep:
		logger.V(4).Info(act.why, "for", act.after)
	}
	if act.after > 0 {
		s.queue.AddAfter(st.key, act.after)
	}
	return nil
}

// retryError is the error of a key to sync again, nil when the sync is done.
//
// An entry held back by one it depends on, or an undesired entry that entries of ours
// still refer to, is expected to wait. So is a write Consul refused while an entry
// that is to stop referring to this one still does: Consul refuses dropping a subset
// that a redirect of ours still names until the redirect goes, and the redirect's
// delete queues this key again.
func (s *Syncer) retryError(st entryState, act action, res result) error {
	var refused consulapi.StatusError
	switch {
	case res.blocked != "":
		return workqueue.Expected(errors.New(blockedMessage(st.key, res.blocked)))
	case res.err == nil && act.op == opAwaitReferrers:
		return referredError(st.key, st.referrers)
	case res.err == nil:
		return nil
	case (act.op == opCreate || act.op == opUpdate) && errors.As(res.failure, &refused) && len(s.leavingReferrers(st.key)) > 0:
		return workqueue.Expected(res.err)
	default:
		return res.err
	}
}

// blockedMessage says that the entry under key waits for what reason names.
func blockedMessage(key translate.EntryKey, reason string) string {
	return fmt.Sprintf("%s %s waits for %s", key.Kind, key.Name, reason)
}

// queueAll queues keys: entries whose delete (or change) waited for a referrer that
// went, and dependencies to write first.
func (s *Syncer) queueAll(keys []translate.EntryKey) {
	for _, k := range keys {
		s.queue.Add(k)
	}
}
