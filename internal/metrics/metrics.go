// Package metrics owns the controller's Prometheus series and the HTTP endpoints that
// serve them, the health checks and the profiles, each on an address of its own:
// /metrics (behind DelegatedAuth), /healthz and /readyz, and /debug/pprof/.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/buildinfo"
)

const namespace = "consul_gateway_controller"

// Results recorded on write counters.
const (
	ResultOK       = "ok"
	ResultConflict = "conflict" // a 409 on a status write, a lost check-and-set in Consul
	ResultError    = "error"
)

// Result is the result label of a Kubernetes API call or a sync that returned err.
func Result(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case apierrors.IsConflict(err):
		return ResultConflict
	default:
		return ResultError
	}
}

var (
	// Registry holds every series /metrics serves.
	Registry = prometheus.NewRegistry()

	// StatusWrites counts status writes to the API server.
	StatusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "status_writes_total",
		Help: "Status writes to the Kubernetes API server, by kind and result (ok, conflict, error).",
	}, []string{"kind", "result"})

	// GatewayObjectApplies counts server-side applies of gateway Deployments, Services
	// and ServiceAccounts.
	GatewayObjectApplies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "gateway_object_applies_total",
		Help: "Server-side applies of the Deployments, Services and ServiceAccounts of Gateways, by kind and result (ok, conflict, error).",
	}, []string{"kind", "result"})

	// GatewayObjectDeletions counts deletes of the gateway objects of Gateways that
	// left our classes.
	GatewayObjectDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "gateway_object_deletions_total",
		Help: "Deletes of the Deployments, Services and ServiceAccounts this controller deployed for Gateways that are no longer of its classes, by kind and result (ok, conflict, error).",
	}, []string{"kind", "result"})

	// ConsulCatalogWrites counts registrations and deregistrations of gateway pods.
	ConsulCatalogWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "consul_catalog_writes_total",
		Help: "Catalog registrations and deregistrations of gateway pods in Consul, by operation (register, deregister) and result (ok, conflict, error).",
	}, []string{"operation", "result"})

	// ConsulACLWrites counts writes of the gateways' ACL policies, roles and binding
	// rules (package consul/identity).
	ConsulACLWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "consul_acl_writes_total",
		Help: "Writes of gateway ACL policies, roles and binding rules to Consul, by object (policy, role, binding-rule), operation (create, update, delete) and result (ok, error).",
	}, []string{"object", "operation", "result"})

	// ConsulWrites counts config entry writes to Consul.
	ConsulWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "consul_writes_total",
		Help: "Consul config entry writes, by entry kind, operation (create, update, delete) and result (ok, conflict, error).",
	}, []string{"kind", "operation", "result"})

	// DriftCorrections counts entries put back after something else changed them.
	DriftCorrections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "consul_drift_corrections_total",
		Help: "Owned Consul config entries written back because Consul no longer held what the syncer had written or seen there (a hand edit, a delete, an emptied server), by entry kind.",
	}, []string{"kind"})

	// GCDeletions counts owned entries deleted because nothing desires them any more.
	GCDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "consul_gc_deletions_total",
		Help: "Owned Consul config entries deleted because no confirmed object desires them any more, by entry kind.",
	}, []string{"kind"})

	// SyncDuration is how long one sync of a queue's key takes, by outcome.
	SyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "sync_duration_seconds",
		Help:    "How long one sync of a key takes, by queue and result (ok, conflict, error).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"queue", "result"})

	// TranslateDuration is how long one translation of the confirmed objects takes.
	TranslateDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "translate_duration_seconds",
		Help:    "How long one translation of the confirmed objects into Consul config entries takes.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})

	// TranslatedObjects counts objects translated anew rather than reused.
	TranslatedObjects = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "translated_objects_total",
		Help: "Gateways and routes whose Consul entries were translated anew; the others' translations are reused while nothing they read changed.",
	})

	// ConsulRequestDuration is the latency of the syncer's Consul requests.
	ConsulRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "consul_request_duration_seconds",
		Help:    "Latency of the Consul syncer's config entry requests by operation (read, create, update, delete); the drift watch's blocking queries are not included.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"operation"})

	// ConsulEntriesCompared counts full comparisons of Consul's entries with the desired ones.
	ConsulEntriesCompared = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "consul_entries_compared_total",
		Help: "Entries the drift watch compared in full with the desired state; an entry whose index and desired state are unchanged since it last matched is not compared again.",
	})

	// CachedSecrets is how many Secrets the listener certificate cache holds
	// (informers.SecretCache), summed over the caches of the process: one in the
	// controller. Only Secrets a listener names are cached, so this follows the
	// Gateways, not the cluster's Secrets.
	CachedSecrets = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "informer_cached_secrets",
		Help: "kubernetes.io/tls Secrets held in the controller's cache: only those a Gateway or ListenerSet listener names as a certificate.",
	})

	// SecretWatches is how many Secrets the certificate cache watches, one watch
	// each, whether the Secret exists or not.
	SecretWatches = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "informer_secret_watches",
		Help: "Watches the controller holds on single Secrets, one per Secret a Gateway or ListenerSet listener names as a certificate, existing or not.",
	})

	// SecretsOverCap is how many Secrets listeners name past their namespace's cap
	// (--secrets-per-namespace), unwatched; each such listener says so in its status.
	SecretsOverCap = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "informer_secrets_over_cap",
		Help: "Secrets that Gateway or ListenerSet listeners name as certificates past their namespace's cap (--secrets-per-namespace): not watched, and their listeners not programmed.",
	})

	// BuildInfo is 1, labelled with the running build (package buildinfo): dashboards
	// and alerts tell versions apart by it, as kube components' kubernetes_build_info.
	BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "1, labelled with the running build: its version, the commit it was built from (\"-dirty\" for a changed checkout) and the Go toolchain.",
	}, []string{"version", "revision", "goversion"})

	// Leader is 1 while this replica holds the Lease.
	Leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "leader",
		Help: "1 while this replica holds the leader election Lease and runs the writers, else 0.",
	})
)

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		StatusWrites, GatewayObjectApplies, GatewayObjectDeletions, ConsulCatalogWrites, ConsulACLWrites, ConsulWrites, DriftCorrections, GCDeletions, SyncDuration, Leader,
		TranslateDuration, TranslatedObjects, ConsulRequestDuration, ConsulEntriesCompared, CachedSecrets, SecretWatches, SecretsOverCap, BuildInfo,
		objectConditions,
	)
	build := buildinfo.Read()
	BuildInfo.WithLabelValues(build.Version, build.ShortRevision(), build.GoVersion).Set(1)
	// The series of every kind exist from the start, whether gateways are deployed or
	// not, so a rate over them is defined.
	for _, kind := range []string{"Deployment", "Service", "ServiceAccount"} {
		GatewayObjectApplies.WithLabelValues(kind, "ok")
		GatewayObjectDeletions.WithLabelValues(kind, "ok")
	}
	for _, op := range []string{"register", "deregister"} {
		ConsulCatalogWrites.WithLabelValues(op, "ok")
	}
	for _, object := range []string{"policy", "role", "binding-rule"} {
		ConsulACLWrites.WithLabelValues(object, "create", "ok")
	}
	registerRESTClientMetrics()
	for _, c := range queueCollectors {
		Registry.MustRegister(c)
	}
	// Queues made after this (all of the controller's) report through the provider.
	workqueue.SetProvider(queueMetrics{})
}
