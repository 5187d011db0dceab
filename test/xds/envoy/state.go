package envoy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// ErrRejected marks configuration Envoy refuses: it NACKs the response and keeps the
// last configuration it accepted.
var ErrRejected = errors.New("envoy would reject the response")

// state is what a Delta ADS stream delivered: the accepted resources by type URL and
// name, and the names subscribed to per type (nil: wildcard).
type state struct {
	resources  map[string]map[string]proto.Message
	subscribed map[string]map[string]bool
	// edsSince is when each cluster's endpoints were first asked for: Envoy waits
	// for them only its initial fetch timeout (initialFetchTimeout).
	edsSince map[string]time.Time
	// now is the clock; time.Now but in tests.
	now func() time.Time
}

func newState() *state {
	return &state{resources: map[string]map[string]proto.Message{}, subscribed: map[string]map[string]bool{},
		edsSince: map[string]time.Time{}, now: time.Now}
}

// defaultInitialFetchTimeout is Envoy's initial_fetch_timeout when a ConfigSource sets
// none (api/envoy/config/core/v3/config_source.proto): a warming cluster whose
// endpoints have not come by then is initialized without them, and Envoy goes on.
const defaultInitialFetchTimeout = 15 * time.Second

// initialFetchTimeout is how long Envoy waits for the endpoints of cluster name: its
// EDS config source's initial_fetch_timeout, the default when unset; 0 waits forever.
func (st *state) initialFetchTimeout(name string) time.Duration {
	c, ok := st.resources[ClusterType][name].(*clusterv3.Cluster)
	if !ok {
		return 0
	}
	d := c.GetEdsClusterConfig().GetEdsConfig().GetInitialFetchTimeout()
	if d == nil {
		return defaultInitialFetchTimeout
	}
	return d.AsDuration()
}

// gaveUpOn reports whether Envoy stopped waiting for the endpoints of cluster name,
// and otherwise how long it still waits (0: forever).
func (st *state) gaveUpOn(name string) (bool, time.Duration) {
	timeout := st.initialFetchTimeout(name)
	since, asked := st.edsSince[name]
	if timeout <= 0 || !asked {
		return false, 0
	}
	left := timeout - st.now().Sub(since)
	return left <= 0, left
}

// apply takes one response as Envoy does: it decodes and validates every resource and
// then the type's resources as a whole; on success they replace the type's previous
// ones, on failure nothing changes and the error (wrapping ErrRejected) is what
// Envoy would put in its NACK.
func (st *state) apply(resp *discoveryv3.DeltaDiscoveryResponse) error {
	next := maps.Clone(st.resources[resp.GetTypeUrl()])
	if next == nil {
		next = map[string]proto.Message{}
	}
	for _, r := range resp.GetResources() {
		msg, err := decode(r.GetResource())
		if err != nil {
			return fmt.Errorf("%w: %s %s: %w", ErrRejected, resp.GetTypeUrl(), r.GetName(), err)
		}
		next[r.GetName()] = msg
	}
	for _, name := range resp.GetRemovedResources() {
		delete(next, name)
	}
	if err := st.validate(resp.GetTypeUrl(), next, resp.GetResources()); err != nil {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	st.resources[resp.GetTypeUrl()] = next
	return nil
}

// validate runs the checks Envoy makes when it builds what a type describes: listener
// managers for LDS, route tables for RDS (each route configuration as it arrives,
// against the clusters known then).
func (st *state) validate(typeURL string, next map[string]proto.Message, changed []*discoveryv3.Resource) error {
	switch typeURL {
	case ListenerType:
		return validateListeners(typedValues[*listenerv3.Listener](next), st.clusterNames())
	case RouteType:
		var errs []error
		for _, r := range changed {
			rc := next[r.GetName()].(*routev3.RouteConfiguration)
			// RDS route tables are checked against clusters only if validate_clusters
			// says so; the field defaults to false for RDS.
			// (api/envoy/config/route/v3/route.proto, validate_clusters)
			errs = append(errs, validateRouteConfig(rc, rc.GetValidateClusters().GetValue(), st.clusterNames()))
		}
		return errors.Join(errs...)
	}
	return nil
}

func (st *state) clusterNames() map[string]bool {
	names := map[string]bool{}
	for name := range st.resources[ClusterType] {
		names[name] = true
	}
	return names
}

// decode unpacks a resource and runs the validation Envoy runs on every message (its
// protoc-gen-validate rules); nested typed configs are checked where they are used.
func decode(a *anypb.Any) (proto.Message, error) {
	msg, err := a.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if v, ok := msg.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return nil, fmt.Errorf("invalid: %w", err)
		}
	}
	return msg, nil
}

// edsClusters are the clusters whose endpoints come by EDS.
func (st *state) edsClusters() []string {
	var names []string
	for name, msg := range st.resources[ClusterType] {
		if msg.(*clusterv3.Cluster).GetType() == clusterv3.Cluster_EDS {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// routeNames are the route configurations the listeners' HTTP connection managers ask
// for by RDS.
func (st *state) routeNames() ([]string, error) {
	seen := map[string]bool{}
	for _, msg := range st.resources[ListenerType] {
		hcms, err := ConnectionManagers(msg.(*listenerv3.Listener))
		if err != nil {
			return nil, err
		}
		for _, h := range hcms {
			if rds := h.GetRds(); rds != nil {
				seen[rds.GetRouteConfigName()] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// missing names the subscribed resources not received yet; "" when there are none and
// Consul has answered the listener subscription. An answer may leave no listener (a
// gateway without routes has none in Consul 1.15): that is a configuration, in which
// every connection is refused, not a wait.
func (st *state) missing() string {
	if st.resources[ListenerType] == nil {
		return "no listener response yet"
	}
	var out []string
	for _, typeURL := range []string{EndpointType, RouteType} {
		for name := range st.subscribed[typeURL] {
			if _, ok := st.resources[typeURL][name]; ok {
				continue
			}
			if gaveUp, _ := st.gaveUpOn(name); typeURL == EndpointType && gaveUp {
				continue // initialized without endpoints, as Envoy does
			}
			out = append(out, typeURL+" "+name)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprint(out)
}

// nextGiveUp is how long until Envoy stops waiting for the endpoints of a cluster
// still missing them; 0 when it waits for none that way.
func (st *state) nextGiveUp() time.Duration {
	var next time.Duration
	for name := range st.subscribed[EndpointType] {
		if _, ok := st.resources[EndpointType][name]; ok {
			continue
		}
		if gaveUp, left := st.gaveUpOn(name); !gaveUp && left > 0 && (next == 0 || left < next) {
			next = left
		}
	}
	return next
}

// config copies the accepted resources out; the messages themselves are shared and
// never modified.
func (st *state) config() *Config {
	return &Config{
		Clusters:  typedMap[*clusterv3.Cluster](st.resources[ClusterType]),
		Endpoints: typedMap[*endpointv3.ClusterLoadAssignment](st.resources[EndpointType]),
		Listeners: typedMap[*listenerv3.Listener](st.resources[ListenerType]),
		Routes:    typedMap[*routev3.RouteConfiguration](st.resources[RouteType]),
	}
}

func typedMap[T proto.Message](in map[string]proto.Message) map[string]T {
	out := make(map[string]T, len(in))
	for name, m := range in {
		out[name] = m.(T)
	}
	return out
}

// typedValues lists a type's resources in name order, so errors come out stably.
func typedValues[T proto.Message](in map[string]proto.Message) []T {
	out := make([]T, 0, len(in))
	for _, name := range slices.Sorted(maps.Keys(in)) {
		out = append(out, in[name].(T))
	}
	return out
}
