package consul

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

func TestDependencies(t *testing.T) {
	tests := []struct {
		name  string
		entry consulapi.ConfigEntry
		want  []translate.EntryKey
	}{
		{
			name: "an http-route waits for its backends' service-defaults",
			entry: &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "web.apps", Rules: []consulapi.HTTPRouteRule{
				{Services: []consulapi.HTTPService{{Name: "echo"}, {Name: "api", Namespace: "ns", Partition: "p"}}},
			}},
			want: []translate.EntryKey{{Kind: consulapi.ServiceDefaults, Name: "echo"}, {Kind: consulapi.ServiceDefaults, Name: "api", Namespace: "ns", Partition: "p"}},
		},
		{
			name: "an api-gateway waits for its inline-certificates",
			entry: &consulapi.APIGatewayConfigEntry{Kind: consulapi.APIGateway, Name: "edge.apps", Listeners: []consulapi.APIGatewayListener{
				{Name: "http", Protocol: "http"},
				{Name: "https", Protocol: "http", TLS: consulapi.APIGatewayTLSConfiguration{Certificates: []consulapi.ResourceReference{
					{Kind: consulapi.InlineCertificate, Name: "tls.apps"},
					{Kind: "file-system-certificate", Name: "elsewhere"},
				}}},
			}},
			want: []translate.EntryKey{{Kind: consulapi.InlineCertificate, Name: "tls.apps"}},
		},
		{
			name:  "a tcp-route waits for nothing",
			entry: &consulapi.TCPRouteConfigEntry{Kind: consulapi.TCPRoute, Name: "db.apps", Services: []consulapi.TCPService{{Name: "db"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, dependencies(tt.entry)); diff != "" {
				t.Errorf("dependencies (-want +got):\n%s", diff)
			}
		})
	}
}
