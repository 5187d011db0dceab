package xds

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// accessLogFormat is the recipe's JSON format (docs/observability.md, "Access logs").
const accessLogFormat = `{"start_time":"%START_TIME%","method":"%REQ(:METHOD)%","path":"%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%","authority":"%REQ(:AUTHORITY)%","status":"%RESPONSE_CODE%","duration_ms":"%DURATION%","upstream":"%UPSTREAM_CLUSTER%"}`

// TestAccessLogsReachGateway follows docs/observability.md's access-log recipe: the
// global proxy-defaults with AccessLogs on (Consul 1.15) make the listener Consul
// serves a gateway log each request to stdout in the recipe's JSON format, from its
// HTTP connection manager, and log the connections no filter chain takes, from the
// listener; deleting the entry takes both away. No test can see a line logged: no
// Envoy runs here.
func TestAccessLogsReachGateway(t *testing.T) {
	setup(t)
	const ns = "xds-accesslogs"
	if err := kubectlApply(filepath.Join("testdata", "accesslogs.yaml")); err != nil {
		t.Fatal(err)
	}
	registerBackends(t, ns, 0)
	awaitProgrammed(t, ns, "edge")
	w := envoy.Watch(t.Context(), env.Consul.GRPCAddr(), gatewayProxy(t, ns, "edge"))
	t.Cleanup(w.Close)
	awaitServed(t, w, 80, "200")
	if got := accessLogsOf(w, 80); got != "none" {
		t.Fatalf("before proxy-defaults the listener logs: %s", got)
	}

	defaults := &consulapi.ProxyConfigEntry{
		Kind: consulapi.ProxyDefaults, Name: consulapi.ProxyConfigGlobal,
		AccessLogs: &consulapi.AccessLogsConfig{Enabled: true, Type: consulapi.StdOutLogSinkType, JSONFormat: accessLogFormat},
	}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(defaults, nil); err != nil {
		t.Fatalf("write proxy-defaults with AccessLogs: %v", err)
	}
	// The entry is global: it goes before the next test, whatever happens.
	deleteDefaults := func() error {
		_, err := env.ConsulClient.ConfigEntries().Delete(consulapi.ProxyDefaults, consulapi.ProxyConfigGlobal, nil)
		return err
	}
	t.Cleanup(func() { _ = deleteDefaults() })
	awaitAccessLogs(t, w, "requests and listener to stdout as JSON")

	if err := deleteDefaults(); err != nil {
		t.Fatalf("delete proxy-defaults: %v", err)
	}
	awaitAccessLogs(t, w, "none")
}

func awaitAccessLogs(t *testing.T, w *envoy.Watcher, want string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "the port 80 listener's access logs: "+want, func(context.Context) error {
		if got := accessLogsOf(w, 80); got != want {
			return fmt.Errorf("access logs: %s", got)
		}
		return nil
	})
}

// accessLogsOf says what the listener on port logs: "none", "requests and listener to
// stdout as JSON" when both its HTTP connection managers and the listener log to
// stdout in accessLogFormat, or what else it found.
func accessLogsOf(w *envoy.Watcher, port uint32) string {
	cfg := w.Current()
	if cfg == nil {
		return "no complete configuration yet"
	}
	var l *listenerv3.Listener
	for name, candidate := range cfg.Listeners {
		if strings.HasSuffix(name, fmt.Sprintf(":%d", port)) {
			l = candidate
		}
	}
	if l == nil {
		return fmt.Sprintf("no listener on port %d", port)
	}
	var requestLogs []string
	for _, chain := range l.GetFilterChains() {
		for _, f := range chain.GetFilters() {
			h := &hcmv3.HttpConnectionManager{}
			if !f.GetTypedConfig().MessageIs(h) {
				continue
			}
			if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
				return err.Error()
			}
			for _, log := range h.GetAccessLog() {
				requestLogs = append(requestLogs, stdoutJSON(log.GetTypedConfig()))
			}
		}
	}
	var listenerLogs []string
	for _, log := range l.GetAccessLog() {
		listenerLogs = append(listenerLogs, stdoutJSON(log.GetTypedConfig()))
	}
	switch {
	case len(requestLogs) == 0 && len(listenerLogs) == 0:
		return "none"
	case len(requestLogs) == 1 && requestLogs[0] == "stdout JSON" && len(listenerLogs) == 1 && listenerLogs[0] == "stdout JSON":
		return "requests and listener to stdout as JSON"
	}
	return fmt.Sprintf("requests %v, listener %v", requestLogs, listenerLogs)
}

// stdoutJSON says "stdout JSON" for a stdout access logger in accessLogFormat, and
// what the logger is otherwise.
func stdoutJSON(a *anypb.Any) string {
	logger := &streamv3.StdoutAccessLog{}
	if !a.MessageIs(logger) {
		return a.GetTypeUrl()
	}
	if err := a.UnmarshalTo(logger); err != nil {
		return err.Error()
	}
	format := logger.GetLogFormat().GetJsonFormat()
	if format == nil {
		return "stdout, not JSON"
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(accessLogFormat), &want); err != nil {
		return err.Error()
	}
	if diff := cmp.Diff(want, format.AsMap()); diff != "" {
		return "stdout JSON of another format (-recipe +served): " + diff
	}
	return "stdout JSON"
}
