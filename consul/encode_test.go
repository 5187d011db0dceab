package consul

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

func TestCompactEncoding(t *testing.T) {
	uptr := func(v uint32) *uint32 { return &v }
	iptr := func(v int) *int { return &v }
	tests := []struct {
		name  string
		entry consulapi.ConfigEntry
		// want is the exact JSON Compact must produce (compared as JSON values).
		want string
		// absent are keys, as dotted paths into the uncompacted encoding, that the
		// client encodes and Consul 1.15 refuses; they must not survive.
		absent []string
	}{
		{
			name: "api-gateway",
			entry: &consulapi.APIGatewayConfigEntry{
				Kind: consulapi.APIGateway,
				Name: "gw.default",
				Meta: map[string]string{"gateway-controller": "example.com/gw", "empty": ""},
				Listeners: []consulapi.APIGatewayListener{
					{Name: "http", Hostname: "*.example.com", Port: 8080, Protocol: "http"},
					{Name: "https", Port: 8443, Protocol: "http", TLS: consulapi.APIGatewayTLSConfiguration{
						Certificates: []consulapi.ResourceReference{{Kind: consulapi.InlineCertificate, Name: "secret.cert.default"}},
					}},
					{Name: "tcp", Port: 9000, Protocol: "tcp"},
				},
			},
			want: `{
				"Kind": "api-gateway",
				"Name": "gw.default",
				"Meta": {"gateway-controller": "example.com/gw", "empty": ""},
				"Listeners": [
					{"Name": "http", "Hostname": "*.example.com", "Port": 8080, "Protocol": "http"},
					{"Name": "https", "Port": 8443, "Protocol": "http",
					 "TLS": {"Certificates": [{"Kind": "inline-certificate", "Name": "secret.cert.default"}]}},
					{"Name": "tcp", "Port": 9000, "Protocol": "tcp"}
				]
			}`,
			absent: []string{"TLS", "Status", "CreateIndex", "ModifyIndex"},
		},
		{
			name: "http-route",
			entry: &consulapi.HTTPRouteConfigEntry{
				Kind:      consulapi.HTTPRoute,
				Name:      "route.default",
				Parents:   []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "gw.default", SectionName: "http"}},
				Hostnames: []string{"a.example.com"},
				Rules: []consulapi.HTTPRouteRule{{
					Filters: consulapi.HTTPFilters{
						Headers: []consulapi.HTTPHeaderFilter{{
							Add:    map[string]string{"X-Added": "1"},
							Set:    map[string]string{"X-Empty": ""},
							Remove: []string{"X-Secret"},
						}},
						URLRewrite: &consulapi.URLRewrite{Path: "/v2"},
					},
					Matches: []consulapi.HTTPMatch{
						{
							Path:    consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/api"},
							Headers: []consulapi.HTTPHeaderMatch{{Match: consulapi.HTTPHeaderMatchExact, Name: "X-Env", Value: ""}},
							Query:   []consulapi.HTTPQueryMatch{{Match: consulapi.HTTPQueryMatchRegularExpression, Name: "q", Value: "^a+$"}},
							Method:  consulapi.HTTPMatchMethodGet,
						},
						{}, // an empty match is an element: it stays.
					},
					Services: []consulapi.HTTPService{
						{Name: "v1", Weight: 90, Filters: consulapi.HTTPFilters{Headers: []consulapi.HTTPHeaderFilter{{Set: map[string]string{"X-Version": "1"}}}}},
						{Name: "v2", Weight: 10},
					},
				}},
			},
			want: `{
				"Kind": "http-route",
				"Name": "route.default",
				"Parents": [{"Kind": "api-gateway", "Name": "gw.default", "SectionName": "http"}],
				"Hostnames": ["a.example.com"],
				"Rules": [{
					"Filters": {
						"Headers": [{"Add": {"X-Added": "1"}, "Set": {"X-Empty": ""}, "Remove": ["X-Secret"]}],
						"URLRewrite": {"Path": "/v2"}
					},
					"Matches": [
						{"Path": {"Match": "prefix", "Value": "/api"},
						 "Headers": [{"Match": "exact", "Name": "X-Env"}],
						 "Query": [{"Match": "regex", "Name": "q", "Value": "^a+$"}],
						 "Method": "GET"},
						{}
					],
					"Services": [
						{"Name": "v1", "Weight": 90, "Filters": {"Headers": [{"Set": {"X-Version": "1"}}]}},
						{"Name": "v2", "Weight": 10}
					]
				}]
			}`,
			absent: []string{
				"Status", "Rules.Filters.JWT", "Rules.Filters.RetryFilter", "Rules.Filters.TimeoutFilter",
				"Rules.Filters.ExtProc", "Rules.Filters.ExtAuthz", "Rules.ResponseFilters",
				"Rules.Services.ResponseFilters", "Rules.Services.Filters.JWT",
			},
		},
		{
			name: "tcp-route",
			entry: &consulapi.TCPRouteConfigEntry{
				Kind:     consulapi.TCPRoute,
				Name:     "tcp.default",
				Parents:  []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "gw.default", SectionName: "tcp"}},
				Services: []consulapi.TCPService{{Name: "db"}},
				Meta:     map[string]string{"k8s-kind": "TCPRoute"},
			},
			want: `{
				"Kind": "tcp-route",
				"Name": "tcp.default",
				"Parents": [{"Kind": "api-gateway", "Name": "gw.default", "SectionName": "tcp"}],
				"Services": [{"Name": "db"}],
				"Meta": {"k8s-kind": "TCPRoute"}
			}`,
			absent: []string{"Status"},
		},
		{
			name: "inline-certificate",
			entry: &consulapi.InlineCertificateConfigEntry{
				Kind:        consulapi.InlineCertificate,
				Name:        "secret.cert.default",
				Certificate: "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n",
				PrivateKey:  "-----BEGIN EC PRIVATE KEY-----\n...\n-----END EC PRIVATE KEY-----\n",
			},
			want: `{
				"Kind": "inline-certificate",
				"Name": "secret.cert.default",
				"Certificate": "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n",
				"PrivateKey": "-----BEGIN EC PRIVATE KEY-----\n...\n-----END EC PRIVATE KEY-----\n"
			}`,
		},
		{
			name: "service-defaults with explicit zeros behind pointers and opaque arguments",
			entry: &consulapi.ServiceConfigEntry{
				Kind:     consulapi.ServiceDefaults,
				Name:     "backend",
				Protocol: "http",
				UpstreamConfig: &consulapi.UpstreamConfiguration{Defaults: &consulapi.UpstreamConfig{
					Limits: &consulapi.UpstreamLimits{MaxConnections: iptr(0)},
					PassiveHealthCheck: &consulapi.PassiveHealthCheck{
						EnforcingConsecutive5xx: uptr(0),
						MaxFailures:             0, // a plain zero: unset
					},
				}},
				EnvoyExtensions: []consulapi.EnvoyExtension{{
					Name:      "builtin/lua",
					Arguments: map[string]any{"Script": "", "Enabled": false, "Count": 0.0, "Nested": map[string]any{"Empty": ""}},
				}},
			},
			want: `{
				"Kind": "service-defaults",
				"Name": "backend",
				"Protocol": "http",
				"UpstreamConfig": {"Defaults": {
					"Limits": {"MaxConnections": 0},
					"PassiveHealthCheck": {"EnforcingConsecutive5xx": 0}
				}},
				"EnvoyExtensions": [{
					"Name": "builtin/lua",
					"Arguments": {"Script": "", "Enabled": false, "Count": 0, "Nested": {"Empty": ""}}
				}]
			}`,
			absent: []string{"MeshGateway", "Expose", "EnvoyExtensions.Required", "UpstreamConfig.Defaults.PassiveHealthCheck.MaxFailures"},
		},
		{
			name: "indexes and status read from Consul are kept",
			entry: &consulapi.TCPRouteConfigEntry{
				Kind:        consulapi.TCPRoute,
				Name:        "tcp.default",
				Services:    []consulapi.TCPService{{Name: "db"}},
				CreateIndex: 12,
				ModifyIndex: 18446744073709551615, // survives exactly: no float64 rounding
				Status: consulapi.ConfigEntryStatus{Conditions: []consulapi.Condition{{
					Type:               "Accepted",
					Status:             consulapi.ConditionStatusTrue,
					Reason:             "Accepted",
					LastTransitionTime: new(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)),
				}}},
			},
			want: `{
				"Kind": "tcp-route",
				"Name": "tcp.default",
				"Services": [{"Name": "db"}],
				"CreateIndex": 12,
				"ModifyIndex": 18446744073709551615,
				"Status": {"Conditions": [{"Type": "Accepted", "Status": "True", "Reason": "Accepted",
					"LastTransitionTime": "2024-01-02T03:04:05Z"}]}
			}`,
		},
		{
			name: "service-resolver: a custom MarshalJSON and map entries with empty values",
			entry: &consulapi.ServiceResolverConfigEntry{
				Kind:           consulapi.ServiceResolver,
				Name:           "backend",
				DefaultSubset:  "v1",
				Subsets:        map[string]consulapi.ServiceResolverSubset{"v1": {Filter: "Service.Meta.version == v1"}, "all": {}},
				ConnectTimeout: 5 * time.Second,
			},
			want: `{
				"Kind": "service-resolver",
				"Name": "backend",
				"DefaultSubset": "v1",
				"Subsets": {"v1": {"Filter": "Service.Meta.version == v1"}, "all": {}},
				"ConnectTimeout": "5s"
			}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(Compact(tt.entry))
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if diff := cmp.Diff(decodeJSON(t, []byte(tt.want)), decodeJSON(t, got)); diff != "" {
				t.Errorf("Compact encoding differs (-want +got):\n%s\ngot: %s", diff, got)
			}
			assertNoNull(t, "", decodeJSON(t, got))

			plain, err := json.Marshal(tt.entry)
			if err != nil {
				t.Fatal(err)
			}
			for _, path := range tt.absent {
				if !hasPath(decodeJSON(t, plain), strings.Split(path, ".")) {
					t.Errorf("test is stale: the client no longer encodes %s", path)
				}
				if hasPath(decodeJSON(t, got), strings.Split(path, ".")) {
					t.Errorf("Compact kept %s", path)
				}
			}

			// The compact encoding decodes into the client's struct as the entry itself.
			back := reflect.New(reflect.TypeOf(tt.entry).Elem()).Interface()
			if err := json.Unmarshal(got, back); err != nil {
				t.Fatalf("unmarshal the compact encoding: %v", err)
			}
			if diff := cmp.Diff(tt.entry, back); diff != "" {
				t.Errorf("round trip through the compact encoding differs (-entry +decoded):\n%s", diff)
			}
		})
	}
}

func TestCompactDelegatesGetters(t *testing.T) {
	entry := &consulapi.HTTPRouteConfigEntry{
		Kind: consulapi.HTTPRoute, Name: "r.ns", Namespace: "team", Partition: "part",
		Meta: map[string]string{"a": "b"}, CreateIndex: 3, ModifyIndex: 7,
	}
	c := Compact(entry)
	if c.GetKind() != entry.Kind || c.GetName() != entry.Name || c.GetNamespace() != "team" || c.GetPartition() != "part" ||
		c.GetCreateIndex() != 3 || c.GetModifyIndex() != 7 || !reflect.DeepEqual(c.GetMeta(), entry.Meta) {
		t.Errorf("getters of Compact(entry) differ from the entry's: %+v", c)
	}
	if translate.KeyOf(c) != translate.KeyOf(entry) {
		t.Errorf("KeyOf(Compact(entry)) = %+v, want %+v", translate.KeyOf(c), translate.KeyOf(entry))
	}
	if again := Compact(c); again != c {
		t.Errorf("Compact(Compact(entry)) wrapped twice: %#v", again)
	}
	if u, ok := c.(interface{ Unwrap() consulapi.ConfigEntry }); !ok || u.Unwrap() != entry {
		t.Errorf("Compact(entry) does not unwrap to entry")
	}
	if Compact(nil) != nil {
		t.Error("Compact(nil) != nil")
	}
}

// TestCompactThroughClient checks that consul/api sends the wrapper's encoding: the
// client JSON-encodes whatever entry it is given, for Set and CAS alike.
func TestCompactThroughClient(t *testing.T) {
	var bodies []string
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		queries = append(queries, r.URL.RawQuery)
		_, _ = io.WriteString(w, "true")
	}))
	defer srv.Close()
	client := newEncodingTestClient(t, srv.URL)

	entry := &consulapi.APIGatewayConfigEntry{
		Kind: consulapi.APIGateway, Name: "gw",
		Listeners: []consulapi.APIGatewayListener{{Name: "http", Port: 8080, Protocol: "http"}},
	}
	want := `{"Kind":"api-gateway","Listeners":[{"Name":"http","Port":8080,"Protocol":"http"}],"Name":"gw"}`
	if ok, _, err := client.ConfigEntries().CAS(Compact(entry), 42, nil); !ok || err != nil {
		t.Fatalf("CAS = %v, %v", ok, err)
	}
	if ok, _, err := client.ConfigEntries().Set(Compact(entry), nil); !ok || err != nil {
		t.Fatalf("Set = %v, %v", ok, err)
	}
	for i, body := range bodies {
		if strings.TrimSpace(body) != want {
			t.Errorf("request %d body = %s, want %s", i, body, want)
		}
	}
	if len(queries) != 2 || !strings.Contains(queries[0], "cas=42") || strings.Contains(queries[1], "cas=") {
		t.Errorf("queries = %q, want cas=42 on the CAS only", queries)
	}
}

// TestReadConsul115Encoding checks the reverse direction: the client decodes an entry as
// Consul 1.15 returns it (no keys for fields added since, Weight normalized) without
// help.
func TestReadConsul115Encoding(t *testing.T) {
	// Recorded from Consul 1.15.4's GET /v1/config/http-route/r.
	const body = `{
    "Kind": "http-route",
    "Name": "r",
    "Parents": [{"Kind": "api-gateway", "Name": "gw", "SectionName": "http"}],
    "Rules": [{
        "Filters": {"Headers": null, "URLRewrite": null},
        "Matches": [{"Headers": null, "Method": "", "Path": {"Match": "prefix", "Value": "/"}, "Query": null}],
        "Services": [{"Name": "s", "Weight": 1, "Filters": {"Headers": null, "URLRewrite": null}}]
    }],
    "Hostnames": null,
    "Status": {"Conditions": [{
        "Type": "Accepted", "Status": "True", "Reason": "Accepted", "Message": "route is valid",
        "Resource": {"Kind": "", "Name": "", "SectionName": ""},
        "LastTransitionTime": "2026-12-02T14:46:24.690722693Z"
    }]},
    "CreateIndex": 41,
    "ModifyIndex": 42
}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Consul-Index", "42")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	raw, _, err := newEncodingTestClient(t, srv.URL).ConfigEntries().Get(consulapi.HTTPRoute, "r", nil)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	got, ok := raw.(*consulapi.HTTPRouteConfigEntry)
	if !ok {
		t.Fatalf("Get returned %T", raw)
	}
	want := []consulapi.HTTPRouteRule{{
		Matches:  []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/"}}},
		Services: []consulapi.HTTPService{{Name: "s", Weight: 1}},
	}}
	if diff := cmp.Diff(want, got.Rules); diff != "" {
		t.Errorf("rules decoded differ (-want +got):\n%s", diff)
	}
	if got.ModifyIndex != 42 || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Status != consulapi.ConditionStatusTrue {
		t.Errorf("index or status not decoded: %+v", got)
	}
}

