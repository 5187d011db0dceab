package envoy

import (
	"errors"
	"fmt"
	"math"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// The rules Envoy applies when it builds a route table from a RouteConfiguration,
// beyond the protoc-gen-validate ones decode runs. Breaking any of them makes Envoy
// refuse the whole route configuration (a NACK) and keep serving the previous one.
// Source: source/common/router/config_impl.cc (RouteMatcher, RouteEntryImplBase) in
// envoyproxy/envoy, the 1.22-1.25 releases Consul 1.15 serves.

// validateRouteConfig checks a route configuration as Envoy builds it. When
// validateClusters is set, every cluster a route names must be among clusters.
func validateRouteConfig(rc *routev3.RouteConfiguration, validateClusters bool, clusters map[string]bool) error {
	if err := unmodelledRouteFields(rc); err != nil {
		return fmt.Errorf("route configuration %q: %w", rc.GetName(), err)
	}
	errs := []error{validateDomains(rc), validateLevelHeaders("route configuration", rc)}
	for _, vh := range rc.GetVirtualHosts() {
		errs = append(errs, validateLevelHeaders(fmt.Sprintf("virtual host %q", vh.GetName()), vh))
		for i, r := range vh.GetRoutes() {
			if err := validateRoute(r, validateClusters, clusters); err != nil {
				errs = append(errs, fmt.Errorf("virtual host %q route %d: %w", vh.GetName(), i, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("route configuration %q: %w", rc.GetName(), err)
	}
	return nil
}

// validateDomains: RouteMatcher files each lower-cased domain under "*" (the default
// virtual host), a suffix wildcard ("*" first), a prefix wildcard ("*" last) or an
// exact name, and refuses a second "*" and any domain filed twice, in one virtual
// host or across several. (config_impl.cc, RouteMatcher::RouteMatcher: "Only a
// single wildcard domain is permitted", "Only unique values for domains are
// permitted"; the VirtualHost.domains doc in route_components.proto says the same.)
func validateDomains(rc *routev3.RouteConfiguration) error {
	var errs []error
	seen := map[string]string{} // filing key -> virtual host
	for _, vh := range rc.GetVirtualHosts() {
		for _, d := range vh.GetDomains() {
			key := domainKey(strings.ToLower(d))
			if other, dup := seen[key]; dup {
				errs = append(errs, duplicateDomain(d, other, vh.GetName()))
				continue
			}
			seen[key] = vh.GetName()
		}
	}
	return errors.Join(errs...)
}

// domainKey is where RouteMatcher files a domain; equal keys collide.
func domainKey(d string) string {
	switch {
	case d == "*":
		return "default"
	case strings.HasPrefix(d, "*"):
		return "suffix " + d[1:]
	case strings.HasSuffix(d, "*"):
		return "prefix " + d[:len(d)-1]
	}
	return "exact " + d
}

func duplicateDomain(d, first, second string) error {
	if d == "*" {
		return fmt.Errorf("only a single wildcard domain \"*\" is permitted (virtual hosts %q and %q)", first, second)
	}
	return fmt.Errorf("only unique values for domains are permitted: %q in virtual hosts %q and %q", d, first, second)
}

// validateRoute checks what Envoy checks when it builds one route entry.
func validateRoute(r *routev3.Route, validateClusters bool, clusters map[string]bool) error {
	errs := []error{validateRegexes(r.GetMatch()), validateLevelHeaders("route", r)}
	action := r.GetRoute()
	for _, wc := range action.GetWeightedClusters().GetClusters() {
		errs = append(errs, validateLevelHeaders(fmt.Sprintf("weighted cluster %q", wc.GetName()), wc))
	}
	if action == nil {
		return errors.Join(errs...)
	}
	// RouteEntryImplBase: a prefix and a regex rewrite together are refused.
	if action.GetPrefixRewrite() != "" && action.GetRegexRewrite() != nil {
		errs = append(errs, errors.New("cannot specify both prefix_rewrite and regex_rewrite"))
	}
	if rw := action.GetRegexRewrite(); rw != nil {
		errs = append(errs, compileErr(rw.GetPattern().GetRegex()))
	}
	errs = append(errs, validateWeights(action.GetWeightedClusters()), validateDurations(action))
	if validateClusters {
		errs = append(errs, unknownClusters(action, clusters))
	}
	return errors.Join(errs...)
}

// validateWeights: the weights of weighted clusters must add up to more than 0 and
// at most the uint32 maximum. (config_impl.cc: "Sum of weights in the
// weighted_cluster must be greater than 0."; WeightedCluster.ClusterWeight.weight in
// route_components.proto.) The deprecated total_weight is not checked by these
// releases.
func validateWeights(wc *routev3.WeightedCluster) error {
	if wc == nil {
		return nil
	}
	var total uint64
	for _, c := range wc.GetClusters() {
		total += uint64(c.GetWeight().GetValue())
	}
	switch {
	case total == 0:
		return errors.New("sum of weights in the weighted_cluster must be greater than 0")
	case total > math.MaxUint32:
		return fmt.Errorf("sum of weights in the weighted_cluster %d exceeds %d", total, uint64(math.MaxUint32))
	}
	return nil
}

// unknownClusters: with validate_clusters, a route naming a cluster the cluster
// manager does not have is refused. (config_impl.cc, RouteEntryImplBase::validateClusters:
// "route: unknown cluster", "route: unknown weighted cluster".)
func unknownClusters(action *routev3.RouteAction, clusters map[string]bool) error {
	var errs []error
	if c := action.GetCluster(); c != "" && !clusters[c] {
		errs = append(errs, fmt.Errorf("route: unknown cluster %q", c))
	}
	for _, c := range action.GetWeightedClusters().GetClusters() {
		if c.GetName() != "" && !clusters[c.GetName()] {
			errs = append(errs, fmt.Errorf("route: unknown weighted cluster %q", c.GetName()))
		}
	}
	return errors.Join(errs...)
}

// validateRegexes: Envoy compiles every RE2 expression of a match when it builds the
// route and refuses one that does not compile (source/common/common/regex.cc).
func validateRegexes(m *routev3.RouteMatch) error {
	var errs []error
	if re := m.GetSafeRegex(); re != nil {
		errs = append(errs, compileErr(re.GetRegex()))
	}
	for _, h := range m.GetHeaders() {
		if re := h.GetSafeRegexMatch(); re != nil { //nolint:staticcheck // Consul 1.15 sends the deprecated matcher.
			errs = append(errs, compileErr(re.GetRegex()))
		}
		errs = append(errs, stringMatcherRegex(h.GetStringMatch()))
	}
	for _, q := range m.GetQueryParameters() {
		errs = append(errs, stringMatcherRegex(q.GetStringMatch()))
	}
	return errors.Join(errs...)
}

func stringMatcherRegex(m *matcherv3.StringMatcher) error {
	if re := m.GetSafeRegex(); re != nil {
		return compileErr(re.GetRegex())
	}
	return nil
}

// compileErr: what RE2 as Envoy 1.27 builds it refuses to compile. Go's regexp is
// RE2's syntax but for "(?<name>...)", which RE2 accepts only from its 2023-09-01
// release on, after the one Envoy 1.27 was built with ("invalid perl operator: (?<").
// RE2's own memory budget (8 MiB by default, which Envoy keeps) also refuses very
// large programs ("pattern too large - compile failed", for example \pL{500}); Go has
// no such budget and this model does not check it. Envoy's own program size limit does
// not refuse anything here: consul-dataplane's bootstrap raises
// re2.max_program_size.error_level to 1048576, above what RE2's budget lets compile.
func compileErr(expr string) error {
	if _, err := compileRE2(expr); err != nil {
		return err
	}
	if angleNamedGroup(expr) {
		return fmt.Errorf("regex %q: invalid perl operator: (?<", expr)
	}
	return nil
}

// angleNamedGroup reports whether expr, which Go compiles, has a "(?<" outside escapes
// and character classes: Go compiles no lookbehind, so that is a named group.
func angleNamedGroup(expr string) bool {
	inClass := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case strings.HasPrefix(expr[i:], `\Q`):
			end := strings.Index(expr[i:], `\E`)
			if end < 0 {
				return false
			}
			i += end + 1
		case c == '\\':
			i++
		case inClass && strings.HasPrefix(expr[i:], "[:"):
			if end := strings.Index(expr[i:], ":]"); end > 0 {
				i += end + 1
			}
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
			if strings.HasPrefix(expr[i+1:], "^") {
				i++
			}
			if strings.HasPrefix(expr[i+1:], "]") {
				i++
			}
		case strings.HasPrefix(expr[i:], "(?<"):
			return true
		}
	}
	return false
}

func validateLevelHeaders(where string, l headerLevel) error {
	return errors.Join(validateHeaderOps(where+" request headers", requestOps(l)), validateHeaderOps(where+" response headers", responseOps(l)))
}
