package translate

import (
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// Snapshot is the confirmed state the translation reads: every Gateway and route of
// ours as the API server confirmed it, and the certificate Secrets their listeners use.
type Snapshot struct {
	Gateways map[cache.ObjectName]*gatewayv1.Gateway
	// ListenerSets holds the confirmed ListenerSets whose parent is a Gateway of ours;
	// their accepted, programmable listeners join their Gateway's api-gateway entry.
	ListenerSets map[cache.ObjectName]*gatewayv1.ListenerSet
	// Routes holds the confirmed routes of each kind Consul has an entry for (see
	// routeTranslations).
	Routes map[gatewayv1.Kind]map[cache.ObjectName]ConfirmedRoute
	// Secrets holds the kubernetes.io/tls Secrets named by listeners' certificateRefs
	// (Gateways' and ListenerSets').
	Secrets map[cache.ObjectName]*corev1.Secret
}

// ConfirmedRoute is a confirmed route and the decision confirmed with it.
type ConfirmedRoute struct {
	Route    gatewayapi.Object
	Decision gwdecision.Route
}

// EntryKey names one Consul config entry.
type EntryKey struct {
	Kind      string // consulapi.APIGateway, consulapi.HTTPRoute, ...
	Name      string
	Namespace string // Consul Enterprise namespace; "" on Consul CE
	Partition string // Consul Enterprise admin partition; "" on Consul CE
}

// KeyOf returns the key of entry.
func KeyOf(entry consulapi.ConfigEntry) EntryKey {
	return EntryKey{Kind: entry.GetKind(), Name: entry.GetName(), Namespace: entry.GetNamespace(), Partition: entry.GetPartition()}
}

// Owner identifies the Kubernetes object an entry was written for. It is recorded in
// the entry's Meta (see ownership.go), so entries nobody owns can be found.
type Owner struct {
	Kind      string // "Gateway", "HTTPRoute", "TCPRoute", "Secret", "Service"
	Namespace string
	Name      string
	UID       string
}

// NewSnapshot returns a snapshot with a map for every kind it holds.
func NewSnapshot() Snapshot {
	s := Snapshot{
		Gateways:     map[cache.ObjectName]*gatewayv1.Gateway{},
		ListenerSets: map[cache.ObjectName]*gatewayv1.ListenerSet{},
		Routes:       make(map[gatewayv1.Kind]map[cache.ObjectName]ConfirmedRoute, len(routeTranslations)),
		Secrets:      map[cache.ObjectName]*corev1.Secret{},
	}
	for _, rt := range routeTranslations {
		s.Routes[rt.kind] = map[cache.ObjectName]ConfirmedRoute{}
	}
	return s
}
