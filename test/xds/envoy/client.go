package envoy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// The xDS resource types a gateway's Envoy asks for.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
)

// envoyVersion is the Envoy the client claims to be: Consul 1.15 serves only the Envoy
// releases it supports, 1.22 to 1.25.
var envoyVersion = &corev3.BuildVersion{Version: &typev3.SemanticVersion{MajorNumber: 1, MinorNumber: 25, Patch: 4}}

// Proxy names the gateway instance the client speaks for: the catalog registration's
// service ID and node, as consul-dataplane sends them.
type Proxy struct {
	ID   string
	Node string
}

// Config is everything Consul served one proxy, by type and resource name.
type Config struct {
	Clusters  map[string]*clusterv3.Cluster
	Endpoints map[string]*endpointv3.ClusterLoadAssignment
	Listeners map[string]*listenerv3.Listener
	Routes    map[string]*routev3.RouteConfiguration
}

// Fetch acts as the proxy's Envoy: it opens a Delta ADS stream to Consul's gRPC address,
// subscribes to clusters and listeners (wildcard) and to the endpoints and route
// configurations they name, as Envoy does, validates and ACKs every response (a resource
// Envoy would refuse is NACKed and fails the fetch), and returns the configuration once
// every subscribed resource has arrived and Consul has said nothing more for quiet.
func Fetch(ctx context.Context, grpcAddr string, proxy Proxy, quiet time.Duration) (*Config, error) {
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial consul gRPC %s: %w", grpcAddr, err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("open delta ADS stream: %w", err)
	}
	s := newSession(stream, proxy)
	if err := s.subscribe(ClusterType, nil); err != nil {
		return nil, err
	}
	if err := s.subscribe(ListenerType, nil); err != nil {
		return nil, err
	}
	return s.collect(ctx, quiet)
}

// session is one Delta ADS stream and what it received.
type session struct {
	stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node   *corev3.Node
	// sentNode: only the first request of a stream carries the node.
	sentNode bool
	// resources by type URL and name, and the names subscribed to per type.
	resources  map[string]map[string]proto.Message
	subscribed map[string]map[string]bool
}

func newSession(stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient, proxy Proxy) *session {
	return &session{
		stream: stream,
		node: &corev3.Node{
			Id:                   proxy.ID,
			Cluster:              proxy.ID,
			UserAgentName:        "envoy",
			UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: envoyVersion},
			Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
				"node_name": structpb.NewStringValue(proxy.Node),
			}},
		},
		resources:  map[string]map[string]proto.Message{},
		subscribed: map[string]map[string]bool{},
	}
}

func (s *session) send(req *discoveryv3.DeltaDiscoveryRequest) error {
	if !s.sentNode {
		req.Node = s.node
		s.sentNode = true
	}
	if err := s.stream.Send(req); err != nil {
		return fmt.Errorf("send %s request: %w", req.TypeUrl, err)
	}
	return nil
}

// subscribe asks for a type: nil names is Envoy's wildcard subscription (clusters and
// listeners); otherwise it adds and removes names to match exactly.
func (s *session) subscribe(typeURL string, names []string) error {
	if names == nil {
		s.subscribed[typeURL] = nil
		return s.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL})
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	have, known := s.subscribed[typeURL]
	var add, remove []string
	for n := range want {
		if !have[n] {
			add = append(add, n)
		}
	}
	for n := range have {
		if !want[n] {
			remove = append(remove, n)
		}
	}
	if known && len(add) == 0 && len(remove) == 0 {
		return nil
	}
	s.subscribed[typeURL] = want
	slices.Sort(add)
	slices.Sort(remove)
	return s.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: add, ResourceNamesUnsubscribe: remove})
}

type received struct {
	resp *discoveryv3.DeltaDiscoveryResponse
	err  error
}

