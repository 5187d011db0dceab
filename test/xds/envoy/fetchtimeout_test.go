package envoy

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Envoy waits for a warming cluster's endpoints only its EDS config source's
// initial_fetch_timeout (15 s when unset), then initializes the cluster without them
// and goes on; a timeout of 0 waits forever. The model counts endpoints it no longer
// waits for as not missing, and says when the wait ends.
func TestInitialFetchTimeout(t *testing.T) {
	withTimeout := func(name string, d *durationpb.Duration) *clusterv3.Cluster {
		c := edsCluster(name, nil)
		c.EdsClusterConfig = &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{InitialFetchTimeout: d}}
		return c
	}
	tests := []struct {
		name    string
		cluster *clusterv3.Cluster
		after   time.Duration
		missing bool
		next    time.Duration
	}{
		{"default, waiting", edsCluster("c", nil), 10 * time.Second, true, 5 * time.Second},
		{"default, given up", edsCluster("c", nil), 15 * time.Second, false, 0},
		{"set, waiting", withTimeout("c", durationpb.New(time.Minute)), 30 * time.Second, true, 30 * time.Second},
		{"set, given up", withTimeout("c", durationpb.New(time.Second)), 2 * time.Second, false, 0},
		{"zero: forever", withTimeout("c", durationpb.New(0)), time.Hour, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			st := newState()
			st.now = func() time.Time { return start }
			st.resources[ClusterType] = map[string]proto.Message{"c": tt.cluster}
			st.resources[ListenerType] = map[string]proto.Message{"l": &listenerv3.Listener{Name: "l"}}
			st.subscribed[EndpointType] = map[string]bool{"c": true}
			st.edsSince["c"] = start
			st.now = func() time.Time { return start.Add(tt.after) }
			if got := st.missing() != ""; got != tt.missing {
				t.Errorf("missing %q after %s, want missing %v", st.missing(), tt.after, tt.missing)
			}
			if got := st.nextGiveUp(); got != tt.next {
				t.Errorf("next give-up in %s, want %s", got, tt.next)
			}
		})
	}
}
