package envoy

import (
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
)

// modelledRouteFields are, per message type, the fields of a route configuration this
// model validates as Envoy does and routes by: every field Consul 1.15 sets in what it
// serves an api-gateway or ingress gateway (agent/xds/routes.go: routesForIngressGateway,
// makeUpstreamRouteForDiscoveryChain, makeRouteMatchForDiscoveryRoute,
// makeRouteActionForSplitter, injectLBToRouteAction, the injectHeaderManip functions;
// response.go makeEnvoyRegexMatch), and the few more the model's router understands.
// Any other field set makes validateRouteConfig refuse the configuration as not
// modelled: the model cannot say whether Envoy takes it, nor what it would do.
var modelledRouteFields = map[protoreflect.FullName][]protoreflect.Name{
	"envoy.config.route.v3.RouteConfiguration": {"name", "virtual_hosts", "validate_clusters"},
	"envoy.config.route.v3.VirtualHost": {"name", "domains", "routes",
		"request_headers_to_add", "request_headers_to_remove", "response_headers_to_add", "response_headers_to_remove"},
	"envoy.config.route.v3.Route": {"match", "route",
		"request_headers_to_add", "request_headers_to_remove", "response_headers_to_add", "response_headers_to_remove"},
	"envoy.config.route.v3.RouteMatch": {"prefix", "path", "safe_regex", "case_sensitive", "headers", "query_parameters"},
	"envoy.config.route.v3.HeaderMatcher": {"name", "exact_match", "safe_regex_match", "prefix_match", "suffix_match",
		"contains_match", "string_match", "present_match", "invert_match"},
	"envoy.config.route.v3.QueryParameterMatcher":   {"name", "string_match", "present_match"},
	"envoy.type.matcher.v3.StringMatcher":           {"exact", "prefix", "suffix", "contains", "safe_regex", "ignore_case"},
	"envoy.type.matcher.v3.RegexMatcher":            {"google_re2", "regex"},
	"envoy.type.matcher.v3.RegexMatcher.GoogleRE2":  {},
	"envoy.type.matcher.v3.RegexMatchAndSubstitute": {"pattern", "substitution"},
	"envoy.config.route.v3.RouteAction": {"cluster", "weighted_clusters", "prefix_rewrite", "regex_rewrite",
		"host_rewrite_literal", "timeout", "idle_timeout", "retry_policy", "hash_policy"},
	"envoy.config.route.v3.WeightedCluster": {"clusters", "total_weight"},
	"envoy.config.route.v3.WeightedCluster.ClusterWeight": {"name", "weight",
		"request_headers_to_add", "request_headers_to_remove", "response_headers_to_add", "response_headers_to_remove"},
	"envoy.config.core.v3.HeaderValueOption": {"header", "append", "append_action", "keep_empty_value"},
	"envoy.config.core.v3.HeaderValue":       {"key", "value"},
	// Consul's retry policy and hash policies change neither the cluster a request
	// goes to nor what it carries; they are validated, not played.
	"envoy.config.route.v3.RetryPolicy":                                 {"num_retries", "retry_on", "retriable_status_codes"},
	"envoy.config.route.v3.RouteAction.HashPolicy":                      {"header", "cookie", "query_parameter", "connection_properties", "terminal"},
	"envoy.config.route.v3.RouteAction.HashPolicy.Header":               {"header_name"},
	"envoy.config.route.v3.RouteAction.HashPolicy.Cookie":               {"name", "ttl", "path"},
	"envoy.config.route.v3.RouteAction.HashPolicy.QueryParameter":       {"name"},
	"envoy.config.route.v3.RouteAction.HashPolicy.ConnectionProperties": {"source_ip"},
	"google.protobuf.BoolValue":                                         {"value"},
	"google.protobuf.UInt32Value":                                       {"value"},
	"google.protobuf.Duration":                                          {"seconds", "nanos"},
}

// unmodelledRouteFields refuses a route configuration with a field, or bytes of an
// unknown one, outside modelledRouteFields, naming each by its path.
func unmodelledRouteFields(rc proto.Message) error {
	if paths := unmodelledFields(rc.ProtoReflect(), string(rc.ProtoReflect().Descriptor().Name())); len(paths) > 0 {
		return fmt.Errorf("%w: route configuration fields %v", ErrNotModelled, paths)
	}
	return nil
}

func unmodelledFields(m protoreflect.Message, path string) []string {
	var out []string
	if len(m.GetUnknown()) > 0 {
		out = append(out, path+" (unknown fields)")
	}
	allowed, known := modelledRouteFields[m.Descriptor().FullName()]
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		where := path + "." + string(fd.Name())
		switch {
		case !known || !slices.Contains(allowed, fd.Name()):
			out = append(out, where)
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				out = append(out, unmodelledFields(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", where, i))...)
			}
		case fd.Message() != nil && !fd.IsMap():
			out = append(out, unmodelledFields(v.Message(), where)...)
		}
		return true
	})
	return out
}

// maxDurationSeconds is the largest duration Envoy takes, about 10,000 years
// (source/common/protobuf/utility.cc, validateDurationNoThrow).
const maxDurationSeconds = 315576000000

// validateDurations: Envoy converts a route's timeouts to milliseconds and refuses a
// negative or out-of-range duration (DurationUtil::durationToMilliseconds, "Duration
// out-of-range" and "Expected positive duration").
func validateDurations(action interface {
	GetTimeout() *durationpb.Duration
	GetIdleTimeout() *durationpb.Duration
}) error {
	var errs []error
	for _, f := range []struct {
		name string
		d    *durationpb.Duration
	}{{"timeout", action.GetTimeout()}, {"idle_timeout", action.GetIdleTimeout()}} {
		name, d := f.name, f.d
		if d == nil {
			continue
		}
		switch {
		case d.GetSeconds() < 0 || d.GetNanos() < 0:
			errs = append(errs, fmt.Errorf("%s: expected positive duration: %v", name, d))
		case d.GetSeconds() > maxDurationSeconds || d.GetNanos() > 999999999:
			errs = append(errs, fmt.Errorf("%s: duration out-of-range: %v", name, d))
		}
	}
	return errors.Join(errs...)
}
