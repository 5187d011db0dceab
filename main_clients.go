package main

import (
	"context"
	"fmt"
	"slices"

	consulapi "github.com/hashicorp/consul/api"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	configclient "github.com/consul-gateway-controller/consul-gateway-controller/api/client"
	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
)

// clients are the controller's connections: to the API server, one client per API
// and the side clients, and to Consul.
type clients struct {
	kube    kubernetes.Interface
	side    sideClients
	gateway gatewayclient.Interface
	meta    metadata.Interface
	configs configclient.Interface
	// dynamic reads consul-k8s's MeshServices; nil when their CRD is not served.
	dynamic dynamic.Interface
	consul  *consulapi.Client
}

// newClients creates the clients, and checks that the API server answers and serves
// the Gateway API and this controller's own API.
func newClients(ctx context.Context, opts *options.Options) (clients, error) {
	var c clients
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
	if err != nil {
		return c, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = opts.KubeAPIQPS, opts.KubeAPIBurst
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("create kubernetes client: %w", err)
	}
	if c.side, err = newSideClients(cfg, opts); err != nil {
		return c, err
	}
	if c.gateway, err = gatewayclient.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("create gateway-api client: %w", err)
	}
	if c.meta, err = metadata.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("create metadata client: %w", err)
	}
	if c.configs, err = configclient.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("create GatewayConfig client: %w", err)
	}
	if err := checkAPIs(ctx, c.kube, cfg.Host); err != nil {
		return c, err
	}
	if c.dynamic, err = meshServicesClient(ctx, c.kube, cfg); err != nil {
		return c, err
	}
	if c.consul, err = opts.Consul.Client(consul.StreamListAnswers); err != nil {
		return c, err
	}
	return c, nil
}

// resolveClusterID sets an unset --cluster-id to one unique to this cluster: the UID
// of its kube-system Namespace, which lives as long as the cluster. Two clusters
// sharing a Consul then never take each other's entries for their own, which a
// shared default name would make them do. It is read with list, which the
// Namespace informer's grant already allows.
func resolveClusterID(ctx context.Context, opts *options.Options, kube kubernetes.Interface) error {
	logger := klog.FromContext(ctx)
	if opts.ClusterID != "" {
		if opts.ClusterID == options.SharedClusterID && opts.Naming.Prefix == "" {
			logger.Info("Warning: --cluster-id=default with no --consul-entry-prefix: another cluster sharing this Consul with the same settings would change and delete this cluster's entries; leave --cluster-id unset to derive a unique one")
		}
		return nil
	}
	list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", metav1.NamespaceSystem).String()})
	if err != nil {
		return fmt.Errorf("derive --cluster-id from the %s Namespace: %w", metav1.NamespaceSystem, err)
	}
	if len(list.Items) != 1 || list.Items[0].UID == "" {
		return fmt.Errorf("derive --cluster-id: Namespace %s not found; set --cluster-id", metav1.NamespaceSystem)
	}
	opts.ClusterID = options.ClusterIDOf(list.Items[0].UID)
	logger.Info("Derived the cluster ID from the kube-system Namespace", "clusterID", opts.ClusterID)
	return nil
}

// meshServicesClient returns a client for consul-k8s's MeshServices when the API
// server serves them, and nil otherwise: MeshService backendRefs are then refused,
// with the reason in their status, until the controller restarts with the CRD
// installed. Only a MeshService resource in the group's discovery counts; any other
// discovery error is returned.
func meshServicesClient(ctx context.Context, kube kubernetes.Interface, cfg *rest.Config) (dynamic.Interface, error) {
	resources, err := kube.Discovery().ServerResourcesForGroupVersion(informers.MeshServiceResource.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		klog.FromContext(ctx).Info("MeshService CRD not served: MeshService backendRefs will be refused", "groupVersion", informers.MeshServiceResource.GroupVersion())
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("discover %s: %w", informers.MeshServiceResource.GroupVersion(), err)
	}
	if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == informers.MeshServiceResource.Resource }) {
		klog.FromContext(ctx).Info("MeshService CRD not served: MeshService backendRefs will be refused", "groupVersion", informers.MeshServiceResource.GroupVersion())
		return nil, nil
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create MeshService client: %w", err)
	}
	return client, nil
}

// checkAPIs checks that the API server at host answers, and serves the Gateway API and
// this controller's own API.
func checkAPIs(ctx context.Context, kube kubernetes.Interface, host string) error {
	version, err := kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reach the Kubernetes API server: %w", err)
	}
	if _, err := kube.Discovery().ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String()); err != nil {
		return fmt.Errorf("find the Gateway API (%s); are its CRDs installed? %w", gatewayv1.GroupVersion, err)
	}
	if _, err := kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String()); err != nil {
		return fmt.Errorf("find this controller's own API (%s); is deploy/crds installed? %w", v1alpha1.SchemeGroupVersion, err)
	}
	klog.FromContext(ctx).Info("Connected to Kubernetes", "host", host, "version", version.GitVersion)
	return nil
}

// sideClients are the clients of requests that must not wait behind status writes in
// the main client's rate limiter. A Lease renewal that waits there past the renew
// deadline costs the Lease, and the process exits in the middle of a cold start; an
// Event burst would otherwise take the budget of the status writes it reports on.
// kube-controller-manager and kube-scheduler give leader election and Events clients
// of their own for the same reasons.
type sideClients struct {
	leaderElection kubernetes.Interface
	events         kubernetes.Interface
	// reviews checks /metrics' callers; whoever reaches the metrics address can make
	// it call, so it must not take the status writes' budget.
	reviews kubernetes.Interface
	// secrets lists and watches the Secrets listeners name (informers.SecretCache): one
	// watch each, which a tenant's listeners multiply.
	secrets kubernetes.Interface
}

// Renewals come every retry period, so a small budget of their own suffices. Events
// follow status writes (about one per changed object), so they get a budget as large
// as the status writes', in a bucket of their own. A scraper costs two reviews per
// cache time (10 s), so the reviews' small budget serves dozens of scrapers.
const (
	leaderElectionQPS, leaderElectionBurst = 5, 10
	reviewsQPS, reviewsBurst               = 5, 10
)

func newSideClients(cfg *rest.Config, opts *options.Options) (sideClients, error) {
	client := func(agent string, qps float32, burst int) (kubernetes.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.QPS, c.Burst, c.RateLimiter = qps, burst, nil
		c = rest.AddUserAgent(c, agent)
		k, err := kubernetes.NewForConfig(c)
		if err != nil {
			return nil, fmt.Errorf("create %s client: %w", agent, err)
		}
		return k, nil
	}
	var (
		sc  sideClients
		err error
	)
	if sc.leaderElection, err = client("leader-election", leaderElectionQPS, leaderElectionBurst); err != nil {
		return sc, err
	}
	if sc.events, err = client("events", cfg.QPS, cfg.Burst); err != nil {
		return sc, err
	}
	if sc.reviews, err = client("metrics-auth", reviewsQPS, reviewsBurst); err != nil {
		return sc, err
	}
	sc.secrets, err = client("secrets", opts.SecretAPIQPS, opts.SecretAPIBurst)
	return sc, err
}
