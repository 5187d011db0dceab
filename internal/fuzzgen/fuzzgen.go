// Package fuzzgen builds Gateway API objects from fuzzer bytes, for the fuzz tests of
// the status decisions (package sync) and of the Consul translation (package consul):
// both fuzz the same kind of routes and listeners, so they share one generator.
//
// Values come from small pools that hold the cases the code tells apart (wildcards,
// suffixes that only look like subdomains, trailing slashes, unsupported types,
// dotted names), so a few bytes reach them and collisions are frequent. When the bytes
// run out every choice is the first of its pool.
package fuzzgen

import (
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Input hands out the fuzzer's bytes as choices.
type Input struct {
	data []byte
	host gatewayv1.Hostname
	path string
}

// hostnamePattern is the CRD's pattern for a route or listener hostname: the API server
// refuses anything else, so the fuzzer's own hostname is used only when it matches.
var hostnamePattern = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// New reads data; host and path join the pools when they are what the CRD admits.
func New(data []byte, host, path string) *Input {
	in := &Input{data: data}
	if len(host) <= 253 && hostnamePattern.MatchString(host) {
		in.host = gatewayv1.Hostname(host)
	}
	if strings.HasPrefix(path, "/") && !strings.Contains(path, "//") && len(path) <= 1024 {
		in.path = path
	}
	return in
}

// Seeds are count inputs of random bytes, the same every time: the fuzzer mutates its
// seeds, and from a few short ones it takes long to reach inputs with several
// listeners, parents and rules that overlap (a ListenerSet listener named like
// another, a route on two listeners whose hostnames Consul confuses), which random
// bytes reach within a few hundred inputs.
func Seeds(count int) [][]byte {
	r := rand.New(rand.NewPCG(14, 4))
	out := make([][]byte, count)
	for i := range out {
		out[i] = make([]byte, 32+r.IntN(96))
		for j := range out[i] {
			out[i][j] = byte(r.Uint32())
		}
	}
	return out
}

// Byte is the next byte, 0 once they run out.
func (in *Input) Byte() byte {
	if len(in.data) == 0 {
		return 0
	}
	b := in.data[0]
	in.data = in.data[1:]
	return b
}

// Intn is a choice in [0, n).
func (in *Input) Intn(n int) int { return int(in.Byte()) % n }

// Bool is true for about one byte in four, so optional things stay rare.
func (in *Input) Bool() bool { return in.Intn(4) == 0 }

// Pick chooses one value of pool.
func Pick[T any](in *Input, pool []T) T { return pool[in.Intn(len(pool))] }

// PickPtr chooses one value of pool, or nil for the first choice.
func PickPtr[T any](in *Input, pool []T) *T {
	i := in.Intn(len(pool) + 1)
	if i == 0 {
		return nil
	}
	v := pool[i-1]
	return &v
}

// Hostnames are the concrete and wildcard hostnames that overlap in every way the
// Gateway API rules tell apart, and ones Consul's suffix filter confuses.
var Hostnames = []gatewayv1.Hostname{
	"example.com", "a.example.com", "b.example.com", "*.example.com", "*.a.example.com",
	"a.b.example.com", "badexample.com", "x.badexample.com", "*.com", "other.com",
}

// Hostname is one hostname of the pool, or the fuzzer's own.
func (in *Input) Hostname() gatewayv1.Hostname {
	if in.host != "" && in.Intn(len(Hostnames)+1) == 0 {
		return in.host
	}
	return Pick(in, Hostnames)
}

// RouteHostnames are up to three hostnames.
func (in *Input) RouteHostnames() []gatewayv1.Hostname {
	var out []gatewayv1.Hostname
	for range in.Intn(4) {
		out = append(out, in.Hostname())
	}
	return out
}

// Listener is a listener named name: any protocol, a port shared with others, a
// hostname or none, routes allowed from every namespace. An HTTPS listener names the
// certificate Secret cert (namespace "" is the listener's own).
func (in *Input) Listener(name gatewayv1.SectionName, cert gatewayv1.SecretObjectReference) gatewayv1.Listener {
	l := gatewayv1.Listener{
		Name:          name,
		Protocol:      Pick(in, []gatewayv1.ProtocolType{gatewayv1.HTTPProtocolType, gatewayv1.HTTPSProtocolType, gatewayv1.TCPProtocolType, gatewayv1.UDPProtocolType}),
		Port:          Pick(in, []gatewayv1.PortNumber{80, 81, 443}),
		AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: new(gatewayv1.NamespacesFromAll)}},
	}
	if in.Intn(3) > 0 {
		l.Hostname = new(in.Hostname())
	}
	if l.Protocol == gatewayv1.HTTPSProtocolType {
		l.TLS = &gatewayv1.ListenerTLSConfig{Mode: new(gatewayv1.TLSModeTerminate), CertificateRefs: []gatewayv1.SecretObjectReference{cert}}
	}
	return l
}

