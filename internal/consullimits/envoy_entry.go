package consullimits

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
)

// HTTPRouteRuleEnvoyProblem says why Envoy would refuse what Consul 1.15 makes of an
// http-route rule as written to Consul, or "" when it would take all of it. It is
// HTTPRuleProblem's check one level down, on what the translation wrote rather than
// on the Gateway API rule: header filters become request_headers_to_add (each value a
// substitution format, see EscapeHeaderValue) and request_headers_to_remove, a
// URLRewrite becomes prefix_rewrite, matches become header, query parameter and regex
// matchers (Consul 1.15.4 agent/consul/discoverychain/gateway_httproute.go,
// agent/xds/routes.go). The translation refuses a rule it finds a problem with, and
// its fuzz test holds the two checks in step.
func HTTPRouteRuleEnvoyProblem(rule consulapi.HTTPRouteRule) string {
	if msg := filtersEnvoyProblem("filters", rule.Filters); msg != "" {
		return msg
	}
	for _, s := range rule.Services {
		if msg := filtersEnvoyProblem(fmt.Sprintf("service %s filters", s.Name), s.Filters); msg != "" {
			return msg
		}
	}
	for i, m := range rule.Matches {
		if msg := matchEnvoyProblem(m); msg != "" {
			return fmt.Sprintf("match %d %s", i, msg)
		}
	}
	return ""
}

func filtersEnvoyProblem(where string, f consulapi.HTTPFilters) string {
	for _, h := range f.Headers {
		for _, list := range []struct {
			field   string
			headers map[string]string
		}{{"set", h.Set}, {"add", h.Add}} {
			for _, name := range slices.Sorted(maps.Keys(list.headers)) {
				if msg := writtenHeaderProblem(name, list.headers[name]); msg != "" {
					return envoyRefused(where+" "+list.field, msg)
				}
			}
		}
		for _, name := range h.Remove {
			if msg := modifiedHeaderProblem(name); msg != "" {
				return envoyRefused(where+" remove", msg)
			}
		}
	}
	if f.URLRewrite != nil {
		if msg := prefixRewriteProblem(f.URLRewrite.Path); msg != "" {
			return envoyRefused(where+" URLRewrite", msg)
		}
	}
	return ""
}

// writtenHeaderProblem checks a header to add as written to Consul: its value is
// already a substitution format, in which a "%" must be doubled.
func writtenHeaderProblem(name, value string) string {
	if msg := modifiedHeaderProblem(name); msg != "" {
		return msg
	}
	if hasNulCRLF(value) {
		return fmt.Sprintf("header %s value %q with a NUL, CR or LF character", name, value)
	}
	if len(value) > maxHeaderBytes {
		return fmt.Sprintf("header %s value of %d bytes (at most %d)", name, len(value), maxHeaderBytes)
	}
	if strings.Contains(strings.ReplaceAll(value, "%%", ""), "%") {
		return fmt.Sprintf("header %s value %q with a %% Envoy reads as the start of a command", name, value)
	}
	return ""
}

func matchEnvoyProblem(m consulapi.HTTPMatch) string {
	if m.Path.Match == consulapi.HTTPPathMatchRegularExpression {
		if msg := RegexProblem(m.Path.Value); msg != "" {
			return "path " + msg
		}
	}
	for _, h := range m.Headers {
		if msg := headerNameProblem(h.Name); msg != "" {
			return envoyRefused("header match", msg)
		}
		if h.Match == consulapi.HTTPHeaderMatchRegularExpression {
			if msg := RegexProblem(h.Value); msg != "" {
				return fmt.Sprintf("header %s %s", h.Name, msg)
			}
		}
	}
	for _, q := range m.Query {
		if msg := queryParamNameProblem(q.Name); msg != "" {
			return envoyRefused("query param match", msg)
		}
		if q.Match == consulapi.HTTPQueryMatchRegularExpression {
			if msg := RegexProblem(q.Value); msg != "" {
				return fmt.Sprintf("query param %s %s", q.Name, msg)
			}
		}
	}
	return ""
}
