package options

import (
	"flag"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
)

// Flags returns the flags, in the sections --help prints.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("kubernetes")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig. Empty means the in-cluster configuration.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Queries per second to the Kubernetes API server. Events get a budget as large of their own, and leader election a small one, so neither waits behind status writes.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of queries to the Kubernetes API server (and of Events, in their own budget).")
	fs.Float32Var(&o.SecretAPIQPS, "secret-api-qps", o.SecretAPIQPS, "Queries per second of the listener certificate Secrets' lists and watches, a budget apart from --kube-api-qps: however many Secrets listeners name, status writes do not wait behind them.")
	fs.IntVar(&o.SecretAPIBurst, "secret-api-burst", o.SecretAPIBurst, "Burst of the listener certificate Secrets' lists and watches.")

	fs = fss.FlagSet("controller")
	fs.StringVar(&o.ControllerName, "controller-name", o.ControllerName, "The GatewayClass controllerName this controller serves (DOMAIN/PATH).")
	fs.IntVar(&o.SecretsPerNamespace, "secrets-per-namespace", o.SecretsPerNamespace, "How many distinct Secrets the listeners of one namespace's Gateways and ListenerSets (of this controller's classes, permitted references only) may have watched. A listener naming one more gets ResolvedRefs=False (InvalidCertificateRef); the oldest Gateways and ListenerSets are served first.")
	fs.IntVar(&o.GatewayWorkers, "gateway-workers", o.GatewayWorkers, "Status workers for Gateways (GatewayClasses get one).")
	fs.IntVar(&o.RouteWorkers, "route-workers", o.RouteWorkers, "Status workers for each route kind (HTTPRoute, TCPRoute, GRPCRoute, TLSRoute, UDPRoute).")

	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address serving /metrics (Prometheus), and nothing else. \"0\" disables it.")
	fs.StringVar(&o.MetricsAuth, "metrics-auth", o.MetricsAuth, "How /metrics checks its callers. kubernetes: a bearer token the API server authenticates (TokenReview) for a user it allows to get the non-resource URL /metrics (SubjectAccessReview), as kube components do; 401 without or with an invalid token, 403 without the grant; decisions on authenticated tokens are cached 10s, 401s are not; at most 2 reviews of tokens without a cached decision run at once, and others get 429 meanwhile. The controller then needs create on tokenreviews and subjectaccessreviews (deploy/clusterrole.yaml), scrapers the ClusterRole consul-gateway-controller-metrics-reader. none: no check, anyone who reaches the address is served; for local runs, or behind a NetworkPolicy that admits only the scrapers.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address serving /healthz and /readyz, and nothing else, without authentication. /readyz answers a short fixed reason; the detail goes to the log. \"0\" disables it.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go's pprof profiles under /debug/pprof/ on --profiling-bind-address, never on the metrics or health addresses: they have no authentication, show the command line, goroutine stacks and allocation sites, and a CPU profile or trace loads the process while it runs.")
	fs.StringVar(&o.ProfilingBindAddress, "profiling-bind-address", o.ProfilingBindAddress, "Address serving the profiles with --profiling, and nothing else. Must be a loopback address (reach it with kubectl port-forward) unless --profiling-allow-non-loopback; any other address is refused at start.")
	fs.BoolVar(&o.ProfilingAllowNonLoopback, "profiling-allow-non-loopback", o.ProfilingAllowNonLoopback, "Let --profiling-bind-address be an address other hosts reach. Anyone who reaches it can then read the profiles and load the process: protect it by other means.")
	fs.StringVar(&o.MemoryLimit, "memory-limit", o.MemoryLimit, "Memory the process may use, as a quantity (512Mi, or bytes): the container's limit, which deploy/ passes from the downward API. Go's garbage collector then works harder as the heap nears 90% of it, rather than letting the kernel kill the process at the limit. Ignored when GOMEMLIMIT is set; empty or 0 sets nothing.")

	fs = fss.FlagSet("leader election")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Run the writers only while holding a Lease, so replicas never write at once. Disable only for a single replica.")
	fs.StringVar(&o.Leader.Namespace, "leader-elect-resource-namespace", o.Leader.Namespace, "Namespace of the Lease.")
	fs.StringVar(&o.Leader.Name, "leader-elect-resource-name", o.Leader.Name, "Name of the Lease.")
	fs.StringVar(&o.Leader.Identity, "leader-elect-identity", o.Leader.Identity, "This replica's identity in the Lease; unique per replica. Defaults to $HOSTNAME.")
	fs.DurationVar(&o.Leader.LeaseDuration, "leader-elect-lease-duration", o.Leader.LeaseDuration, "How long followers wait before taking over a Lease that is not renewed.")
	fs.DurationVar(&o.Leader.RenewDeadline, "leader-elect-renew-deadline", o.Leader.RenewDeadline, "How long the leader retries renewing before it stops its writers and exits.")
	fs.DurationVar(&o.Leader.RetryPeriod, "leader-elect-retry-period", o.Leader.RetryPeriod, "How often candidates try to acquire or renew the Lease.")

	fs = fss.FlagSet("consul")
	fs.StringVar(&o.Consul.HTTPAddr, "consul-http-addr", o.Consul.HTTPAddr, "Consul HTTP API address (scheme://host:port). Overrides CONSUL_HTTP_ADDR.")
	fs.StringVar(&o.Consul.TokenFile, "consul-token-file", o.Consul.TokenFile, "File holding the Consul ACL token. Overrides CONSUL_HTTP_TOKEN_FILE and CONSUL_HTTP_TOKEN.")
	fs.StringVar(&o.Consul.CACert, "consul-cacert", o.Consul.CACert, "CA certificate to verify Consul's TLS certificate. Overrides CONSUL_CACERT.")
	fs.StringVar(&o.Consul.TLSServerName, "consul-tls-server-name", o.Consul.TLSServerName, "Name to verify Consul's TLS certificate against, and to send as SNI, instead of the host of --consul-http-addr (consul-k8s's server certificates name server.<datacenter>.<domain>). Overrides CONSUL_TLS_SERVER_NAME.")
	fs.BoolVar(&o.Consul.AllowPlaintext, "consul-allow-plaintext", o.Consul.AllowPlaintext, "Allow talking to Consul without TLS when it is not on loopback. Without TLS the controller's ACL token, every listener's private key and the gateway pods' logins cross the network in clear; the controller refuses to start unless this is set.")
	fs.IntVar(&o.ConsulWorkers, "consul-workers", o.ConsulWorkers, "Workers writing Consul config entries.")
	fs.StringVar(&o.ClusterID, "cluster-id", o.ClusterID, "Names this cluster in the ownership meta of Consul entries, so clusters sharing a Consul never change or delete each other's. Empty: \"k8s-\" and the UID of the cluster's kube-system Namespace. Keep it once entries are written: entries with another id are not this controller's.")
	fs.StringVar(&o.Naming.Prefix, "consul-entry-prefix", o.Naming.Prefix, "Prefix of every Consul config entry name.")
	fs.StringVar(&o.Naming.Partition, "consul-partition", o.Naming.Partition, "Consul Enterprise admin partition of every entry.")
	fs.StringVar(&o.Naming.DestinationNamespace, "consul-destination-namespace", o.Naming.DestinationNamespace, "Consul Enterprise namespace of every entry.")
	fs.BoolVar(&o.Naming.MirrorNamespaces, "consul-mirror-namespaces", o.Naming.MirrorNamespaces, "Put entries into the Consul Enterprise namespace named like their Kubernetes namespace.")
	fs.StringVar(&o.Naming.MirrorPrefix, "consul-mirror-namespaces-prefix", o.Naming.MirrorPrefix, "Prefix of mirrored Consul namespaces (with --consul-mirror-namespaces).")
	fs.BoolVar(&o.ManageServiceDefaults, "manage-service-defaults", o.ManageServiceDefaults, "Write service-defaults with protocol http for HTTP backends that have none.")
	fs.DurationVar(&o.ServiceDefaultsGrace, "service-defaults-grace", o.ServiceDefaultsGrace, "How long service-defaults written by --manage-service-defaults outlive the last route naming their Service, while the Service exists. A backend moved from one route to another then keeps its protocol, which Consul 1.15's gateways need to keep its endpoints. 0 deletes them at once.")
	fs.BoolVar(&o.ManageIntentions, "manage-intentions", o.ManageIntentions, "Keep, in the service-intentions entry of every service a route sends to (and every target of its discovery chain), a source allowing the route's gateways, and remove it when no route needs it; other sources are never changed. Needed where intentions default to deny (ACLs on with default deny). Disable when intentions are managed by other means; the controller's Consul token then needs no intentions = \"write\".")

	AddResponderFlag(fs, &o.ResponderService)

	fs = fss.FlagSet("gateway data plane")
	fs.BoolVar(&o.DeployGateways, "deploy-gateways", o.DeployGateways, "Deploy each accepted Gateway's consul-dataplane pods and Service, and require a Ready pod and an address for Programmed. Disable when the gateways are deployed by other means.")
	fs.BoolVar(&o.RequireAdmissionPolicy, "require-admission-policy", o.RequireAdmissionPolicy, "With --deploy-gateways, check at start (a dry-run write the policy must refuse) that the admission policy of deploy/validatingadmissionpolicy.yaml is in force for the controller's identity, and refuse to start if it is not. Disable only where the policy cannot be installed (Kubernetes before 1.30) or the controller does not run as its ServiceAccount.")
	fs.IntVar(&o.DataplaneWorkers, "dataplane-workers", o.DataplaneWorkers, "Workers applying gateway Deployments, Services and ServiceAccounts.")
	fs.StringVar(&o.Gateway.Image, "gateway-image", o.Gateway.Image, "consul-dataplane image of gateway pods whose GatewayConfig names none.")
	fs.StringVar(&o.Gateway.ImageRolloutLimit, "gateway-image-rollout-limit", o.Gateway.ImageRolloutLimit, "How many existing gateway Deployments may be rolling to a new consul-dataplane image (--gateway-image, or a class's GatewayConfig) at once: a number, or a percentage of the controller's gateway Deployments, rounded up. The others keep the image they run until one finishes its roll; a Gateway's other changes are applied at once.")
	fs.StringVar(&o.Gateway.ConsulAddress, "gateway-consul-address", o.Gateway.ConsulAddress, "Consul server address of gateway pods whose GatewayConfig names none (consul-dataplane -addresses). Empty means the host of the Consul HTTP address.")
	fs.Int32Var(&o.Gateway.GRPCPort, "gateway-consul-grpc-port", o.Gateway.GRPCPort, "Consul servers' gRPC port for gateway pods whose GatewayConfig names none.")
	fs.StringSliceVar(&o.Gateway.InfrastructureKeys, "gateway-infrastructure-keys", o.Gateway.InfrastructureKeys, "Prefixed label and annotation keys of a Gateway's spec.infrastructure that reach its ServiceAccount, Deployment, pods and Service: a key, \"prefix/*\" or \"*\". Keys without a prefix always do. Others are left out and named in the Gateway's Accepted message: a Gateway's author could otherwise set cloud load-balancer or workload-identity annotations.")
	fs.StringVar(&o.Gateway.AuthMethod, "gateway-auth-method", o.Gateway.AuthMethod, "Kubernetes auth method in Consul that gateway pods log in to, unless their GatewayConfig names another. Setting it makes the controller manage each Gateway's ACL policy, role and binding rule in the auth method its pods use, so each gateway may act as its own Consul service only; the controller's Consul token then needs acl = \"write\" (deploy/README.md). Empty: no ACL objects are written, and pods log in only where a GatewayConfig names an auth method.")

	var klogFlags flag.FlagSet
	klog.InitFlags(&klogFlags)
	fss.FlagSet("logging").AddGoFlagSet(&klogFlags)
	return fss
}

// AddResponderFlag adds --responder-service, setting service: the controller's flag,
// which the translate and explain commands take too, so that they judge and translate
// as a controller with it does.
func AddResponderFlag(fs *pflag.FlagSet, service *string) {
	fs.StringVar(service, "responder-service", *service, "Consul service name of the responder (the responder command, deploy/responder): requests of rules without a valid backend are sent to it and answered 500, and RequestRedirect rules are accepted and answered by it. Its gateways must be allowed to reach it (--manage-intentions does that). Empty: such requests go to a service without instances and are answered 503, and RequestRedirect rules are refused.")
}

// Usage writes --help: what the command is, then every section of flags.
func Usage(w io.Writer, fss cliflag.NamedFlagSets) {
	fmt.Fprintf(w, "consul-gateway-controller implements the Gateway API on Consul's API gateway.\n\nUsage:\n  consul-gateway-controller [flags]\n  consul-gateway-controller translate|status|explain|responder|version ... (docs/cli.md)\n")
	cliflag.PrintSections(w, fss, 0)
}

// AddTo adds every section's flags to fs.
func AddTo(fs *pflag.FlagSet, fss cliflag.NamedFlagSets) {
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
}
