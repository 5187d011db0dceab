package translate

import (
	"regexp"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
)

// authorityHeader is the pseudo-header Envoy matches a request's host (and port) as.
const authorityHeader = ":authority"

// Several wildcard listeners on one port. Consul 1.15's http-route takes no wildcard
// hostname, and a Consul listener has one hostname, so on a port with two wildcard
// listeners ("*.bar.com", "*.foo.com") the Consul listener has none, and an entry
// without hostnames is served in the port's catch-all virtual host "*". There, the
// route's matches are narrowed to its wildcards by a regular expression on
// ":authority" (authorityMatch): Envoy reaches "*" only for hosts no more specific
// virtual host has, so exact hostnames keep their precedence, and the wildcards of one
// port are disjoint (the status pipeline refuses nested ones), so no host reaches the
// routes of two wildcard listeners.

// authorityPattern is the regular expression of the hosts a wildcard hostname stands
// for: one or more labels before its suffix, any case, with or without a port.
func authorityPattern(wildcard string) string {
	suffix := strings.TrimPrefix(wildcard, "*")
	return "[^:]+" + regexp.QuoteMeta(suffix)
}

// authorityMatch is the header match that keeps requests to the hosts of wildcards.
func authorityMatch(wildcards []string) consulapi.HTTPHeaderMatch {
	sorted := slices.Clone(wildcards)
	slices.Sort(sorted)
	patterns := make([]string, len(sorted))
	for i, w := range sorted {
		patterns[i] = authorityPattern(w)
	}
	return consulapi.HTTPHeaderMatch{
		Match: consulapi.HTTPHeaderMatchRegularExpression,
		Name:  authorityHeader,
		Value: "(?i)^(" + strings.Join(patterns, "|") + ")(:[0-9]+)?$",
	}
}

// withAuthority returns rules with header added to every match; a rule without
// matches gets Consul's default one, prefix "/", with it.
func withAuthority(rules []consulapi.HTTPRouteRule, header consulapi.HTTPHeaderMatch) []consulapi.HTTPRouteRule {
	out := make([]consulapi.HTTPRouteRule, len(rules))
	for i, rule := range rules {
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/"}}}
		}
		narrowed := make([]consulapi.HTTPMatch, len(matches))
		for j, m := range matches {
			m.Headers = append(slices.Clone(m.Headers), header)
			narrowed[j] = m
		}
		rule.Matches = narrowed
		out[i] = rule
	}
	return out
}

// authorityPlan returns the wildcards an entry without hostnames is narrowed to, and
// which members it then serves exactly: those whose hostnames are all wildcards, on a
// Consul listener without hostname (whose catch-all virtual host holds the entry).
// Every kept parent must need all of them, since one entry's matches apply to each
// of its parents: a parent that needs others loses its members, until the rest agree.
func authorityPlan(parents []parentListener, served [][][]string) ([]string, [][]bool) {
	keep := make([][]bool, len(parents))
	for i, p := range parents {
		keep[i] = make([]bool, len(served[i]))
		for j, hosts := range served[i] {
			keep[i][j] = p.hostname == "" && len(hosts) > 0 && !slices.ContainsFunc(hosts, func(h string) bool { return !isWildcard(h) || h == "*" })
		}
	}
	for {
		var wildcards []string
		for i := range parents {
			for _, h := range keptHostnames(served[i], keep[i]) {
				if !slices.Contains(wildcards, h) {
					wildcards = append(wildcards, h)
				}
			}
		}
		changed := false
		for i := range parents {
			need := keptHostnames(served[i], keep[i])
			if len(need) > 0 && !sameSet(need, wildcards) {
				clear(keep[i])
				changed = true
			}
		}
		if !changed {
			slices.Sort(wildcards)
			return wildcards, keep
		}
	}
}