// Listeners are one to four listeners with names from names (which may repeat).
func (in *Input) Listeners(names []gatewayv1.SectionName, cert gatewayv1.SecretObjectReference) []gatewayv1.Listener {
	out := make([]gatewayv1.Listener, 1+in.Intn(4))
	for i := range out {
		out[i] = in.Listener(Pick(in, names), cert)
	}
	return out
}

// RuleTag is a header every generated match carries, with its rule's index as the
// value, so a translated match can be traced back to its rule.
const RuleTag = "x-fuzz-rule"

var (
	// Paths are also the regex values: "/(?<id>a)" is one Envoy's RE2 refuses.
	paths     = []string{"/", "/a", "/a/", "/ab", "/a/b", "/b", "/(?<id>a)"}
	pathTypes = []gatewayv1.PathMatchType{gatewayv1.PathMatchPathPrefix, gatewayv1.PathMatchExact, gatewayv1.PathMatchRegularExpression, "Bogus"}
	methods   = []gatewayv1.HTTPMethod{gatewayv1.HTTPMethodGet, gatewayv1.HTTPMethodPost, "BREW"}
	// Replacements are the ReplacePrefixMatch values the spec's table tells apart, and
	// one Envoy refuses as a prefix rewrite.
	replacements = []string{"", "/", "/new", "/new/", "/new\nline"}
	// Header names and values to set, add and remove: ordinary ones, and ones Envoy
	// refuses in a route (Host, a pseudo-header, NUL/CR/LF, an empty name) or reads
	// as a format ("%"); objects that skipped the CRD's validation can hold any.
	headerNames  = []gatewayv1.HTTPHeaderName{"x-set", "x-set", "Host", "x-a\r\nx-b"}
	headerValues = []string{"s", "s", "100%", "%START_TIME%", "a\r\nx-injected: 1", "a\x00b"}
	removals     = []string{"x", "x", ":path", "host", ""}
)

// Path is one path of the pool, or the fuzzer's own.
func (in *Input) Path() string {
	if in.path != "" && in.Intn(len(paths)+1) == 0 {
		return in.path
	}
	return Pick(in, paths)
}

// HTTPRules are up to four rules: matches of every type (the unsupported ones too),
// filters Consul can and cannot apply, values Envoy refuses, fields it has no place for, and backendRefs to
// the Services web, api and missing (port 8080 exists, 9999 does not), in the route's
// namespace or in namespace other, with weights 0, 1 and 3.
func (in *Input) HTTPRules() []gatewayv1.HTTPRouteRule {
	rules := make([]gatewayv1.HTTPRouteRule, in.Intn(5))
	for i := range rules {
		rules[i] = in.httpRule(i)
	}
	return rules
}

