package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// row is one line of the table: a figure of the controller next to its baseline from
// the same run.
type row struct {
	size     int
	scenario string
	figure   string
	value    string
	baseline string
	ratio    string
}

// renderTable renders rows as one markdown table.
func renderTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| routes | scenario | figure | controller | baseline | controller / baseline |\n")
	b.WriteString("| ---: | --- | --- | ---: | --- | ---: |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n",
			r.size, cell(r.scenario), cell(r.figure), cell(r.value), cell(r.baseline), cell(r.ratio))
	}
	return b.String()
}

// cell keeps a value from breaking the table: a pipe would start a new column.
func cell(s string) string {
	if s == "" {
		return "–"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

// ratio formats a/b, or "–" when there is no baseline to divide by.
func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return ""
	}
	return fmt.Sprintf("%.2f", a/b)
}

// seconds formats a duration in seconds with a precision that suits its size.
func seconds(d time.Duration) string {
	s := d.Seconds()
	switch {
	case s >= 100:
		return fmt.Sprintf("%.0f s", s)
	case s >= 10:
		return fmt.Sprintf("%.1f s", s)
	default:
		return fmt.Sprintf("%.2f s", s)
	}
}

// millis formats seconds as milliseconds.
func millis(s float64) string {
	if s >= 0.1 {
		return fmt.Sprintf("%.0f ms", s*1000)
	}
	return fmt.Sprintf("%.1f ms", s*1000)
}

// mib formats bytes as MiB.
func mib(bytes int64) string { return fmt.Sprintf("%.0f MiB", float64(bytes)/(1<<20)) }

// percentile is the nearest-rank percentile p (0-100] of values; 0 without values.
func percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// latencySummary is "p50 / p99 / max" of values in seconds, as milliseconds.
func latencySummary(values []float64) string {
	return fmt.Sprintf("%s / %s / %s", millis(percentile(values, 50)), millis(percentile(values, 99)), millis(percentile(values, 100)))
}
