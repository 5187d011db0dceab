package dataplane

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

// The GatewayConfig CRD in deploy/crds is served, its typed client reads and watches
// it, and the API server refuses what its schema forbids, with a message naming the
// field.
func TestGatewayConfigCRD(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "config")
	configs := env.ConfigClient
	api := configs.GatewayConfigs(ns)
	watcher, err := api.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()

	valid := &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "valid"},
		Spec: v1alpha1.GatewayConfigSpec{
			Consul:   &v1alpha1.ConsulConnection{Address: "consul-server.consul.svc", GRPCPort: new(int32(8503))},
			Replicas: &v1alpha1.Replicas{Default: new(int32(2)), Min: new(int32(1)), Max: new(int32(3))},
			LogLevel: "debug",
		},
	}
	created, err := api.Create(ctx, valid, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := api.Get(ctx, "valid", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Consul.GRPCPort != 8503 || *got.Spec.Replicas.Default != 2 || got.ResourceVersion != created.ResourceVersion {
		t.Errorf("read back %+v", got.Spec)
	}
	select {
	case e := <-watcher.ResultChan():
		if e.Type != watch.Added || e.Object.(*v1alpha1.GatewayConfig).Name != "valid" {
			t.Errorf("watch event %s %T", e.Type, e.Object)
		}
	case <-time.After(10 * time.Second):
		t.Error("no watch event for the created GatewayConfig")
	}
	list, err := configs.GatewayConfigs("").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		t.Errorf("list across namespaces: %d items, %v", len(list.Items), err)
	}

	for _, tt := range []struct {
		name    string
		edit    func(*v1alpha1.GatewayConfigSpec)
		message string
	}{
		{"max of zero", func(s *v1alpha1.GatewayConfigSpec) { s.Replicas = &v1alpha1.Replicas{Max: new(int32(0))} }, "spec.replicas.max"},
		{"port out of range", func(s *v1alpha1.GatewayConfigSpec) { s.Consul.GRPCPort = new(int32(70000)) }, "spec.consul.grpcPort"},
		{"min above max", func(s *v1alpha1.GatewayConfigSpec) { s.Replicas.Min = new(int32(5)) }, "min must not exceed max"},
		{"default above max", func(s *v1alpha1.GatewayConfigSpec) { s.Replicas.Default = new(int32(9)) }, "default must not exceed max"},
		{"unknown log level", func(s *v1alpha1.GatewayConfigSpec) { s.LogLevel = "verbose" }, "spec.logLevel"},
		{"unknown Service type", func(s *v1alpha1.GatewayConfigSpec) {
			s.Service = &v1alpha1.ServiceConfig{Type: new(corev1.ServiceType("ExternalName"))}
		}, "spec.service.type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := valid.DeepCopy()
			bad.Name, bad.ResourceVersion = "bad", ""
			tt.edit(&bad.Spec)
			_, err := api.Create(ctx, bad, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("create: %v; want Invalid naming %q", err, tt.message)
			}
		})
	}
}
