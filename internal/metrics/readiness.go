package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/klog/v2"
)

// NotReadyError is why the process is not ready. /readyz answers only Reason, a short
// fixed text; Err, the detail (Consul's error names addresses, server names and
// certificates), goes to the log and never to the network.
type NotReadyError struct {
	Reason string
	Err    error
}

// NotReady is a NotReadyError; err may be nil when the reason says it all.
func NotReady(reason string, err error) error { return &NotReadyError{Reason: reason, Err: err} }

func (e *NotReadyError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *NotReadyError) Unwrap() error { return e.Err }

// notReadyAnswer is what /readyz answers for err: "not ready: " and a NotReadyError's
// reason, and no more for any other error, whose text is not known to be fit for the
// network.
func notReadyAnswer(err error) string {
	if notReady, ok := errors.AsType[*NotReadyError](err); ok && notReady.Reason != "" {
		return "not ready: " + notReady.Reason
	}
	return "not ready"
}

// ReadinessHandler is /readyz: 200 "ok" while ready returns nil, else 503 "not ready:
// <reason>". The kubelet probes every few seconds, so the detail is logged at level 0
// only when the answer changes (and when the process becomes ready again), and on
// every probe at -v=4.
func ReadinessHandler(ready func() error) http.Handler {
	var (
		mu   sync.Mutex
		last = "ok" // the answer last given; the start counts as ready
	)
	changed := func(answer string) bool {
		mu.Lock()
		defer mu.Unlock()
		if answer == last {
			return false
		}
		last = answer
		return true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context())
		err := ready()
		if err == nil {
			if changed("ok") {
				logger.Info("Ready")
			}
			logger.V(4).Info("Readiness probe answered", "ready", true)
			fmt.Fprintln(w, "ok")
			return
		}
		answer := notReadyAnswer(err)
		if changed(answer) {
			logger.Info("Not ready", "answer", answer, "err", err)
		}
		logger.V(4).Info("Readiness probe answered", "ready", false, "answer", answer, "err", err)
		http.Error(w, answer, http.StatusServiceUnavailable)
	})
}
