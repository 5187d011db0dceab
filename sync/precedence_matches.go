package sync

import (
	"cmp"
	"regexp"
	"slices"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// What one HTTPRoute match asks of a request, as Gateway API reads it.

// pathKind is the type of a path match.
type pathKind int

const (
	pathPrefix pathKind = iota
	pathExact
	pathRegex
)

// valueMatch is a header or query param match.
type valueMatch struct {
	name  string // lower-cased for headers, whose names are case-insensitive
	value string
	regex *regexp.Regexp // nil for an Exact match
}

func (v valueMatch) matches(got string, present bool) bool {
	if !present {
		return false
	}
	if v.regex != nil {
		return v.regex.MatchString(got)
	}
	return got == v.value
}

// routeMatch is one HTTPRouteMatch with the CRD defaults applied.
type routeMatch struct {
	path      pathKind
	pathValue string
	pathRegex *regexp.Regexp
	method    string // "" for any
	headers   []valueMatch
	query     []valueMatch
}

// hasRegex reports whether some part of the match is a regular expression: no example
// request is made up from such a match.
func (m routeMatch) hasRegex() bool {
	has := func(v valueMatch) bool { return v.regex != nil }
	return m.path == pathRegex || slices.ContainsFunc(m.headers, has) || slices.ContainsFunc(m.query, has)
}

// newRouteMatch applies the CRD defaults to m: PathPrefix "/", Exact headers and query
// params. A regex that does not compile (the rule is refused, consullimits) matches
// nothing.
func newRouteMatch(m gatewayv1.HTTPRouteMatch) routeMatch {
	out := routeMatch{path: pathPrefix, pathValue: "/"}
	if m.Path != nil && m.Path.Value != nil {
		out.pathValue = *m.Path.Value
	}
	if m.Path != nil && m.Path.Type != nil {
		switch *m.Path.Type {
		case gatewayv1.PathMatchExact:
			out.path = pathExact
		case gatewayv1.PathMatchRegularExpression:
			out.path, out.pathRegex = pathRegex, fullMatch(out.pathValue)
		}
	}
	if m.Method != nil {
		out.method = string(*m.Method)
	}
	for _, h := range m.Headers {
		regex := h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression
		out.headers = append(out.headers, newValueMatch(strings.ToLower(string(h.Name)), h.Value, regex))
	}
	for _, q := range m.QueryParams {
		regex := q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression
		out.query = append(out.query, newValueMatch(string(q.Name), q.Value, regex))
	}
	return out
}

func newValueMatch(name, value string, regex bool) valueMatch {
	v := valueMatch{name: name, value: value}
	if regex {
		v.regex = fullMatch(value)
	}
	return v
}

// neverMatches is the regex of a value that does not compile.
var neverMatches = regexp.MustCompile(`[^\x00-\x{10FFFF}]`)

// fullMatch compiles an RE2 regex that must match the whole value, as Envoy's
// safe_regex does.
func fullMatch(expr string) *regexp.Regexp {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return neverMatches
	}
	return re
}

// matchesRest reports whether r satisfies the method, header and query conditions of
// m, which Gateway API and Consul read alike.
func (m routeMatch) matchesRest(r exampleRequest) bool {
	if m.method != "" && m.method != cmp.Or(r.method, "GET") {
		return false
	}
	for _, h := range m.headers {
		got, ok := r.headers[h.name]
		if !h.matches(got, ok) {
			return false
		}
	}
	for _, q := range m.query {
		got, ok := r.query[q.name]
		if !q.matches(got, ok) {
			return false
		}
	}
	return true
}

// specMatches reports whether Gateway API's match m selects r: PathPrefix matches
// whole path segments.
func (m routeMatch) specMatches(r exampleRequest) bool {
	switch m.path {
	case pathExact:
		if r.path != m.pathValue {
			return false
		}
	case pathRegex:
		if !m.pathRegex.MatchString(r.path) {
			return false
		}
	default:
		if !segmentPrefix(r.path, m.pathValue) {
			return false
		}
	}
	return m.matchesRest(r)
}

// segmentPrefix reports whether path starts with prefix element by element.
func segmentPrefix(path, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}
