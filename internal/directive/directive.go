// Package directive is what a route rule asks the responder to answer, and how the
// translation carries it there: Consul 1.15's http-route can neither answer a request
// itself nor redirect it, so a rule that must do either forwards to the responder
// service and sets one request header, Header, whose value says what to answer.
//
// The header is always set (overwritten), never added: a client that sends it gets
// its value replaced by the rule's, so no request can choose its own answer. A request
// that reaches the responder without a directive it can read is answered with 500,
// the answer Gateway API gives a rule without a valid backend.
//
// The package is pure: the translation writes directives with it, and the responder
// computes its answer with it, from the request's parts handed in.
package directive

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Header is the request header that carries a rule's directive to the responder.
const Header = "X-Consul-Gateway-Controller-Directive"

// Path modifier types, as Gateway API names them.
const (
	ReplaceFullPath    = "ReplaceFullPath"
	ReplacePrefixMatch = "ReplacePrefixMatch"
)

// Directive is what the responder answers a request with. A zero Directive, or one
// without a Redirect, answers 500.
type Directive struct {
	// Redirect is the rule's RequestRedirect filter; nil answers 500.
	Redirect *Redirect `json:"redirect,omitempty"`
}

// Redirect is an HTTPRequestRedirectFilter: each field empty or zero when unset.
type Redirect struct {
	Scheme   string `json:"scheme,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	Port     int    `json:"port,omitempty"`
	// Path is the path modifier; nil keeps the request's path.
	Path *PathModifier `json:"path,omitempty"`
	// StatusCode is the answer's status; 0 is Gateway API's default, 302.
	StatusCode int `json:"statusCode,omitempty"`
}

// PathModifier is an HTTPPathModifier, with the prefix a ReplacePrefixMatch
// replaces: the rule's one PathPrefix match value.
type PathModifier struct {
	Type string `json:"type"`
	// Value is the full path (ReplaceFullPath) or the replacement of the prefix
	// (ReplacePrefixMatch).
	Value string `json:"value"`
	// Prefix is the matched prefix ReplacePrefixMatch replaces.
	Prefix string `json:"prefix,omitempty"`
}

// StatusCodes are the redirect status codes Gateway API v1.6.3 allows (301 and 302
// are core, the others extended); the responder answers each as is.
var StatusCodes = map[int]bool{301: true, 302: true, 303: true, 307: true, 308: true}

// Schemes are the redirect schemes Gateway API v1.6.3 allows, with their well-known
// ports.
var Schemes = map[string]int{"http": 80, "https": 443}

// Encode is d as the value of Header, before the translation escapes it for Envoy.
func Encode(d Directive) string {
	out, err := json.Marshal(d)
	if err != nil {
		// Only ints and strings: Marshal cannot fail.
		panic(fmt.Sprintf("encode directive: %v", err))
	}
	return string(out)
}

// Decode reads the value of Header. An empty value is the zero Directive (500), and so
// is what a value that cannot be read gives, with the error.
func Decode(value string) (Directive, error) {
	var d Directive
	if value == "" {
		return d, nil
	}
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Directive{}, fmt.Errorf("decode %s: %w", Header, err)
	}
	if err := d.validate(); err != nil {
		return Directive{}, fmt.Errorf("decode %s: %w", Header, err)
	}
	return d, nil
}

// validate refuses a directive the responder cannot answer as written: the
// translation writes none, so one means a header that is not the translation's.
func (d Directive) validate() error {
	r := d.Redirect
	if r == nil {
		return nil
	}
	if _, ok := Schemes[r.Scheme]; r.Scheme != "" && !ok {
		return fmt.Errorf("redirect scheme %q is not http or https", r.Scheme)
	}
	if r.StatusCode != 0 && !StatusCodes[r.StatusCode] {
		return fmt.Errorf("redirect status code %d is not a redirect Gateway API allows", r.StatusCode)
	}
	if r.Port < 0 || r.Port > 65535 {
		return fmt.Errorf("port out of range")
	}
	if p := r.Path; p != nil && p.Type != ReplaceFullPath && p.Type != ReplacePrefixMatch {
		return fmt.Errorf("redirect path type %q is not %s or %s", p.Type, ReplaceFullPath, ReplacePrefixMatch)
	}
	return nil
}

// Request is what of a request the answer depends on.
type Request struct {
	// Scheme is the scheme the client used with the gateway (Envoy's
	// X-Forwarded-Proto); "" is http.
	Scheme string
	// Host is the request's Host header, with its port if it has one.
	Host string
	// Path is the request's path, as sent (escaped), and RawQuery its query.
	Path     string
	RawQuery string
}

// Answer is the responder's response: a status and, for a redirect, its Location.
type Answer struct {
	StatusCode int
	Location   string
}

// Respond computes the answer to req under d: 500 without a redirect, else the
// redirect Gateway API's HTTPRequestRedirectFilter describes.
func Respond(d Directive, req Request) Answer {
	r := d.Redirect
	if r == nil {
		return Answer{StatusCode: 500}
	}
	requestScheme := strings.ToLower(req.Scheme)
	if _, ok := Schemes[requestScheme]; !ok {
		requestScheme = "http"
	}
	scheme := r.Scheme
	if scheme == "" {
		scheme = requestScheme
	}
	host, requestPort := splitHost(req.Host)
	if r.Hostname != "" {
		host = r.Hostname
	}
	port := redirectPort(r, requestPort, requestScheme)
	authority := host
	if port != 0 && port != Schemes[scheme] {
		authority = host + ":" + strconv.Itoa(port)
	}
	location := url.URL{Scheme: scheme, Host: authority, RawQuery: req.RawQuery}
	path := redirectPath(r.Path, req.Path)
	// The path is already escaped (as sent, or as the route wrote it): set both
	// forms so that URL.String writes it unchanged.
	if unescaped, err := url.PathUnescape(path); err == nil {
		location.Path, location.RawPath = unescaped, path
	} else {
		location.Path = path
	}
	return Answer{StatusCode: cmp.Or(r.StatusCode, 302), Location: location.String()}
}

// redirectPort is the port of the Location: the filter's; else the well-known port of
// the filter's scheme; else the listener's port, as the Host header the client sent to
// the listener names it, or the well-known port of the scheme the client used. (A
// route's listeners may have different ports, so the rule cannot name one.)
func redirectPort(r *Redirect, requestPort int, requestScheme string) int {
	switch {
	case r.Port != 0:
		return r.Port
	case r.Scheme != "":
		return Schemes[r.Scheme]
	case requestPort != 0:
		return requestPort
	}
	return Schemes[requestScheme]
}

// splitHost splits a Host header into its host and port (0 when it has none or one
// that is not a number).
func splitHost(hostHeader string) (string, int) {
	u := url.URL{Host: hostHeader}
	host := u.Hostname()
	port, err := strconv.Atoi(u.Port())
	if err != nil || host == "" {
		return strings.TrimSuffix(hostHeader, ":"), 0
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host, port
}

// redirectPath is the Location's path: requestPath, or what the modifier makes of it.
func redirectPath(m *PathModifier, requestPath string) string {
	if requestPath == "" {
		requestPath = "/"
	}
	switch {
	case m == nil:
		return requestPath
	case m.Type == ReplaceFullPath:
		return cmp.Or(m.Value, "/")
	}
	return replacePrefix(requestPath, m.Prefix, m.Value)
}

// replacePrefix replaces prefix, a path prefix matched segment by segment, at the start
// of path with replacement, as HTTPPathModifier's table says: "/foo/bar" with "/foo"
// replaced by "/xyz" is "/xyz/bar", by "" is "/bar"; "/foo" is "/xyz", or "/".
func replacePrefix(path, prefix, replacement string) string {
	prefix = strings.TrimSuffix(prefix, "/")
	rest := path
	if matchesPrefix(path, prefix) {
		rest = path[len(prefix):]
	}
	replacement = strings.TrimSuffix(replacement, "/")
	switch {
	case rest == "" && replacement == "":
		return "/"
	case rest == "":
		return replacement
	case !strings.HasPrefix(rest, "/"):
		rest = "/" + rest
	}
	return replacement + rest
}

// matchesPrefix reports whether prefix (without a trailing "/") is a path-segment
// prefix of path, as a PathPrefix match selects it.
func matchesPrefix(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || path[len(prefix)] == '/' || prefix == ""
}
