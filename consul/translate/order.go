package translate

import (
	"slices"

	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Consul 1.15 gives every match of an http-route entry its rule's filters and
// services (Consul 1.15.4 agent/consul/discoverychain/gateway.go:66), then sorts all
// matches of a hostname stably by path length, header count and query count
// (gateway.go:202, gateway_httproute.go:22): among matches equal in all three, the
// entry's order decides. So the exact match segmentPrefixes makes of PathPrefix "/foo"
// ties with an Exact "/foo", and prefix "/foo/" with an Exact "/foo/", and Envoy takes
// whichever the entry lists first, where Gateway API ranks an Exact match above every
// PathPrefix. exactFirst moves written Exact matches ahead of those ties. A tie with
// more headers or query parameters on the PathPrefix side is ordered by Consul
// whatever the entry says; the controller cannot fix that one.

// entryMatch is one match of an entry as Consul sees it.
type entryMatch struct {
	match consulapi.HTTPMatch
	rule  int  // the index of the entry rule whose filters and services it has
	exact bool // an Exact match the route wrote, not one derived from a PathPrefix
}

// tie is what makes two matches select the same requests in the same Consul
// position: the same path value (so the same length) with the same header and query
// counts. Regular expressions are left out: Gateway API leaves their precedence to
// the implementation.
type tie struct {
	path           string
	headers, query int
}

// exactFirst is rules with each written Exact match moved ahead of the matches it
// ties with (see tie) that are not written Exact matches, keeping every other order:
// a tie's matches swap positions among themselves only, written Exact first, each
// side in its former order. exacts[i] are the written Exact matches of the route rule
// rules[i] comes from. rules is returned as it is when nothing moves; otherwise a rule
// is split where its matches no longer sit side by side, which Consul does anyway.
func exactFirst(rules []consulapi.HTTPRouteRule, exacts [][]consulapi.HTTPMatch) []consulapi.HTTPRouteRule {
	flat := flattenMatches(rules, exacts)
	if !reorderTies(flat) {
		return rules
	}
	return regroupMatches(rules, flat)
}

// flattenMatches lists the matches of rules in Consul's order before its sort. A rule
// without matches has Consul's default, prefix "/" (gateway.go:72).
func flattenMatches(rules []consulapi.HTTPRouteRule, exacts [][]consulapi.HTTPMatch) []entryMatch {
	var flat []entryMatch
	for i, rule := range rules {
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/"}}}
		}
		for _, m := range matches {
			exact := m.Path.Match == consulapi.HTTPPathMatchExact && slices.ContainsFunc(exacts[i], func(e consulapi.HTTPMatch) bool { return sameMatch(e, m) })
			flat = append(flat, entryMatch{match: m, rule: i, exact: exact})
		}
	}
	return flat
}

// reorderTies puts the written Exact matches of each tie in the tie's first
// positions, and reports whether anything moved.
func reorderTies(flat []entryMatch) bool {
	positions := map[tie][]int{}
	var ties []tie // in order of first appearance, so the result is deterministic
	for i, m := range flat {
		if m.match.Path.Match == consulapi.HTTPPathMatchRegularExpression {
			continue
		}
		k := tie{m.match.Path.Value, len(m.match.Headers), len(m.match.Query)}
		if _, seen := positions[k]; !seen {
			ties = append(ties, k)
		}
		positions[k] = append(positions[k], i)
	}
	moved := false
	for _, k := range ties {
		if exactsFirst(flat, positions[k]) {
			moved = true
		}
	}
	return moved
}

// exactsFirst reorders the matches at positions (ascending) of flat so the written
// Exact ones come first, each side keeping its order; it reports whether any moved.
func exactsFirst(flat []entryMatch, positions []int) bool {
	written := func(p int) bool { return flat[p].exact }
	other := slices.IndexFunc(positions, func(p int) bool { return !written(p) })
	if other < 0 || !slices.ContainsFunc(positions[other:], written) {
		return false
	}
	var exact, rest []entryMatch
	for _, p := range positions {
		if written(p) {
			exact = append(exact, flat[p])
			continue
		}
		rest = append(rest, flat[p])
	}
	for i, m := range append(exact, rest...) {
		flat[positions[i]] = m
	}
	return true
}

// regroupMatches makes rules of flat: a run of matches of one rule is one rule with
// that rule's filters and services.
func regroupMatches(rules []consulapi.HTTPRouteRule, flat []entryMatch) []consulapi.HTTPRouteRule {
	var out []consulapi.HTTPRouteRule
	for i, m := range flat {
		if i > 0 && flat[i-1].rule == m.rule {
			last := &out[len(out)-1]
			last.Matches = append(last.Matches, m.match)
			continue
		}
		r := rules[m.rule]
		r.Matches = []consulapi.HTTPMatch{m.match}
		out = append(out, r)
	}
	return out
}

// writtenExacts are the Exact matches of a route rule as translated, before
// segmentPrefixes adds its own. A match Consul cannot hold is left out: its rule
// writes none of its matches.
func writtenExacts(matches []gatewayv1.HTTPRouteMatch) []consulapi.HTTPMatch {
	var out []consulapi.HTTPMatch
	for _, m := range matches {
		if m.Path == nil || m.Path.Type == nil || *m.Path.Type != gatewayv1.PathMatchExact {
			continue
		}
		if match, err := httpMatch(m); err == nil {
			out = append(out, match)
		}
	}
	return out
}

// sameMatch reports whether a and b select the same requests by the same conditions.
// Within one route rule a derived match equal to a written Exact routes exactly as it
// does, so telling them apart is not needed.
func sameMatch(a, b consulapi.HTTPMatch) bool {
	return a.Path == b.Path && a.Method == b.Method && slices.Equal(a.Headers, b.Headers) && slices.Equal(a.Query, b.Query)
}
