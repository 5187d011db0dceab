package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// The controller's Consul Enterprise flags, given to a read-only command, become the
// options of its Consul queries: the partition always, every namespace ("*") for the
// list of entries when the entries go to namespaces, and the service's own namespace
// for a read of its instances.
func TestConsulNamingFlagsReachTheQueries(t *testing.T) {
	for _, tc := range []struct {
		name        string
		flags       []string
		wantEntries consulapi.QueryOptions
		wantService consulapi.QueryOptions // of a service of Kubernetes namespace shop
	}{{
		name: "none (Consul CE)",
	}, {
		name:        "partition",
		flags:       []string{"--consul-partition=team-a"},
		wantEntries: consulapi.QueryOptions{Partition: "team-a"},
		wantService: consulapi.QueryOptions{Partition: "team-a"},
	}, {
		name:        "destination namespace",
		flags:       []string{"--consul-destination-namespace=gateways", "--consul-partition=team-a"},
		wantEntries: consulapi.QueryOptions{Partition: "team-a", Namespace: "*"},
		wantService: consulapi.QueryOptions{Partition: "team-a", Namespace: "gateways"},
	}, {
		name:        "mirrored namespaces",
		flags:       []string{"--consul-mirror-namespaces", "--consul-mirror-namespaces-prefix=k8s-"},
		wantEntries: consulapi.QueryOptions{Namespace: "*"},
		wantService: consulapi.QueryOptions{Namespace: "k8s-shop"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, command := range []string{"status", "explain", "collect"} {
				var f statusFlags
				if err := readerFlags(command, io.Discard, &f).Parse(tc.flags); err != nil {
					t.Fatal(err)
				}
				if diff := gocmp.Diff(where(&tc.wantEntries), where(entriesQuery(f.consulNaming))); diff != "" {
					t.Errorf("%s: the entries' query (-want +got):\n%s", command, diff)
				}
				if diff := gocmp.Diff(where(&tc.wantService), where(serviceQuery(f.consulNaming, "shop"))); diff != "" {
					t.Errorf("%s: the service's query (-want +got):\n%s", command, diff)
				}
			}
		})
	}
}

// where is where in Consul a query asks.
func where(q *consulapi.QueryOptions) [2]string {
	return [2]string{"partition=" + q.Partition, "ns=" + q.Namespace}
}

// A Consul that accepts connections and never answers holds a read for
// --consul-timeout, no longer, and the reader then asks nothing more: a command run
// because Consul is in trouble answers within one timeout.
func TestConsulReaderIsBounded(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0") // the kernel accepts; nobody reads
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	client, err := consulapi.NewClient(&consulapi.Config{Address: silent.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	r := &consulReader{client: client, timeout: 300 * time.Millisecond}
	started := time.Now()
	_, err = ownedEntries(context.Background(), r, translate.Ownership{Controller: "example.com/gateway", ClusterID: "local"})
	took := time.Since(started)
	const want = "Consul not reached: no answer within 300ms (--consul-timeout)"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("ownedEntries: %v; want %q", err, want)
	}
	// Three kinds are listed; the first failure ends the reading.
	if took > 2*time.Second {
		t.Errorf("ownedEntries took %s with a 300ms timeout", took)
	}
	asked := false
	if err := r.do(context.Background(), func(context.Context) error { asked = true; return nil }); err == nil || asked {
		t.Errorf("after a failure the reader asked again (%v) or forgot the failure (%v)", asked, err)
	}
}

// Consul's refusals and a Consul that cannot be reached are told apart.
func TestConsulFailureWords(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{consulapi.StatusError{Code: 400, Body: `Invalid query parameter: "partition" - Partitions are a Consul Enterprise feature`},
			`Consul refused the query: Unexpected response code: 400 (Invalid query parameter: "partition" - Partitions are a Consul Enterprise feature)`},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), "Consul not reached: dial tcp 127.0.0.1:1: connect: connection refused"},
	} {
		if got := (consulFailure{err: tc.err, timeout: time.Second}).Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// -n defaults to the namespace of the kubeconfig's current context, as kubectl's.
func TestContextNamespace(t *testing.T) {
	for _, tc := range []struct{ context, want string }{
		{context: "{cluster: c, user: u, namespace: team-a}", want: "team-a"},
		{context: "{cluster: c, user: u}", want: "default"},
	} {
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: `+tc.context+`}]
current-context: c
`), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := contextNamespace(kubeconfig)
		if err != nil || got != tc.want {
			t.Errorf("context %s: namespace %q, %v; want %q", tc.context, got, err, tc.want)
		}
	}
}

// status --problems keeps an object when one of its conditions, or one of Consul's on
// its entries, is not in its good state, or when it disagrees with Consul.
func TestHasProblem(t *testing.T) {
	ok := func(typ string) Condition { return Condition{Type: typ, Status: string(goodStatus(typ))} }
	with := func(typ, status string) Condition { return Condition{Type: typ, Status: status} }
	for _, tc := range []struct {
		name string
		o    ObjectReport
		want bool
	}{
		{"all good", ObjectReport{Conditions: []Condition{ok("Accepted"), ok("Programmed"), ok("Conflicted")},
			Entries: []EntryReport{{Conditions: []Condition{ok("Accepted"), ok("Bound"), ok("Conflicted")}}}}, false},
		{"Accepted False", ObjectReport{Conditions: []Condition{with("Accepted", "False")}}, true},
		{"Programmed Unknown", ObjectReport{Conditions: []Condition{ok("Accepted"), with("Programmed", "Unknown")}}, true},
		{"ResolvedRefs False on a listener", ObjectReport{Conditions: []Condition{{On: "listener http", Type: "ResolvedRefs", Status: "False"}}}, true},
		{"Conflicted True", ObjectReport{Conditions: []Condition{with("Conflicted", "True")}}, true},
		{"Consul's Bound False", ObjectReport{Conditions: []Condition{ok("Accepted")},
			Entries: []EntryReport{{Conditions: []Condition{ok("Accepted"), with("Bound", "False")}}}}, true},
		{"a disagreement", ObjectReport{Conditions: []Condition{ok("Accepted")}, Disagreements: []string{"no entry"}}, true},
	} {
		if got := tc.o.HasProblem(); got != tc.want {
			t.Errorf("%s: HasProblem %v, want %v", tc.name, got, tc.want)
		}
	}
}
