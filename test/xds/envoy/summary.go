package envoy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Summarize renders a golden file (Normalize's output) as Markdown a reader can check
// against the Gateway API objects: each listener by port, and for HTTP listeners each
// virtual host's domains and its routes in the order Envoy tries them.
func Summarize(golden []byte) (string, error) {
	var doc struct {
		Listeners map[string]node `json:"listeners"`
		Routes    map[string]node `json:"routes"`
	}
	if err := json.Unmarshal(golden, &doc); err != nil {
		return "", fmt.Errorf("read golden file: %w", err)
	}
	var b strings.Builder
	listeners := slices.Collect(func(yield func(node) bool) {
		for _, l := range doc.Listeners {
			if !yield(l) {
				return
			}
		}
	})
	slices.SortFunc(listeners, func(a, b node) int {
		return int(a.get("address", "socketAddress", "portValue").num() - b.get("address", "socketAddress", "portValue").num())
	})
	for _, l := range listeners {
		summarizeListener(&b, l, doc.Routes)
	}
	return b.String(), nil
}

func summarizeListener(b *strings.Builder, l node, routes map[string]node) {
	port := int(l.get("address", "socketAddress", "portValue").num())
	for _, chain := range l.get("filterChains").list() {
		tls := ""
		if len(chain.get("transportSocket", "typedConfig", "commonTlsContext", "tlsCertificates").list()) > 0 {
			tls = ", TLS with the certificate and key of the listener's Secret inline"
		}
		for _, f := range chain.get("filters").list() {
			tc := f.get("typedConfig")
			switch f.get("name").str() {
			case "envoy.filters.network.tcp_proxy":
				fmt.Fprintf(b, "- Port %d: TCP proxy to `%s`%s.\n", port, serviceOfCluster(tc.get("cluster").str()), tls)
			case "envoy.filters.network.http_connection_manager":
				name := tc.get("rds", "routeConfigName").str()
				fmt.Fprintf(b, "- Port %d: HTTP%s, routes `%s`:\n", port, tls, name)
				summarizeRoutes(b, routes[name])
			default:
				fmt.Fprintf(b, "- Port %d: filter %s.\n", port, f.get("name").str())
			}
		}
	}
}

func summarizeRoutes(b *strings.Builder, rc node) {
	b.WriteString("\n  | Domains | Match | Action |\n  |---|---|---|\n")
	for _, vh := range rc.get("virtualHosts").list() {
		var domains []string
		for _, d := range vh.get("domains").list() {
			domains = append(domains, "`"+d.str()+"`")
		}
		for i, r := range vh.get("routes").list() {
			cell := ""
			if i == 0 {
				cell = strings.Join(domains, " ")
			}
			fmt.Fprintf(b, "  | %s | %s | %s |\n", cell, summarizeMatch(r.get("match")), summarizeAction(r))
		}
	}
	b.WriteString("\n")
}

func summarizeMatch(m node) string {
	var parts []string
	switch {
	case m.get("prefix").str() != "":
		parts = append(parts, "prefix `"+m.get("prefix").str()+"`")
	case m.get("path").str() != "":
		parts = append(parts, "path `"+m.get("path").str()+"`")
	case m.get("safeRegex").present():
		parts = append(parts, "regex `"+m.get("safeRegex", "regex").str()+"`")
	}
	for _, h := range m.get("headers").list() {
		value := h.get("exactMatch").str()
		if value == "" {
			value = "~" + h.get("safeRegexMatch", "regex").str()
		}
		parts = append(parts, fmt.Sprintf("header `%s: %s`", h.get("name").str(), value))
	}
	for _, q := range m.get("queryParameters").list() {
		parts = append(parts, fmt.Sprintf("query `%s=%s`", q.get("name").str(), q.get("stringMatch", "exact").str()))
	}
	return strings.Join(parts, ", ")
}

func summarizeAction(r node) string {
	a := r.get("route")
	var parts []string
	if c := a.get("cluster").str(); c != "" {
		parts = append(parts, "`"+serviceOfCluster(c)+"`")
	}
	for _, c := range a.get("weightedClusters", "clusters").list() {
		parts = append(parts, fmt.Sprintf("`%s` weight %d", serviceOfCluster(c.get("name").str()), int(c.get("weight").num())))
	}
	if rw := a.get("prefixRewrite").str(); rw != "" {
		parts = append(parts, "prefix rewritten to `"+rw+"`")
	}
	for _, h := range r.get("requestHeadersToAdd").list() {
		verb := "set"
		if h.get("append").raw == true {
			verb = "add"
		}
		parts = append(parts, fmt.Sprintf("%s header `%s: %s`", verb, h.get("header", "key").str(), h.get("header", "value").str()))
	}
	for _, h := range r.get("requestHeadersToRemove").list() {
		parts = append(parts, "remove header `"+h.str()+"`")
	}
	return strings.Join(parts, ", ")
}

// serviceOfCluster shortens a Consul cluster name to the service (ServiceOfCluster),
// and names the subset after it when there is one.
func serviceOfCluster(name string) string {
	service, subset := ServiceOfCluster(name)
	if subset != "" {
		return service + " (subset " + subset + ")"
	}
	return service
}

// ServiceOfCluster is the Consul service and subset of an upstream cluster: Consul
// names one "<service>.<namespace>.<dc>.internal.<trust domain>", and one of a
// subset "<subset>.<service>.<namespace>.<dc>.internal.<trust domain>".
func ServiceOfCluster(name string) (service, subset string) {
	parts := strings.Split(name, ".")
	if len(parts) > 4 && parts[4] == "internal" {
		return parts[1], parts[0]
	}
	return parts[0], ""
}

// node is a step through decoded JSON that tolerates missing fields.
type node struct{ raw any }

func (n *node) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &n.raw) }

func (n node) get(path ...string) node {
	cur := n.raw
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return node{}
		}
		cur = m[p]
	}
	return node{cur}
}

func (n node) present() bool { return n.raw != nil }

func (n node) str() string {
	s, _ := n.raw.(string)
	return s
}

func (n node) num() float64 {
	f, _ := n.raw.(float64)
	return f
}

func (n node) list() []node {
	l, _ := n.raw.([]any)
	out := make([]node, len(l))
	for i, v := range l {
		out[i] = node{v}
	}
	return out
}
