package chaos

import (
	"context"
	"fmt"
	"net/url"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/intentions"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// intentionProblems compares Consul's service-intentions with what the route entries
// of ours in Consul need (the replicas keep them, --manage-intentions): each
// destination a route sends to lets the route's gateways through with a source of
// ours, and no source of ours is left where no route needs it. The route entries
// themselves are checked against the model elsewhere. A service's destinations are the
// targets of its discovery chain, as Consul compiles it, as the keeper reads them.
// Without this, convergence could be declared while the keeper had yet to put back
// what a Consul data loss took, and the referee would do it.
func (s *scenario) intentionProblems(ctx context.Context, entries map[string]consulapi.ConfigEntry) ([]string, error) {
	var routes []intentions.Route
	for _, entry := range entries {
		if r, ok := intentions.RouteOf(entry); ok {
			routes = append(routes, r)
		}
	}
	verdicts, err := verdictConsul()
	if err != nil {
		return nil, err
	}
	targets := map[intentions.Service][]intentions.Service{}
	for _, r := range routes {
		for _, svc := range r.Services {
			if _, known := targets[svc]; known {
				continue
			}
			if targets[svc], err = chainTargets(ctx, verdicts, svc); err != nil {
				return nil, err
			}
		}
	}
	needs := intentions.NeedsOf(routes, targets)
	listed, _, err := verdicts.ConfigEntries().List(consulapi.ServiceIntentions, consistentRead(ctx))
	if err != nil {
		return nil, err
	}
	marker := intentions.Marker(translate.Ownership{Controller: s.controllerName, ClusterID: s.clusterID})
	held := map[intentions.Service]*consulapi.ServiceIntentionsConfigEntry{}
	for _, e := range listed {
		if entry, ok := e.(*consulapi.ServiceIntentionsConfigEntry); ok {
			held[intentions.NewService(entry.Name, entry.Namespace, entry.Partition)] = entry
		}
	}
	var problems []string
	judge := func(d intentions.Service) {
		plan := intentions.PlanEntry(held[d], d, needs[d], marker, nil)
		if plan.Entry != nil || plan.Delete {
			problems = append(problems, fmt.Sprintf("the service-intentions of %s do not let exactly the %d gateway(s) of ours its routes in Consul name through", d, len(needs[d])))
		}
	}
	for d := range needs {
		judge(d)
	}
	for d := range held {
		if _, needed := needs[d]; !needed {
			judge(d)
		}
	}
	return problems, nil
}

// chainTargets are the services svc's compiled discovery chain sends to in this
// cluster (targets in a peer, or external, are left out, as the keeper leaves them).
func chainTargets(ctx context.Context, client *consulapi.Client, svc intentions.Service) ([]intentions.Service, error) {
	q := consistentRead(ctx)
	q.Namespace, q.Partition = svc.Namespace, svc.Partition
	var resp struct {
		Chain *struct {
			Targets map[string]struct {
				Service, Namespace, Partition, Peer string
				External                            bool
			}
		}
	}
	if _, err := client.Raw().Query("/v1/discovery-chain/"+url.PathEscape(svc.Name), &resp, q); err != nil {
		return nil, fmt.Errorf("read the discovery chain of %s: %w", svc, err)
	}
	if resp.Chain == nil {
		return []intentions.Service{svc}, nil
	}
	var out []intentions.Service
	for _, t := range resp.Chain.Targets {
		if t.Peer == "" && !t.External {
			out = append(out, intentions.NewService(t.Service, t.Namespace, t.Partition))
		}
	}
	return out, nil
}
