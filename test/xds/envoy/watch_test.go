package envoy

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// fakeStream plays Consul's side of a Delta ADS stream: it hands out the responses
// sent to it and records the requests.
type fakeStream struct {
	grpc.ClientStream
	ctx       context.Context
	responses chan *discoveryv3.DeltaDiscoveryResponse
	requests  chan *discoveryv3.DeltaDiscoveryRequest
}

func newFakeStream() *fakeStream {
	return &fakeStream{responses: make(chan *discoveryv3.DeltaDiscoveryResponse), requests: make(chan *discoveryv3.DeltaDiscoveryRequest, 100)}
}

func (f *fakeStream) Send(r *discoveryv3.DeltaDiscoveryRequest) error {
	f.requests <- r
	return nil
}

func (f *fakeStream) Recv() (*discoveryv3.DeltaDiscoveryResponse, error) {
	select {
	case r := <-f.responses:
		return r, nil
	case <-f.ctx.Done():
		return nil, io.EOF
	}
}

// open hands the stream out once, bound to the stream's context as a gRPC stream is.
func (f *fakeStream) open(ctx context.Context) (adsStream, func(), error) {
	f.ctx = ctx
	return f, func() {}, nil
}

// next is the next request of a type, skipping the others.
func (f *fakeStream) next(t *testing.T, typeURL string) *discoveryv3.DeltaDiscoveryRequest {
	t.Helper()
	for {
		select {
		case r := <-f.requests:
			if r.GetTypeUrl() == typeURL {
				return r
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s request", typeURL)
		}
	}
}

// A watcher ACKs what it accepts, follows clusters with endpoint subscriptions, NACKs
// what Envoy refuses with the response's nonce, and then Config reports the refusal.
func TestWatcherAcksAndNacks(t *testing.T) {
	fake := newFakeStream()
	w := watch(t.Context(), fake.open, Proxy{ID: "gw", Node: "n"})
	defer w.Close()
	if first := fake.next(t, ClusterType); first.GetNode().GetId() != "gw" {
		t.Errorf("first request's node %v, want the proxy's", first.GetNode())
	}

	clusters := response(t, ClusterType, map[string]proto.Message{"a": edsCluster("a", noPanic)})
	clusters.Nonce = "c1"
	fake.responses <- clusters
	if ack := fake.next(t, ClusterType); ack.GetResponseNonce() != "c1" || ack.GetErrorDetail() != nil {
		t.Errorf("ACK %v, want nonce c1 and no error", ack)
	}
	if sub := fake.next(t, EndpointType); len(sub.GetResourceNamesSubscribe()) != 1 || sub.GetResourceNamesSubscribe()[0] != "a" {
		t.Errorf("endpoint subscription %v, want [a]", sub.GetResourceNamesSubscribe())
	}

	bad := response(t, ListenerType, map[string]proto.Message{
		"l1": listener(t, "l1", 80, chain(t, tcpFilter(t, "a"), false)),
		"l2": listener(t, "l2", 80, chain(t, tcpFilter(t, "a"), false)),
	})
	bad.Nonce = "l1"
	fake.responses <- bad
	if nack := fake.next(t, ListenerType); nack.GetResponseNonce() != "l1" || nack.GetErrorDetail() == nil {
		t.Errorf("NACK %v, want nonce l1 with an error", nack)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := w.Config(ctx, 10*time.Millisecond); !errors.Is(err, ErrRejected) {
		t.Errorf("Config: %v, want the rejection", err)
	}
}

// Config waits for every subscribed resource and a quiet stream, and later calls see
// updates.
func TestWatcherConfig(t *testing.T) {
	fake := newFakeStream()
	w := watch(t.Context(), fake.open, Proxy{ID: "gw"})
	defer w.Close()
	c := config("a")
	fake.responses <- response(t, ClusterType, map[string]proto.Message{"a": c.Clusters["a"]})
	fake.responses <- response(t, ListenerType, map[string]proto.Message{"tcp": listener(t, "tcp", 5432, chain(t, tcpFilter(t, "a"), false))})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := w.Config(ctx, 10*time.Millisecond); err == nil {
		t.Fatal("Config returned before the endpoints arrived")
	}
	fake.responses <- response(t, EndpointType, map[string]proto.Message{"a": c.Endpoints["a"]})
	got, err := w.Config(t.Context(), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if cluster, endpoint, err := ServeTCP(got, 5432, "", seeded()); err != nil || cluster != "a" || endpoint != "10.2.0.1:20000" {
		t.Errorf("ServeTCP: %s %s %v", cluster, endpoint, err)
	}
	fake.responses <- response(t, ClusterType, map[string]proto.Message{"b": edsCluster("b", noPanic)})
	fake.responses <- response(t, EndpointType, map[string]proto.Message{"b": c.Endpoints["a"]})
	if got, err = w.Config(t.Context(), 10*time.Millisecond); err != nil || got.Clusters["b"] == nil {
		t.Errorf("Config after an update: %v, clusters %d", err, len(got.Clusters))
	}
}
