package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// Without Consul namespace mirroring the pods consul-k8s registers for the Services of
// one name in every namespace are one Consul service. The binary (which sets that mode
// from its flags):
//   - ignores a Service of that name in another namespace that registers no pod (here
//     one without a selector): Consul holds nothing of it, so the route sends to its
//     own Service's name;
//   - once that Service has a registered pod, narrows the backend to the route
//     namespace's instances: ResolvedRefs says so without naming the other namespace,
//     the route names a service of ours, and Consul's discovery chain for it has the
//     one target "the subset <namespace> of the shared name" (test/xds shows the
//     gateway's endpoints then are that namespace's pods alone);
//   - once the other pod goes, sends to the shared name again and removes the
//     entries of ours that narrowed it;
//   - narrows it again when an instance outside Kubernetes (a VM's) registers under
//     the name: a tenant's Service cannot reach a VM's service by naming it.
func TestSharedConsulNameReachesOnlyItsNamespace(t *testing.T) {
	s := newConsulStack(t, "shared")
	other := env.NewNamespace(t, "shared-other")
	env.Create(t, testenv.Service(other, s.Backend, testenv.BackendPort))
	env.Create(t, s.Route("web"))
	// The shared name's owners declare it http, as an http-route's backend must be:
	// the controller does not write the protocol of a name several namespaces share.
	declareHTTP(t, s.Backend)
	s.runStatusController(t, "shared")
	routeName := s.naming.EntryName(s.Namespace, "web")
	ours := s.naming.NarrowedServiceName(s.Namespace, s.Backend)
	routesTo := func(service, what string) {
		t.Helper()
		s.waitEntry(t, consulapi.HTTPRoute, routeName, what, func(e consulapi.ConfigEntry) bool {
			return slices.Equal(httpRouteServices(e), []string{service})
		})
	}

	s.awaitResolvedRefs(t, "web", "True/ResolvedRefs: All references are resolved")
	routesTo(s.Backend, "an empty Service of another namespace changes nothing")

	app := map[string]string{"app": "impostor"}
	selected, err := env.KubeClient.CoreV1().Services(other).Get(t.Context(), s.Backend, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selected.Spec.Selector = app
	if _, err := env.KubeClient.CoreV1().Services(other).Update(t.Context(), selected, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: testenv.PodServiceAccount}})
	impostor := testenv.InjectedPod(other, "impostor-1", app, "", testenv.BackendPort)
	env.Create(t, impostor)
	s.awaitResolvedRefs(t, "web", "True/ResolvedRefs: All references are resolved; backendRef "+s.Namespace+"/"+s.Backend+
		` is the Consul service "`+s.Backend+`", which pods of other namespaces register too: it reaches only the instances of namespace `+s.Namespace)
	if msg := s.routeCondition(t, "web", "ResolvedRefs"); strings.Contains(msg, other) {
		t.Errorf("ResolvedRefs names the other namespace: %s", msg)
	}
	routesTo(ours, "the route sends to the service of ours that reaches its namespace's instances")
	awaitChainTargets(t, ours, s.Backend+"/"+s.Namespace)
	// The gateway is let through to what the chain reaches: the shared name's
	// instances check the intention as the destination.
	gateway := s.naming.EntryName(s.Namespace, "edge")
	s.waitEntry(t, consulapi.ServiceIntentions, s.Backend, "the gateway may reach "+s.Backend, func(e consulapi.ConfigEntry) bool {
		intentions, ok := e.(*consulapi.ServiceIntentionsConfigEntry)
		return ok && hasSource(intentions, func(src *consulapi.SourceIntention) bool {
			return src.Name == gateway && src.Action == consulapi.IntentionActionAllow
		})
	})

	if err := env.KubeClient.CoreV1().Pods(other).Delete(t.Context(), impostor.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	routesTo(s.Backend, "the route sends to the shared name once only its namespace registers it")
	for _, key := range []struct{ kind, name string }{
		{consulapi.ServiceResolver, ours}, {consulapi.ServiceDefaults, ours}, {consulapi.ServiceResolver, s.Backend},
	} {
		s.waitEntry(t, key.kind, key.name, "the entries that narrowed the route are removed", absent)
	}

	// An instance registered outside Kubernetes (a VM's, no k8s-namespace meta) under
	// the name: the Service reaches only its namespace's pods, not the VM.
	env.RegisterOutsideService(t, s.Backend, "10.4.0.9")
	s.awaitResolvedRefs(t, "web", "True/ResolvedRefs: All references are resolved; backendRef "+s.Namespace+"/"+s.Backend+
		` is the Consul service "`+s.Backend+`", which instances registered outside Kubernetes have too: it reaches only the instances of namespace `+s.Namespace)
	routesTo(ours, "a name with instances outside Kubernetes is narrowed")
	awaitChainTargets(t, ours, s.Backend+"/"+s.Namespace)
}

// declareHTTP writes the service-defaults that say a Consul service speaks http, as
// its owners would, and removes them when the test ends.
func declareHTTP(t *testing.T, name string) {
	t.Helper()
	entry := &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: name, Protocol: "http"}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(entry, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The controller stopped first and may have left a redirect of ours to a
		// subset of name; Consul refuses to change name's protocol under it.
		removeRedirectsTo(t, name)
		if _, err := env.ConsulClient.ConfigEntries().Delete(consulapi.ServiceDefaults, name, nil); err != nil {
			t.Errorf("delete service-defaults %s: %v", name, err)
		}
	})
}

// removeRedirectsTo deletes the service-resolvers that redirect to name, with their
// service-defaults, and then name's own service-resolver.
func removeRedirectsTo(t *testing.T, name string) {
	t.Helper()
	entries, _, err := env.ConsulClient.ConfigEntries().List(consulapi.ServiceResolver, nil)
	if err != nil {
		t.Errorf("list service-resolvers: %v", err)
		return
	}
	remove := func(kind, entry string) {
		if _, err := env.ConsulClient.ConfigEntries().Delete(kind, entry, nil); err != nil {
			t.Errorf("delete %s %s: %v", kind, entry, err)
		}
	}
	for _, e := range entries {
		if r, ok := e.(*consulapi.ServiceResolverConfigEntry); ok && r.Redirect != nil && r.Redirect.Service == name {
			remove(consulapi.ServiceResolver, r.Name)
			remove(consulapi.ServiceDefaults, r.Name)
		}
	}
	remove(consulapi.ServiceResolver, name)
}

// awaitChainTargets waits until Consul's discovery chain for service has exactly the
// targets want, each "<service>/<subset>".
func awaitChainTargets(t *testing.T, service string, want ...string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("the discovery chain of %s targets %v", service, want), func(ctx context.Context) error {
		chain, _, err := env.ConsulClient.DiscoveryChain().Get(service, nil, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		var got []string
		for _, target := range chain.Chain.Targets {
			got = append(got, target.Service+"/"+target.ServiceSubset)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("targets %v", got)
		}
		return nil
	})
}
