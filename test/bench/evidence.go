package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// What the servers counted of a run, apart from the controller's own metrics: a
// controller that stopped counting a write would otherwise report fewer writes than
// it made, and the figures and targets would rest on its word. The peer's figures
// come from the API server alone (apiCounts); ours now do too, with the controller's
// own counts beside them, and Consul's indexes as well.

// serverCounts are the servers' account of one stretch of a run.
type serverCounts struct {
	// api is what the API server served between the two reads: every client counts,
	// but in the bench only the controller writes status.
	api apiCounts
	// entriesWritten are the config entries of ours whose ModifyIndex passed
	// Consul's index at the start: each was written at least once.
	entriesWritten int
	// raftApplied is how many entries Consul's Raft log applied between the two
	// reads: every write, ours and Consul's own (the status it writes on entries it
	// judges, the catalog), so an upper bound of ours.
	raftApplied uint64
}

// consulMark is Consul's side of the start of a stretch.
type consulMark struct {
	applied uint64
}

// markConsul reads where Consul's Raft log stands.
func (s *stack) markConsul(ctx context.Context) (consulMark, error) {
	applied, err := raftApplied(ctx, s.consul)
	return consulMark{applied: applied}, err
}

// raftApplied is the index of the last Raft log entry the agent applied.
func raftApplied(ctx context.Context, client *consulapi.Client) (uint64, error) {
	self, err := client.Agent().Self()
	if err != nil {
		return 0, fmt.Errorf("read Consul's agent/self: %w", err)
	}
	raft, ok := self["Stats"]["raft"].(map[string]any)
	if !ok {
		return 0, errors.New("no raft stats in the Consul agent's agent/self")
	}
	text, _ := raft["applied_index"].(string)
	applied, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the Consul agent's raft applied_index %q: %w", text, err)
	}
	return applied, ctx.Err()
}

// serverCountsSince is what the servers counted since before and mark.
func (s *stack) serverCountsSince(ctx context.Context, before apiCounts, mark consulMark) (serverCounts, error) {
	after, err := s.apiserverCounts(ctx)
	if err != nil {
		return serverCounts{}, err
	}
	applied, err := raftApplied(ctx, s.consul)
	if err != nil {
		return serverCounts{}, err
	}
	versions, err := testenv.ConsulEntryVersions(ctx, s.consul, testenv.OwnedBy(string(controllerName), clusterID))
	if err != nil {
		return serverCounts{}, err
	}
	written := 0
	for _, v := range versions {
		if index, err := strconv.ParseUint(v, 10, 64); err == nil && index > mark.applied {
			written++
		}
	}
	return serverCounts{api: after.minus(before), entriesWritten: written, raftApplied: applied - mark.applied}, nil
}

// objectStatusWrites are the status writes the API server served to Gateways and
// HTTPRoutes.
func (c serverCounts) objectStatusWrites() float64 {
	return c.api.statusWrites["gateways"] + c.api.statusWrites["httproutes"]
}

// statusWrites are all status writes the API server served.
func (c serverCounts) statusWrites() float64 { return c.api.statusWriteTotal() }

func (c serverCounts) statusText() string {
	return fmt.Sprintf("%.0f (%s)", c.statusWrites(), breakdown(c.api.statusWrites))
}

func (c serverCounts) consulText() string {
	return fmt.Sprintf("%d entries written; %d Raft entries applied (writes by anyone, Consul's own status writes included)", c.entriesWritten, c.raftApplied)
}

// disagreement says where the controller's own counts and the servers' part: status
// writes it counted against those the API server served, Consul writes it counted
// against the entries Consul holds as written. "" when they agree.
func disagreement(own counters, server serverCounts) string {
	var out []string
	if own.statusWrites != server.statusWrites() {
		out = append(out, fmt.Sprintf("the controller counted %.0f status writes, the API server served %.0f", own.statusWrites, server.statusWrites()))
	}
	// entriesWritten counts the controller's service-intentions too.
	if own.consulWrites+own.intentionWrites < float64(server.entriesWritten) {
		out = append(out, fmt.Sprintf("the controller counted %.0f Consul writes, Consul holds %d entries of ours written since the start", own.consulWrites+own.intentionWrites, server.entriesWritten))
	}
	if own.consulWrites+own.intentionWrites > float64(server.raftApplied) {
		out = append(out, fmt.Sprintf("the controller counted %.0f Consul writes, Consul's Raft log applied %d entries", own.consulWrites+own.intentionWrites, server.raftApplied))
	}
	return strings.Join(out, "; ")
}
