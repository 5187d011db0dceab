package main

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/responder"
)

// --responder-service turns the responder on in both halves: the status pipeline
// accepts RequestRedirect, and the translation sends to the responder. Unset, both
// stay as they were.
func TestResponderServiceReachesBothHalves(t *testing.T) {
	off := mustParse(t)
	if capabilities(off) != consullimits.Consul115 || translateOptions(off).Responder != (translate.Responder{}) {
		t.Errorf("without --responder-service: capabilities %+v, responder %+v; want Consul 1.15's and none", capabilities(off), translateOptions(off).Responder)
	}
	on := mustParse(t, "--responder-service=resp", "--consul-destination-namespace=ns")
	if !capabilities(on).RequestRedirect {
		t.Error("with --responder-service the status pipeline still refuses RequestRedirect")
	}
	if diff := cmp.Diff(translate.Responder{Name: "resp", Namespace: "ns"}, translateOptions(on).Responder); diff != "" {
		t.Errorf("responder (-want +got):\n%s", diff)
	}
}

// The responder command's flags: the catalog entry defaults to the pod's name and IP
// and the listen port, and what cannot work is refused.
func TestResponderFlags(t *testing.T) {
	t.Setenv("HOSTNAME", "responder-abc")
	t.Setenv("POD_IP", "10.0.0.7")
	f, code := parseResponderFlags([]string{"--listen-address=:20001", "--consul-http-addr=http://127.0.0.1:8500"}, io.Discard)
	if f == nil {
		t.Fatalf("refused (exit %d)", code)
	}
	want := responder.Registration{ID: "responder-abc", Address: "10.0.0.7", Port: 20001}
	if diff := cmp.Diff(want, responder.Registration{ID: f.serviceID, Address: f.advertiseAddress, Port: f.advertisePort}); diff != "" {
		t.Errorf("registration (-want +got):\n%s", diff)
	}
	if f.service != defaultResponderService {
		t.Errorf("service %q, want %q", f.service, defaultResponderService)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--service="}, "--service"},
		{[]string{"--listen-address=:0"}, "no fixed port"},
		{[]string{"--advertise-address="}, "--advertise-address"},
		{[]string{"--consul-http-addr=http://10.0.0.1:8500"}, "plaintext"},
	} {
		var stderr strings.Builder
		args := append([]string{"--consul-http-addr=http://127.0.0.1:8500"}, tt.args...)
		if f, code := parseResponderFlags(args, &stderr); f != nil || code != 2 {
			t.Errorf("%v: accepted (exit %d)", tt.args, code)
		}
		if !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: said %q, want it to say %q", tt.args, stderr.String(), tt.want)
		}
	}
}
