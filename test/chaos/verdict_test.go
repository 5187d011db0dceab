package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	gosync "sync"

	consulapi "github.com/hashicorp/consul/api"
)

// The convergence and no-lost-delete checks judge what Consul holds. A restarted
// Consul restores its last snapshot, then applies the rest of its log as the new
// leader, and a read in the default consistency mode can answer in between with an
// older state (docs/reliability.md, "What it does not see"): a verdict resting on it
// could pass on entries Consul is about to replace. So those checks read with
// verdictConsul, whose every read must be consistent (it waits for the leader's
// barrier, which applies the whole log).

// errInconsistentRead is what verdictConsul answers to a read that did not ask for
// consistency: a verdict must not rest on it, so the run fails instead.
var errInconsistentRead = errors.New("a verdict read of Consul that is not consistent")

// consistentOnly refuses any read that does not ask for consistency.
type consistentOnly struct{ next http.RoundTripper }

func (c consistentOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, consistent := req.URL.Query()["consistent"]; req.Method == http.MethodGet && !consistent {
		return nil, fmt.Errorf("%w: GET %s", errInconsistentRead, req.URL.Path)
	}
	return c.next.RoundTrip(req)
}

var verdictClient struct {
	once   gosync.Once
	client *consulapi.Client
	err    error
}

// verdictConsul is the client the checks read Consul's state with.
func verdictConsul() (*consulapi.Client, error) {
	verdictClient.once.Do(func() {
		cfg := consulapi.DefaultNonPooledConfig()
		cfg.Address = env.Consul.HTTPAddr()
		cfg.Scheme = "http"
		cfg.Token = env.Consul.ManagementToken()
		cfg.TokenFile = ""
		cfg.TLSConfig = consulapi.TLSConfig{}
		cfg.HttpAuth = nil
		cfg.HttpClient = &http.Client{Transport: consistentOnly{next: http.DefaultTransport}}
		verdictClient.client, verdictClient.err = consulapi.NewClient(cfg)
	})
	return verdictClient.client, verdictClient.err
}

// consistentRead are the query options of a read a verdict rests on.
func consistentRead(ctx context.Context) *consulapi.QueryOptions {
	return (&consulapi.QueryOptions{RequireConsistent: true}).WithContext(ctx)
}
