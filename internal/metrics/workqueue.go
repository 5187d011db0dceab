package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// The client-go workqueue series, labelled by queue name, with the names
// kube-controller-manager uses.
var (
	queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "depth", Help: "Current depth of the workqueue.",
	}, []string{"name"})
	queueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "adds_total", Help: "Adds handled by the workqueue.",
	}, []string{"name"})
	queueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "queue_duration_seconds", Help: "How long an item stays in the workqueue before being requested.",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
	}, []string{"name"})
	queueWorkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "work_duration_seconds", Help: "How long processing an item from the workqueue takes (the sync latency).",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
	}, []string{"name"})
	queueUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by work_duration.",
	}, []string{"name"})
	queueLongest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "longest_running_processor_seconds", Help: "How long the longest running processor has been running.",
	}, []string{"name"})
	queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "retries_total", Help: "Retries handled by the workqueue.",
	}, []string{"name"})

	queueCollectors = []prometheus.Collector{queueDepth, queueAdds, queueLatency, queueWorkDuration, queueUnfinished, queueLongest, queueRetries}
)

// queueMetrics is the workqueue.MetricsProvider backed by the series above.
type queueMetrics struct{}

func (queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return queueDepth.WithLabelValues(name)
}

func (queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return queueAdds.WithLabelValues(name)
}

func (queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return queueLatency.WithLabelValues(name)
}

func (queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return queueWorkDuration.WithLabelValues(name)
}

func (queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueUnfinished.WithLabelValues(name)
}

func (queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueLongest.WithLabelValues(name)
}

func (queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return queueRetries.WithLabelValues(name)
}
