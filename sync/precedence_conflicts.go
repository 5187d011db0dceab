package sync

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// This file compares where Gateway API and Consul send a request (precedence_model.go
// and the files it names) and turns each difference into a conflict of the route the
// spec picks.

// Reasons of the RoutedAsSpecified condition.
const (
	ReasonRoutedAsSpecified  = "RoutedAsSpecified"
	ReasonHiddenByHostname   = "HiddenByHostname"
	ReasonTieOrderedByConsul = "TieOrderedByConsul"
	ReasonPrecedenceDiffers  = "PrecedenceDiffers"
	// ReasonPrecedenceNotJudged is the reason of RoutedAsSpecified=Unknown: the route
	// is past the matches judged on its listener (maxJudgedMatches).
	ReasonPrecedenceNotJudged = "PrecedenceNotJudged"
)

// reasonRank orders conflicts in a message, and the reason of a parent with several.
var reasonRank = map[string]int{ReasonHiddenByHostname: 0, ReasonPrecedenceDiffers: 1, ReasonTieOrderedByConsul: 2}

// precedenceConflict is a request Gateway API sends to a rule of the route judged and
// Consul may send elsewhere.
type precedenceConflict struct {
	reason   string
	listener gatewayv1.SectionName
	request  exampleRequest
	rule     int // the route's rule the spec picks
	// other is the route Consul may pick instead (or whose hostname hides the
	// route), otherRule its rule; otherRule is -1 when Consul answers 404.
	other     cache.ObjectName
	otherSelf bool
	otherRule int
	host      string // Consul's virtual host
}

// conflictsOf finds the requests Gateway API sends to route ri of t and Consul may
// send elsewhere, at most one per pair of rules and reason.
func (t *listenerTable) conflictsOf(ri int) []precedenceConflict {
	seen := map[[4]string]bool{}
	var out []precedenceConflict
	for _, r := range t.exampleRequests(ri) {
		for _, c := range t.conflictsAt(ri, r) {
			id := [4]string{c.reason, c.other.String(), fmt.Sprint(c.rule), fmt.Sprint(c.otherRule)}
			if !seen[id] {
				seen[id] = true
				out = append(out, c)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b precedenceConflict) int {
		return cmp.Or(cmp.Compare(reasonRank[a.reason], reasonRank[b.reason]), cmp.Compare(a.other.String(), b.other.String()),
			cmp.Compare(a.rule, b.rule), cmp.Compare(a.otherRule, b.otherRule))
	})
	return out
}

// conflictsAt compares where Gateway API and Consul send r, when Gateway API sends it
// to route ri.
func (t *listenerTable) conflictsAt(ri int, r exampleRequest) []precedenceConflict {
	want, ok := t.specWinner(r)
	if !ok || want.route != ri {
		return nil
	}
	got, ok := t.consulWinners(r)
	if !ok {
		return nil
	}
	base := precedenceConflict{listener: t.name, request: r, rule: want.rule, host: got.host}
	if !slices.Contains(t.routes[ri].consulHosts, got.host) {
		return []precedenceConflict{t.hidden(base, got)}
	}
	var out []precedenceConflict
	for _, m := range got.rules {
		if m.ruleRef == want.ruleRef {
			continue
		}
		c := base
		c.other, c.otherSelf, c.otherRule = t.routes[m.route].key, m.route == ri, m.rule
		c.reason = ReasonPrecedenceDiffers
		if t.tiedInSpec(want, m, r.host) {
			c.reason = ReasonTieOrderedByConsul
		}
		out = append(out, c)
	}
	return out
}

// hidden is the conflict of a request whose host Consul gives to a virtual host the
// route is not filed under.
func (t *listenerTable) hidden(c precedenceConflict, got consulOutcome) precedenceConflict {
	c.reason, c.otherRule = ReasonHiddenByHostname, -1
	if len(got.rules) > 0 {
		c.other, c.otherRule = t.routes[got.rules[0].route].key, got.rules[0].rule
		return c
	}
	for _, route := range t.routes {
		if slices.Contains(route.consulHosts, got.host) {
			c.other = route.key
			return c
		}
	}
	return c
}

// tiedInSpec reports whether Gateway API ranks the match Consul picked for a request
// to host equal to the one it picks, up to the route tie-breaks (oldest, then
// namespace/name), with the same path: then Consul ranks them equal too, and only its
// binding order decides.
func (t *listenerTable) tiedInSpec(want specCandidate, got consulMatch, host string) bool {
	if want.route == got.route {
		return false
	}
	rank, _ := specHostRank(t.routes[got.route].hostnames, host)
	return rank.compare(want.host) == 0 && specPrecedence(want.match, got.from) == 0 && samePath(want.match, got.from)
}

// samePath reports whether two matches have the same path match; a PathPrefix's
// trailing slash does not count.
func samePath(a, b routeMatch) bool {
	if a.path != b.path {
		return false
	}
	if a.path == pathPrefix {
		return strings.TrimSuffix(a.pathValue, "/") == strings.TrimSuffix(b.pathValue, "/")
	}
	return a.pathValue == b.pathValue
}