func newEncodingTestClient(t *testing.T, url string) *consulapi.Client {
	t.Helper()
	cfg := consulapi.DefaultNonPooledConfig()
	cfg.Address = strings.TrimPrefix(url, "http://")
	cfg.Scheme = "http"
	cfg.Token = ""
	cfg.TokenFile = ""
	cfg.TLSConfig = consulapi.TLSConfig{}
	cfg.HttpAuth = nil
	cfg.Namespace = ""
	cfg.Partition = ""
	client, err := consulapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func assertNoNull(t *testing.T, path string, v any) {
	t.Helper()
	switch v := v.(type) {
	case nil:
		t.Errorf("null at %q", path)
	case map[string]any:
		for k, c := range v {
			assertNoNull(t, path+"."+k, c)
		}
	case []any:
		for _, c := range v {
			assertNoNull(t, path+"[]", c)
		}
	}
}

// hasPath reports whether key path is present in v, looking through arrays.
func hasPath(v any, path []string) bool {
	if len(path) == 0 {
		return true
	}
	switch v := v.(type) {
	case map[string]any:
		c, ok := v[path[0]]
		return ok && hasPath(c, path[1:])
	case []any:
		for _, c := range v {
			if hasPath(c, path) {
				return true
			}
		}
	}
	return false
}
