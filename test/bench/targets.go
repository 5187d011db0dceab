package main

import (
	"fmt"
	"strings"
)

// The performance issue's targets. They are reported next to this run's figures,
// never asserted: a machine busier than this one would move them.
const (
	targetFloorRatio     = 1.3  // time to converge against max(floor (a), floor (c)); edit p99 against its floor's
	targetWritesPerEntry = 1.02 // Consul writes of a cold start per desired entry
	targetCPURatio       = 3.0  // controller CPU of a cold start against the floors' CPU
	targetRSS            = 150  // MiB, at the largest QPS 20/30 size
	targetRSSSecrets     = 300  // MiB, at the largest QPS 1000/1000 size with the unrelated Secrets
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
		}{
			{fmt.Sprintf("QPS %d/%d", defaultQPS, defaultBurst), r.cold[n]},
			{fmt.Sprintf("QPS %d/%d with --manage-service-defaults", defaultQPS, defaultBurst), r.coldSD[n]},
			{fmt.Sprintf("QPS %d/%d", fastQPS, fastBurst), r.fast[n]},
		} {
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
				c, server := h.h.counters, h.h.server
				out = append(out, target{
					what:   fmt.Sprintf("%d routes, %s: 0 status writes (the API server's count), 0 Consul writes (the controller's count; 0 entries written by Consul's indexes), 0 conditions away from their final value", n, h.name),
					figure: fmt.Sprintf("%.0f, %.0f (%d), %d", server.statusWrites(), c.consulWrites, server.entriesWritten, h.h.flaps.objects),
					met:    server.statusWrites() == 0 && c.consulWrites == 0 && server.entriesWritten == 0 && h.h.flaps.objects == 0,
				})
			}
		}
	}
	out = append(out, r.editTargets()...)
	out = append(out, r.memoryTargets()...)
	return append(out, r.peerTargets()...)
}

// editTargets compare the edits' p99 with their floors' at the largest size edited.
func (r *results) editTargets() []target {
	sizes := sortedKeys(r.edit)
	if len(sizes) == 0 {
		return nil
	}
	n := sizes[len(sizes)-1]
	e := r.edit[n]
	if e.floor == nil || len(e.toConsul) == 0 {
		return nil
	}
	ratio := percentile(e.toConsul, 99) / percentile(e.floor.toConsul, 99)
	return []target{{
		what: fmt.Sprintf("%d routes: edit → Consul p99 ≤ %.1f× the direct floor's p99 (status write + CAS, %s)",
			n, targetFloorRatio, millis(percentile(e.floor.toConsul, 99))),
		figure: fmt.Sprintf("%s, %.2f×", millis(percentile(e.toConsul, 99)), ratio), met: ratio <= targetFloorRatio,
	}}
}

// memoryTargets are peak RSS at the largest QPS 20/30 size (the higher of its two
// cold starts) and with the Secrets.
func (r *results) memoryTargets() []target {
	var out []target
	if sizes := sortedKeys(r.cold); len(sizes) > 0 {
		n := sizes[len(sizes)-1]
		peak := r.cold[n].peakRSS
		if f := r.fast[n]; f != nil {
			peak = max(peak, f.peakRSS)
		}
		out = append(out, target{
			what:   fmt.Sprintf("%d routes: peak RSS ≤ %d MiB (the higher of its cold starts)", n, targetRSS),
			figure: mib(peak), met: mebibytes(peak) <= targetRSS,
		})
	}
	if s := r.secrets; s != nil {
		out = append(out, target{
			what:   fmt.Sprintf("%d routes + %d unrelated Secrets: peak RSS ≤ %d MiB", s.size.routes, s.size.secrets, targetRSSSecrets),
			figure: mib(s.peakRSS), met: mebibytes(s.peakRSS) <= targetRSSSecrets,
		})
	}
	return out
}

func coldTargets(n int, qps string, c *coldRun) []target {
	l := c.size
	limit := 2*l.routes + 2*l.gateways
	entries := l.entries()
	out := []target{{
		what:   fmt.Sprintf("%d routes, cold start at %s: status writes (the API server's count) ≤ 2×routes + 2×Gateways = %d", n, qps, limit),
		figure: fmt.Sprintf("%.0f", c.server.objectStatusWrites()),
		met:    c.server.objectStatusWrites() <= float64(limit),
	}, {
		// Consul counts no writes a client makes; the controller's count is taken
		// only where Consul's indexes bound it (disagreement).
		what:   fmt.Sprintf("%d routes, cold start at %s: Consul writes ≤ %.2f per entry (%d entries), within what Consul's indexes show", n, qps, targetWritesPerEntry, entries),
		figure: fmt.Sprintf("%.0f, %.2f", c.counters.consulWrites, c.counters.consulWrites/float64(entries)),
		met:    c.counters.consulWrites <= targetWritesPerEntry*float64(entries) && disagreement(c.counters, c.server) == "",
	}}
	f := c.floors
	if f == nil || f.status.elapsed <= 0 || f.judged.elapsed <= 0 {
		return out
	}
	floor := max(f.status.elapsed, f.judged.elapsed)
	r := c.converge.Seconds() / floor.Seconds()
	which := "(a)"
	if f.judged.elapsed > f.status.elapsed {
		which = "(c)"
	}
	out = append(out, target{
		what:   fmt.Sprintf("%d routes, cold start at %s: time to converge ≤ %.1f× max(floor (a), floor (c)) = %s %s", n, qps, targetFloorRatio, which, seconds(floor)),
		figure: fmt.Sprintf("%s, %.2f×", seconds(c.converge), r), met: r <= targetFloorRatio,
	})
	if cpu := f.cpu(); cpu > 0 {
		cr := c.counters.cpu / cpu
		out = append(out, target{
			what:   fmt.Sprintf("%d routes, cold start at %s: controller CPU ≤ %.0f× the floors' CPU (%.1f s)", n, qps, targetCPURatio, cpu),
			figure: fmt.Sprintf("%.1f s, %.1f×", c.counters.cpu, cr), met: cr <= targetCPURatio,
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