// collect applies responses until every subscription is complete and the stream has
// been quiet for quiet.
func (s *session) collect(ctx context.Context, quiet time.Duration) (*Config, error) {
	responses := make(chan received)
	go func() {
		for {
			resp, err := s.stream.Recv()
			select {
			case responses <- received{resp, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("xDS not complete (%s): %w", s.missing(), ctx.Err())
		case r := <-responses:
			if r.err != nil {
				return nil, fmt.Errorf("delta ADS stream: %w", r.err)
			}
			if err := s.apply(r.resp); err != nil {
				return nil, err
			}
			timer.Reset(quiet)
		case <-timer.C:
			if s.missing() == "" {
				return s.config()
			}
			timer.Reset(quiet)
		}
	}
}

// apply takes one response: it refuses (NACKs) a resource that Envoy's own validation
// rejects, ACKs the rest, and follows the clusters and listeners with endpoint and
// route subscriptions.
func (s *session) apply(resp *discoveryv3.DeltaDiscoveryResponse) error {
	byName := s.resources[resp.TypeUrl]
	if byName == nil {
		byName = map[string]proto.Message{}
		s.resources[resp.TypeUrl] = byName
	}
	for _, r := range resp.Resources {
		msg, err := decode(r.Resource)
		if err != nil {
			return s.nack(resp, fmt.Errorf("%s %s: %w", resp.TypeUrl, r.Name, err))
		}
		byName[r.Name] = msg
	}
	for _, name := range resp.RemovedResources {
		delete(byName, name)
	}
	if err := s.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce}); err != nil {
		return err
	}
	switch resp.TypeUrl {
	case ClusterType:
		return s.subscribe(EndpointType, s.edsClusters())
	case ListenerType:
		names, err := s.routeNames()
		if err != nil {
			return err
		}
		return s.subscribe(RouteType, names)
	}
	return nil
}

// nack tells Consul the response was refused, as Envoy would, and fails the fetch.
func (s *session) nack(resp *discoveryv3.DeltaDiscoveryResponse, cause error) error {
	_ = s.send(&discoveryv3.DeltaDiscoveryRequest{
		TypeUrl:       resp.TypeUrl,
		ResponseNonce: resp.Nonce,
		ErrorDetail:   &statuspb.Status{Code: 3, Message: cause.Error()},
	})
	return fmt.Errorf("envoy would reject the response: %w", cause)
}

// decode unpacks a resource and runs the validation Envoy runs on it (its
// protoc-gen-validate rules); nested typed configs are checked by Normalize.
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
func (s *session) edsClusters() []string {
	var names []string
	for name, msg := range s.resources[ClusterType] {
		c := msg.(*clusterv3.Cluster)
		if c.GetType() == clusterv3.Cluster_EDS {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// routeNames are the route configurations the listeners' HTTP connection managers ask
// for by RDS.
func (s *session) routeNames() ([]string, error) {
	seen := map[string]bool{}
	for _, msg := range s.resources[ListenerType] {
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
// Consul sent at least one listener.
func (s *session) missing() string {
	if len(s.resources[ListenerType]) == 0 {
		return "no listener yet"
	}
	var out []string
	for _, typeURL := range []string{EndpointType, RouteType} {
		for name := range s.subscribed[typeURL] {
			if _, ok := s.resources[typeURL][name]; !ok {
				out = append(out, typeURL+" "+name)
			}
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprint(out)
}

func (s *session) config() (*Config, error) {
	c := &Config{
		Clusters:  map[string]*clusterv3.Cluster{},
		Endpoints: map[string]*endpointv3.ClusterLoadAssignment{},
		Listeners: map[string]*listenerv3.Listener{},
		Routes:    map[string]*routev3.RouteConfiguration{},
	}
	for name, m := range s.resources[ClusterType] {
		c.Clusters[name] = m.(*clusterv3.Cluster)
	}
	for name, m := range s.resources[EndpointType] {
		c.Endpoints[name] = m.(*endpointv3.ClusterLoadAssignment)
	}
	for name, m := range s.resources[ListenerType] {
		c.Listeners[name] = m.(*listenerv3.Listener)
	}
	for name, m := range s.resources[RouteType] {
		c.Routes[name] = m.(*routev3.RouteConfiguration)
	}
	return c, nil
}

// ConnectionManagers are the HTTP connection managers of a listener's filter chains.
func ConnectionManagers(l *listenerv3.Listener) ([]*hcmv3.HttpConnectionManager, error) {
	var out []*hcmv3.HttpConnectionManager
	for _, chain := range l.GetFilterChains() {
		for _, f := range chain.GetFilters() {
			tc := f.GetTypedConfig()
			if tc == nil || !tc.MessageIs(&hcmv3.HttpConnectionManager{}) {
				continue
			}
			h := &hcmv3.HttpConnectionManager{}
			if err := tc.UnmarshalTo(h); err != nil {
				return nil, errors.Join(fmt.Errorf("listener %s: http connection manager", l.GetName()), err)
			}
			out = append(out, h)
		}
	}
	return out, nil
}
