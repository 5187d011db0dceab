package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ObjectCondition is one series of the objects gauge: how many objects of a kind hold
// a condition with that status and reason.
type ObjectCondition struct {
	Kind, Condition, Status, Reason string
}

// ObjectConditions counts, at each scrape, the objects by condition as their status
// holds them; the status controller sets it while it runs (sync.Controller.Run).
type ObjectConditions func() map[ObjectCondition]int

// objectConditionsSource is the counting function of the running status controller,
// nil when none runs: a standby replica then serves no objects series, so a sum over
// replicas counts each object once.
var objectConditionsSource atomic.Pointer[ObjectConditions]

// SetObjectConditions makes count the source of the objects gauge; nil removes it.
func SetObjectConditions(count ObjectConditions) {
	if count == nil {
		objectConditionsSource.Store(nil)
		return
	}
	objectConditionsSource.Store(&count)
}

// objectConditionsCollector computes the objects gauge at scrape time from the
// status controller's caches: nothing is kept between scrapes, and the syncs pay
// nothing for it.
type objectConditionsCollector struct{ desc *prometheus.Desc }

var objectConditions = objectConditionsCollector{desc: prometheus.NewDesc(
	prometheus.BuildFQName(namespace, "", "objects"),
	"Objects of this controller's classes by condition, as their status holds it: GatewayClasses, Gateways and ListenerSets once each, routes once per parent Gateway of ours. Served by the leader only.",
	[]string{"kind", "condition", "status", "reason"}, nil,
)}

func (c objectConditionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c objectConditionsCollector) Collect(ch chan<- prometheus.Metric) {
	count := objectConditionsSource.Load()
	if count == nil {
		return
	}
	for k, n := range (*count)() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k.Kind, k.Condition, k.Status, k.Reason)
	}
}
