package envoy

import (
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
)

// The rules Envoy applies when it adds or updates listeners from LDS, beyond the
// protoc-gen-validate ones. Breaking one makes Envoy refuse the update (a NACK).

// validateListeners checks a whole set of listeners as the listener manager would
// hold them; clusters are the known clusters, for inline route configurations.
func validateListeners(listeners []*listenerv3.Listener, clusters map[string]bool) error {
	errs := []error{duplicateAddresses(listeners)}
	for _, l := range listeners {
		if err := validateListener(l, clusters); err != nil {
			errs = append(errs, fmt.Errorf("listener %q: %w", l.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// duplicateAddresses: two listeners that bind the same address and port are refused.
// (source/server/listener_manager_impl.cc: "error adding listener: ... has duplicate
// address ... as existing listener".)
func duplicateAddresses(listeners []*listenerv3.Listener) error {
	var errs []error
	seen := map[string]string{}
	for _, l := range listeners {
		if b := l.GetBindToPort(); b != nil && !b.GetValue() {
			continue
		}
		key := socketKey(l.GetAddress().GetSocketAddress())
		if other, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("listener %q has duplicate address %s as existing listener %q", l.GetName(), key, other))
			continue
		}
		seen[key] = l.GetName()
	}
	return errors.Join(errs...)
}

func socketKey(a *corev3.SocketAddress) string {
	return fmt.Sprintf("%s %s:%d", a.GetProtocol(), a.GetAddress(), a.GetPortValue())
}

func validateListener(l *listenerv3.Listener, clusters map[string]bool) error {
	// A listener using the filter chain matcher picks chains by name; ServeHTTP
	// refuses it, so its chains need not be indexed here.
	errs := []error{}
	if l.GetFilterChainMatcher() == nil {
		errs = append(errs, validateFilterChainMatches(l.GetFilterChains()))
	}
	for _, chain := range allChains(l) {
		errs = append(errs, validateFilters(chain, clusters))
	}
	return errors.Join(errs...)
}

// validateFilterChainMatches: Envoy indexes filter chains by every combination of
// their match criteria, and refuses a listener where two chains (or one chain twice)
// claim the same combination; it also refuses partial wildcards in server_names (only
// "*.suffix" is a wildcard) and the unimplemented address_suffix and suffix_len.
// (source/server/filter_chain_manager_impl.cc, FilterChainManagerImpl::addFilterChains:
// "has the same matching rules defined as", "multiple filter chains with the same
// matching rules are defined", "partial wildcards are not supported in server_names",
// "contains unimplemented fields".)
func validateFilterChainMatches(chains []*listenerv3.FilterChain) error {
	var errs []error
	owner := map[string]int{}
	for i, chain := range chains {
		m := chain.GetFilterChainMatch()
		if m.GetAddressSuffix() != "" || m.GetSuffixLen() != nil {
			errs = append(errs, fmt.Errorf("filter chain %d %q contains unimplemented fields", i, chain.GetName()))
		}
		keys, err := matchKeys(m)
		if err != nil {
			errs = append(errs, fmt.Errorf("filter chain %d %q: %w", i, chain.GetName(), err))
			continue
		}
		for _, k := range keys {
			if j, dup := owner[k]; dup {
				errs = append(errs, fmt.Errorf("multiple filter chains with the same matching rules are defined (chains %d and %d)", j, i))
				break
			}
			owner[k] = i
		}
	}
	return errors.Join(errs...)
}

// matchKeys are the index entries a FilterChainMatch fills: one per combination of its
// criteria, an empty list counting as the catch-all entry.
func matchKeys(m *listenerv3.FilterChainMatch) ([]string, error) {
	names := []string{""}
	if len(m.GetServerNames()) > 0 {
		names = names[:0]
	}
	for _, n := range m.GetServerNames() {
		if strings.Contains(n, "*") && !strings.HasPrefix(n, "*.") {
			return nil, fmt.Errorf("partial wildcards are not supported in server_names: %q", n)
		}
		names = append(names, strings.TrimPrefix(strings.ToLower(n), "*"))
	}
	dst, err := cidrs(m.GetPrefixRanges())
	if err != nil {
		return nil, err
	}
	direct, err := cidrs(m.GetDirectSourcePrefixRanges())
	if err != nil {
		return nil, err
	}
	src, err := cidrs(m.GetSourcePrefixRanges())
	if err != nil {
		return nil, err
	}
	alpn := orCatchAll(m.GetApplicationProtocols())
	ports := []string{"0"}
	for i, p := range m.GetSourcePorts() {
		if i == 0 {
			ports = ports[:0]
		}
		ports = append(ports, fmt.Sprint(p))
	}
	keys := []string{fmt.Sprintf("port=%d|tp=%s|st=%s", m.GetDestinationPort().GetValue(), m.GetTransportProtocol(), m.GetSourceType())}
	for _, dim := range [][]string{dst, names, alpn, direct, src, ports} {
		keys = product(keys, dim)
	}
	return keys, nil
}

func product(keys, values []string) []string {
	out := make([]string, 0, len(keys)*len(values))
	for _, k := range keys {
		for _, v := range values {
			out = append(out, k+"|"+v)
		}
	}
	return out
}

// validateFilters checks the HTTP connection managers of a chain: their typed configs
// must decode and pass validation, the router must be the last HTTP filter, and an
// inline route configuration must build (its clusters validated by default).
func validateFilters(chain *listenerv3.FilterChain, clusters map[string]bool) error {
	var errs []error
	for _, f := range chain.GetFilters() {
		h, ok, err := connectionManager(f)
		if err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		if err := validateProto(h); err != nil {
			errs = append(errs, fmt.Errorf("http connection manager: %w", err))
			continue
		}
		errs = append(errs, validateHTTPFilters(h))
		if rc := h.GetRouteConfig(); rc != nil {
			// An inline route configuration validates clusters unless told not to.
			// (api/envoy/config/route/v3/route.proto, validate_clusters)
			validate := rc.GetValidateClusters() == nil || rc.GetValidateClusters().GetValue()
			errs = append(errs, validateRouteConfig(rc, validate, clusters))
		}
	}
	return errors.Join(errs...)
}

// validateHTTPFilters: the router is a terminal filter and must come last.
// (source/common/config/utility.h, Utility::validateTerminalFilters: "terminal filter
// named ... must be the last filter in a http filter chain".)
func validateHTTPFilters(h *hcmv3.HttpConnectionManager) error {
	filters := h.GetHttpFilters()
	for i, f := range filters {
		if f.GetTypedConfig().MessageIs(&routerv3.Router{}) && i != len(filters)-1 {
			return fmt.Errorf("terminal filter named %s must be the last filter in a http filter chain", f.GetName())
		}
	}
	return nil
}

func validateProto(m proto.Message) error {
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		return v.ValidateAll()
	}
	return nil
}
