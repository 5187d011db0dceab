package testenv

import (
	"strconv"
	"strings"
)

// MetricSum adds up the samples of the metric name in a Prometheus text exposition
// (a /metrics answer) that carry every one of labels, each given as `key="value"`.
func MetricSum(text, name string, labels ...string) float64 {
	var sum float64
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		matches := true
		for _, l := range labels {
			matches = matches && strings.Contains(line, l)
		}
		if !matches {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
