package main

import (
	"fmt"
	"strings"
)

// The scale issue's targets. They are reported next to this run's figures, never
// asserted: a machine busier than this one would move them.
const (
	targetFloorRatio = 1.3
	targetEditP99    = 0.050 // seconds, with the largest number of routes present
	targetRSS        = 150   // MiB, at the largest number of routes
)

// target is one target and this run's figure for it.
type target struct {
	what, figure string
	met          bool
}

// targets lists every target the scenarios that ran can speak to.
func (r *results) targets() []target {
	var out []target
	for _, n := range r.sizes {
		for _, run := range []struct {
			name string
			c    *coldRun
		}{{fmt.Sprintf("QPS %d/%d", defaultQPS, defaultBurst), r.cold[n]}, {fmt.Sprintf("QPS %d/%d", fastQPS, fastBurst), r.fast[n]}} {
			if run.c == nil {
				continue
			}
			out = append(out, coldTargets(n, run.name, run.c)...)
		}
		for _, h := range []struct {
			name string
			h    *handover
		}{{"restart", r.restart[n]}, {"failover", r.failover[n]}} {
			if h.h != nil {
				c := h.h.counters
				out = append(out, target{
					what:   fmt.Sprintf("%d routes, %s: 0 status writes, 0 Consul writes, 0 conditions away from their final value", n, h.name),
					figure: fmt.Sprintf("%.0f, %.0f, %d", c.statusWrites, c.consulWrites, h.h.flaps.objects),
					met:    c.statusWrites == 0 && c.consulWrites == 0 && h.h.flaps.objects == 0,
				})
			}
		}
	}
	largest := r.sizes[len(r.sizes)-1]
	if e := r.edit[largest]; e != nil && len(e.toConsul) > 0 {
		p99 := percentile(e.toConsul, 99)
		out = append(out, target{
			what:   fmt.Sprintf("%d routes: edit → Consul p99 ≤ %.0f ms", largest, targetEditP99*1000),
			figure: millis(p99), met: p99 <= targetEditP99,
		})
	}
	if c := r.cold[largest]; c != nil {
		rss := mebibytes(c.peakRSS)
		out = append(out, target{
			what:   fmt.Sprintf("%d routes: peak RSS ≤ %d MiB", largest, targetRSS),
			figure: mib(c.peakRSS), met: rss <= targetRSS,
		})
	}
	return out
}

func coldTargets(n int, qps string, c *coldRun) []target {
	l := c.size
	limit := 2*l.routes + 2*l.gateways
	out := []target{{
		what:   fmt.Sprintf("%d routes, cold start at %s: status writes ≤ 2×routes + 2×Gateways = %d", n, qps, limit),
		figure: fmt.Sprintf("%.0f", c.counters.objectStatusWrites()),
		met:    c.counters.objectStatusWrites() <= float64(limit),
	}}
	if f := c.floors; f != nil && f.status.elapsed > 0 {
		r := c.converge.Seconds() / f.status.elapsed.Seconds()
		out = append(out, target{
			what:   fmt.Sprintf("%d routes, cold start at %s: time to converge ≤ %.1f× the status floor (a)", n, qps, targetFloorRatio),
			figure: fmt.Sprintf("%.2f×", r), met: r <= targetFloorRatio,
		})
	}
	if f := c.floors; f != nil && f.consul.elapsed > 0 {
		r := c.converge.Seconds() / f.consul.elapsed.Seconds()
		out = append(out, target{
			what:   fmt.Sprintf("%d routes, cold start at %s: time to converge ≤ %.1f× the Consul floor (b)", n, qps, targetFloorRatio),
			figure: fmt.Sprintf("%.2f×", r), met: r <= targetFloorRatio,
		})
	}
	return out
}

// renderTargets renders targets as a markdown table.
func renderTargets(targets []target) string {
	var b strings.Builder
	b.WriteString("| target | this run | met |\n| --- | ---: | --- |\n")
	for _, t := range targets {
		met := "no"
		if t.met {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(t.what), cell(t.figure), met)
	}
	return b.String()
}
