package intentions

import (
	"context"
	"fmt"
	"net/url"
	"time"

	consulapi "github.com/hashicorp/consul/api"
)

// chainRetry is how soon a discovery chain that could not be read is read again.
const chainRetry = 30 * time.Second

// chainsToRead returns the routed services with a chain entry whose targets are not
// known or may have changed, and forgets the targets of the others. Callers hold mu.
func (k *Keeper) chainsToRead(routes []Route) []Service {
	routed := map[Service]bool{}
	for _, r := range routes {
		for _, s := range r.Services {
			routed[s] = true
		}
	}
	var out []Service
	for s := range routed {
		if !k.hasChainEntry(s) {
			delete(k.targets, s)
			continue
		}
		if _, known := k.targets[s]; !known || k.chainsChanged {
			out = append(out, s)
		}
	}
	for s := range k.targets {
		if !routed[s] {
			delete(k.targets, s)
		}
	}
	return out
}

func (k *Keeper) hasChainEntry(s Service) bool {
	for _, names := range k.chained {
		if names[s] {
			return true
		}
	}
	return false
}

// chainTargets reads the services s's compiled discovery chain sends to. Targets in a
// peer cluster are left out: their intentions are the peer's. The answer is decoded
// here because consul/api's DiscoveryTarget has no Peer or Partition.
func (k *Keeper) chainTargets(ctx context.Context, s Service) ([]Service, error) {
	q := (&consulapi.QueryOptions{Namespace: s.Namespace, Partition: s.Partition}).WithContext(ctx)
	var resp struct {
		Chain *struct {
			Targets map[string]struct {
				Service, Namespace, Partition, Peer string
				External                            bool
			}
		}
	}
	if _, err := k.cfg.Client.Raw().Query("/v1/discovery-chain/"+url.PathEscape(s.Name), &resp, q); err != nil {
		return nil, fmt.Errorf("read the discovery chain of %s: %w", s, err)
	}
	if resp.Chain == nil {
		return []Service{s}, nil
	}
	var out []Service
	for _, t := range resp.Chain.Targets {
		if t.Peer != "" || t.External {
			continue
		}
		out = append(out, NewService(t.Service, t.Namespace, t.Partition))
	}
	return sortedUnique(out), nil
}

// observeChains records which services have an entry of a chain kind.
func (k *Keeper) observeChains(kind string, entries []consulapi.ConfigEntry) {
	names := make(map[Service]bool, len(entries))
	for _, e := range entries {
		names[NewService(e.GetName(), e.GetNamespace(), e.GetPartition())] = true
	}
	k.mu.Lock()
	k.chained[kind] = names
	k.chainsChanged = true
	k.mu.Unlock()
	k.signal()
}
