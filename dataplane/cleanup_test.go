package dataplane

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
)

const (
	us   gatewayv1.GatewayController = "example.com/us"
	them gatewayv1.GatewayController = "example.com/them"
)

func class(name string, controller gatewayv1.GatewayController) *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gatewayv1.GatewayClassSpec{ControllerName: controller}}
}

// gatewayObject is metadata as Desired writes it for gw under class, deployed by
// controller ("" for an object without controllerAnnotation).
func gatewayObject(gw *gatewayv1.Gateway, name, class string, controller gatewayv1.GatewayController) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{
		Namespace: gw.Namespace, Name: name, UID: types.UID("uid-obj-" + name), ResourceVersion: "7",
		Labels: map[string]string{GatewayNameLabel: gw.Name, GatewayClassLabel: class, ManagedByLabel: ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway",
			Name: gw.Name, UID: gw.UID, Controller: new(true)}},
	}
	if controller != "" {
		meta.Annotations = map[string]string{controllerAnnotation: string(controller)}
	}
	return meta
}

func TestDeployedByUs(t *testing.T) {
	gw := testGateway("web")
	c := &Controller{cfg: Config{ControllerName: us, Classes: classLister(class("ours", us), class("theirs", them))}}
	notControlled := gatewayObject(gw, "x", "ours", us)
	notControlled.OwnerReferences[0].UID = "uid-another-web"
	unmanaged := gatewayObject(gw, "x", "ours", us)
	unmanaged.Labels[ManagedByLabel] = "someone-else"
	for _, tc := range []struct {
		name string
		meta metav1.ObjectMeta
		want bool
	}{
		{"annotated ours", gatewayObject(gw, "x", "ours", us), true},
		{"annotated ours, its class another's since", gatewayObject(gw, "x", "theirs", us), true},
		{"annotated another's", gatewayObject(gw, "x", "ours", them), false},
		{"unannotated, class ours", gatewayObject(gw, "x", "ours", ""), true},
		{"unannotated, class gone", gatewayObject(gw, "x", "gone", ""), true},
		{"unannotated, class another's", gatewayObject(gw, "x", "theirs", ""), false},
		{"unannotated, no class label", gatewayObject(gw, "x", "", ""), false},
		{"controlled by another Gateway of the name", notControlled, false},
		{"not managed by this kind of controller", unmanaged, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.deployedByUs(&tc.meta, gw)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("deployedByUs = %v, want %v", got, tc.want)
			}
		})
	}
}

func classLister(classes ...*gatewayv1.GatewayClass) gatewaylisters.GatewayClassLister {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range classes {
		_ = indexer.Add(c)
	}
	return gatewaylisters.NewGatewayClassLister(indexer)
}

func gatewayLister(gateways ...*gatewayv1.Gateway) gatewaylisters.GatewayLister {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, gw := range gateways {
		_ = indexer.Add(gw)
	}
	return gatewaylisters.NewGatewayLister(indexer)
}

// objectsOf are a Deployment, Service and ServiceAccount of meta.
func objectsOf(meta metav1.ObjectMeta) []runtime.Object {
	return []runtime.Object{&appsv1.Deployment{ObjectMeta: meta}, &corev1.Service{ObjectMeta: meta}, &corev1.ServiceAccount{ObjectMeta: meta}}
}

// A Gateway without an accepted confirmation loses the objects this controller
// deployed for it only when it is no longer ours; each delete names the UID and
// resourceVersion judged.
func TestSyncUnconfirmed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		class   string // the Gateway's
		deleted bool   // the Gateway
		want    []string
	}{
		{name: "still ours, not accepted: stays", class: "ours"},
		{name: "moved to another controller's class", class: "theirs", want: []string{"Deployment web-ours", "Service web-ours", "ServiceAccount web-ours"}},
		{name: "moved to a class that does not exist", class: "missing", want: []string{"Deployment web-ours", "Service web-ours", "ServiceAccount web-ours"}},
		{name: "Gateway deleted: the garbage collector's", class: "theirs", deleted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := testGateway("web")
			gw.Spec.GatewayClassName = gatewayv1.ObjectName(tc.class)
			var objects []runtime.Object
			objects = append(objects, objectsOf(gatewayObject(gw, "web-ours", "ours", us))...)
			// The other controller's, for the class the Gateway moved to.
			objects = append(objects, objectsOf(gatewayObject(gw, "web-theirs", "theirs", them))...)
			objects = append(objects, &appsv1.Deployment{ObjectMeta: gatewayObject(gw, "web-legacy-theirs", "theirs", "")})
			gateways := gatewayLister(gw)
			if tc.deleted {
				gateways = gatewayLister()
			}
			got := runSync(t, Config{ControllerName: us, Gateways: gateways, Classes: classLister(class("ours", us), class("theirs", them))}, objects, gw)
			if !slices.Equal(got, tc.want) {
				t.Errorf("deleted %q, want %q", got, tc.want)
			}
		})
	}
}

// runSync runs one sync of gw against a fake API server holding objects, and returns
// the deletes it made as "<Kind> <name>".
func runSync(t *testing.T, cfg Config, objects []runtime.Object, gw *gatewayv1.Gateway) []string {
	t.Helper()
	ctx := t.Context()
	client := fake.NewClientset(objects...)
	cfg.Client = client
	cfg.Owned = informers.NewOwned(client, ManagedSelector, 0)
	c, err := NewController(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Owned.StartWithContext(ctx)
	t.Cleanup(cfg.Owned.Shutdown)
	if !cache.WaitForCacheSync(ctx.Done(), cfg.Owned.HasSynced()...) {
		t.Fatal("owned caches did not sync")
	}
	if _, err := c.sync(ctx, cache.MetaObjectToName(gw)); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, a := range client.Actions() {
		del, ok := a.(k8stesting.DeleteActionImpl)
		if !ok {
			continue
		}
		p := del.DeleteOptions.Preconditions
		if p == nil || p.UID == nil || *p.UID != types.UID("uid-obj-"+del.Name) || p.ResourceVersion == nil || *p.ResourceVersion != "7" {
			t.Errorf("delete of %s %s without the UID and resourceVersion judged: %+v", del.Resource.Resource, del.Name, p)
		}
		deleted = append(deleted, kindOf(del.Resource.Resource)+" "+del.Name)
	}
	slices.Sort(deleted)
	return deleted
}

func kindOf(resource string) string {
	return map[string]string{"deployments": "Deployment", "services": "Service", "serviceaccounts": "ServiceAccount"}[resource]
}
