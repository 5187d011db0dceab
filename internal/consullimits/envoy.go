package consullimits

import (
	"fmt"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/directive"
)

// What Envoy refuses of what Consul passes through. Consul 1.15 copies an http-route's
// header filters, match names and prefix rewrites into the gateway's route
// configuration without checking them (Consul 1.15.4 agent/structs/config_entry_routes.go
// validateHeaderFilter and validateURLRewrite check nothing; agent/xds/routes.go
// makeHeadersValueOptions, makeRouteMatchForDiscoveryRoute), and Envoy refuses the
// whole route configuration of a port, every tenant's routes on it, for one value it
// does not accept: it keeps serving the configuration it had, so every later change
// on that port is lost too. The rules below are those of Envoy 1.27 (the Envoy of
// consul-dataplane 1.1.13), read in its sources:
//
//   - protoc-gen-validate rules of api/envoy/config/core/v3/base.proto (HeaderValue:
//     key 1 to 16384 bytes, key and value without NUL, CR or LF, "well_known_regex
//     HTTP_HEADER_NAME/HTTP_HEADER_VALUE strict: false") and of
//     api/envoy/config/route/v3/route_components.proto (request_headers_to_remove items
//     and HeaderMatcher.name likewise; QueryParameterMatcher.name 1 to 1024 bytes;
//     RouteAction.prefix_rewrite without NUL, CR or LF);
//   - source/common/router/header_parser.cc: a route may not add, set or remove a
//     ":"-prefixed header or Host (Http::HeaderUtility::isModifiableHeader and
//     isRemovableHeader: ":-prefixed or host headers may not be modified/removed");
//   - header values are substitution formats there: "%" starts a command operator
//     ("%START_TIME%"), "%%" is a literal "%". A value with a lone "%" is refused, and
//     one with a command is a different value at every request. Gateway API values are
//     literal, so the translation escapes them (EscapeHeaderValue) rather than refusing.

// maxHeaderBytes is HeaderValue's max_bytes for a header name and for a value.
const maxHeaderBytes = 16384

// maxQueryParamNameBytes is QueryParameterMatcher.name's max_bytes.
const maxQueryParamNameBytes = 1024

// EnvoyRefuses ends every message about a value Envoy refuses, so they read alike.
const EnvoyRefuses = "Envoy refuses it, and with it every route of the gateway's port"

// EscapeHeaderValue is value as Envoy reads a header value to add: a literal, with
// each "%" doubled so that Envoy does not take it for a command operator.
func EscapeHeaderValue(value string) string {
	return strings.ReplaceAll(value, "%", "%%")
}

// headerNameProblem says why Envoy refuses name as a header name anywhere (added,
// removed or matched), or "" when it does not.
func headerNameProblem(name string) string {
	switch {
	case name == "":
		return "an empty header name"
	case len(name) > maxHeaderBytes:
		return fmt.Sprintf("a header name longer than %d bytes", maxHeaderBytes)
	case hasNulCRLF(name):
		return fmt.Sprintf("header name %q with a NUL, CR or LF character", name)
	}
	return ""
}

// modifiedHeaderProblem says why Envoy refuses a route that adds, sets or removes
// header name, or "" when it does not.
func modifiedHeaderProblem(name string) string {
	if msg := headerNameProblem(name); msg != "" {
		return msg
	}
	if strings.HasPrefix(name, ":") || strings.EqualFold(name, "host") {
		return fmt.Sprintf("header %q (no route may modify Host or a \":\"-prefixed header)", name)
	}
	return ""
}

// headerValueProblem says why Envoy refuses value as the value of a header to add, as
// the translation writes it (escaped), or "" when it does not.
func headerValueProblem(name, value string) string {
	if hasNulCRLF(value) {
		return fmt.Sprintf("header %s value %q with a NUL, CR or LF character", name, value)
	}
	if n := len(EscapeHeaderValue(value)); n > maxHeaderBytes {
		return fmt.Sprintf("header %s value of %d bytes once its %%s are escaped (at most %d)", name, n, maxHeaderBytes)
	}
	return ""
}

// queryParamNameProblem says why Envoy refuses name as a query parameter to match, or
// "" when it does not.
func queryParamNameProblem(name string) string {
	switch {
	case name == "":
		return "an empty query param name"
	case len(name) > maxQueryParamNameBytes:
		return fmt.Sprintf("a query param name longer than %d bytes", maxQueryParamNameBytes)
	}
	return ""
}

// prefixRewriteProblem says why Envoy refuses a prefix rewrite to replacement, or ""
// when it does not.
func prefixRewriteProblem(replacement string) string {
	if hasNulCRLF(replacement) {
		return fmt.Sprintf("replacement %q with a NUL, CR or LF character", replacement)
	}
	return ""
}

func hasNulCRLF(s string) bool { return strings.ContainsAny(s, "\x00\r\n") }

// headerFilterProblem checks a RequestHeaderModifier found at where against what
// Envoy accepts of the headers Consul copies into the route; "" when it accepts all.
func headerFilterProblem(where string, h *gatewayv1.HTTPHeaderFilter) string {
	if h == nil {
		return ""
	}
	for _, list := range []struct {
		field   string
		headers []gatewayv1.HTTPHeader
	}{{"set", h.Set}, {"add", h.Add}} {
		for _, header := range list.headers {
			if problem := reservedHeaderProblem(string(header.Name)); problem != "" {
				return where + " " + list.field + ": " + problem
			}
			problem := modifiedHeaderProblem(string(header.Name))
			if problem == "" {
				problem = headerValueProblem(string(header.Name), header.Value)
			}
			if problem != "" {
				return envoyRefused(where+" "+list.field, problem)
			}
		}
	}
	for _, name := range h.Remove {
		if problem := reservedHeaderProblem(name); problem != "" {
			return where + " remove: " + problem
		}
		if problem := modifiedHeaderProblem(name); problem != "" {
			return envoyRefused(where+" remove", problem)
		}
	}
	return ""
}

// reservedHeaderProblem refuses a route's header filter on the header that carries
// a directive to the responder: a route of one tenant setting it would choose what
// the responder answers for its own refused rules.
func reservedHeaderProblem(name string) string {
	if strings.EqualFold(name, directive.Header) {
		return fmt.Sprintf("header %q is reserved for the responder's directives", name)
	}
	return ""
}

// envoyRefused is the message for a problem Envoy refuses, found at where.
func envoyRefused(where, problem string) string {
	return fmt.Sprintf("%s has %s: %s", where, problem, EnvoyRefuses)
}