func (in *Input) httpRule(index int) gatewayv1.HTTPRouteRule {
	var rule gatewayv1.HTTPRouteRule
	for range in.Intn(3) {
		rule.Matches = append(rule.Matches, in.match(index))
	}
	// Most rules have no filter: one Consul cannot apply drops the rule, and a route
	// whose rules are all dropped is served nowhere.
	for range max(in.Intn(6)-3, 0) {
		rule.Filters = append(rule.Filters, in.filter())
	}
	for range in.Intn(4) {
		rule.BackendRefs = append(rule.BackendRefs, in.backendRef())
	}
	switch in.Intn(16) {
	case 0:
		rule.Timeouts = &gatewayv1.HTTPRouteTimeouts{Request: new(gatewayv1.Duration("1s"))}
	case 1:
		rule.Retry = &gatewayv1.HTTPRouteRetry{}
	case 2:
		rule.SessionPersistence = &gatewayv1.SessionPersistence{}
	}
	return rule
}

func (in *Input) match(rule int) gatewayv1.HTTPRouteMatch {
	m := gatewayv1.HTTPRouteMatch{Headers: []gatewayv1.HTTPHeaderMatch{{Name: RuleTag, Value: strconv.Itoa(rule)}}}
	if in.Intn(5) > 0 {
		m.Path = &gatewayv1.HTTPPathMatch{Type: PickPtr(in, pathTypes), Value: new(in.Path())}
	}
	if in.Bool() {
		m.Headers = append(m.Headers, gatewayv1.HTTPHeaderMatch{
			Type: PickPtr(in, []gatewayv1.HeaderMatchType{gatewayv1.HeaderMatchExact, gatewayv1.HeaderMatchRegularExpression, "Bogus"}),
			Name: Pick(in, []gatewayv1.HTTPHeaderName{"x-h", "x-h", "x-h\r"}), Value: "v",
		})
	}
	if in.Bool() {
		m.QueryParams = append(m.QueryParams, gatewayv1.HTTPQueryParamMatch{
			Type: PickPtr(in, []gatewayv1.QueryParamMatchType{gatewayv1.QueryParamMatchExact, gatewayv1.QueryParamMatchRegularExpression, "Bogus"}),
			Name: Pick(in, []gatewayv1.HTTPHeaderName{"q", "q", ""}), Value: "v",
		})
	}
	if in.Bool() {
		m.Method = new(Pick(in, methods))
	}
	return m
}

func (in *Input) filter() gatewayv1.HTTPRouteFilter {
	switch in.Intn(9) {
	case 0:
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: in.headerFilter()}
	case 1:
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{}}
	case 2, 3:
		return rewrite(&gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: new(Pick(in, replacements))})
	case 4:
		return rewrite(&gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: new("/full")})
	case 5:
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: new(gatewayv1.PreciseHostname("h.example.com"))}}
	case 6:
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{}}
	case 7:
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Remove: []string{"x"}}}
	}
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gatewayv1.LocalObjectReference{Group: "example.com", Kind: "Policy", Name: "p"}}
}

// headerFilter sets, adds or removes one header from the pools.
func (in *Input) headerFilter() *gatewayv1.HTTPHeaderFilter {
	header := []gatewayv1.HTTPHeader{{Name: Pick(in, headerNames), Value: Pick(in, headerValues)}}
	switch in.Intn(3) {
	case 0:
		return &gatewayv1.HTTPHeaderFilter{Add: header}
	case 1:
		return &gatewayv1.HTTPHeaderFilter{Remove: []string{Pick(in, removals)}}
	}
	return &gatewayv1.HTTPHeaderFilter{Set: header}
}

func rewrite(path *gatewayv1.HTTPPathModifier) gatewayv1.HTTPRouteFilter {
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Path: path}}
}

func (in *Input) backendRef() gatewayv1.HTTPBackendRef {
	ref := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{
			Name: Pick(in, []gatewayv1.ObjectName{"web", "api", "missing"}),
			Port: PickPtr(in, []gatewayv1.PortNumber{8080, 8080, 9999}),
		},
		Weight: PickPtr(in, []int32{1, 3, 0}),
	}}
	if in.Bool() {
		ref.Namespace = new(gatewayv1.Namespace("other"))
	}
	if in.Intn(8) == 0 {
		ref.Kind = new(gatewayv1.Kind("Bucket"))
	}
	if in.Intn(8) == 0 {
		ref.Filters = []gatewayv1.HTTPRouteFilter{in.filter()}
	}
	return ref
}
