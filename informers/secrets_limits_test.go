package informers

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	configfake "github.com/consul-gateway-controller/consul-gateway-controller/api/client/fake"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The cache keeps of a certificate Secret only tls.crt and tls.key, and of a Secret
// whose two keys are over maxCertificateBytes nothing, marked refused.
func TestSecretCacheKeepsOnlyCertificateKeys(t *testing.T) {
	padded := testenv.TLSSecret("infra", "padded", []byte("cert"), []byte("key"))
	padded.Data["ca.crt"] = []byte("ca")
	padded.Data["padding"] = bytes.Repeat([]byte("x"), 512<<10)
	oversize := testenv.TLSSecret("infra", "oversize", bytes.Repeat([]byte("c"), maxCertificateBytes), []byte("key"))
	forged := testenv.TLSSecret("infra", "forged", []byte("cert"), []byte("key"))
	forged.Annotations = map[string]string{refusedSizeAnnotation: "1"}
	kube := kubefake.NewClientset([]runtime.Object{padded, oversize, forged}...)
	serveFieldSelectors(kube)
	gateways := newGatewayClientset(t, gateway("infra", "public", "consul", "",
		certRef("", "padded"), certRef("", "oversize"), certRef("", "forged")))
	i := startInformers(t, New(kube, gateways, configfake.NewClientset(), 0))
	lister := i.Secrets.Lister().Secrets("infra")

	tests := []struct {
		name        string
		wantKeys    []string
		wantRefusal string
	}{
		{name: "padded", wantKeys: []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}},
		{name: "oversize", wantRefusal: "65539 bytes"},
		{name: "forged", wantKeys: []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret, err := lister.Get(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			// The transform may run twice on one object (a watch-list's events).
			again, err := trimSecret(secret.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(secret, again); diff != "" {
				t.Errorf("trimSecret twice differs from once (-once +twice):\n%s", diff)
			}
			var keys []string
			for key := range secret.Data {
				keys = append(keys, key)
			}
			if diff := cmp.Diff(tt.wantKeys, keys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("data keys cached (-want +got):\n%s", diff)
			}
			refusal := SecretRefusal(secret)
			if tt.wantRefusal == "" && refusal != "" || !strings.Contains(refusal, tt.wantRefusal) {
				t.Errorf("SecretRefusal = %q, want it to contain %q", refusal, tt.wantRefusal)
			}
		})
	}
}

// WithSecretClient's client, not New's, lists and watches the certificate Secrets, so
// that they take a budget of their own.
func TestSecretCacheUsesItsOwnClient(t *testing.T) {
	main := kubefake.NewClientset()
	secrets := kubefake.NewClientset(testenv.TLSSecret("infra", "cert", []byte("cert"), []byte("key")))
	serveFieldSelectors(secrets)
	gateways := newGatewayClientset(t, gateway("infra", "public", "consul", "", certRef("", "cert")))
	i := startInformers(t, New(main, gateways, configfake.NewClientset(), 0, WithSecretClient(secrets)))

	if _, err := i.Secrets.Lister().Secrets("infra").Get("cert"); err != nil {
		t.Errorf("Get through the Secrets' own client: %v", err)
	}
	for _, action := range main.Actions() {
		if action.GetResource().Resource == "secrets" {
			t.Errorf("the main client was asked for Secrets: %s", action.GetVerb())
		}
	}
}

// Only listeners of Gateways of the controller's classes, and of ListenerSets attached
// to them, open watches, only for the references they are permitted, and at most
// WithSecretsPerNamespace distinct Secrets per namespace, the oldest referrers first;
// the lister answers SecretOverCapError past the cap.
func TestSecretCacheScope(t *testing.T) {
	const ours gatewayv1.GatewayController = "example.com/ours"
	created := func(gw *gatewayv1.Gateway, minute int) *gatewayv1.Gateway {
		gw.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC))
		return gw
	}
	var theirRefs []gatewayv1.SecretObjectReference
	for n := range 50 {
		theirRefs = append(theirRefs, certRef("", fmt.Sprintf("cert-%d", n)))
	}
	objs := []runtime.Object{
		testenv.GatewayClass("ours", ours),
		testenv.GatewayClass("theirs", "example.com/theirs"),
		created(gateway("other-class", "foreign", "theirs", "", theirRefs...), 0),
		created(gateway("apps", "ungranted", "ours", "", certRef("certs", "shared")), 0),
		created(gateway("granted", "edge", "ours", "", certRef("certs", "shared")), 0),
		testenv.ReferenceGrant("certs", "to-granted", gatewayapi.SecretKind,
			gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: gatewayapi.GatewayKind, Namespace: "granted"}),
		// "new" is listed first by name but was created last: "old" wins the cap.
		created(gateway("busy", "old", "ours", "", certRef("", "s1"), certRef("", "s2")), 1),
		created(gateway("busy", "a-new", "ours", "", certRef("", "s2"), certRef("", "s3")), 2),
	}
	kube := kubefake.NewClientset()
	serveFieldSelectors(kube)
	gateways := newGatewayClientset(t, objs...)
	i := startInformers(t, New(kube, gateways, configfake.NewClientset(), 0,
		WithControllerName(ours), WithSecretsPerNamespace(2)))

	want := map[cache.ObjectName]int{
		secretName("certs", "shared"): 1,
		secretName("busy", "s1"):      1,
		secretName("busy", "s2"):      1,
	}
	if diff := cmp.Diff(want, watched(i.Secrets)); diff != "" {
		t.Errorf("watched Secrets (-want +got):\n%s", diff)
	}
	var overCap *SecretOverCapError
	_, err := i.Secrets.Lister().Secrets("busy").Get("s3")
	if !errors.As(err, &overCap) || *overCap != (SecretOverCapError{Namespace: "busy", Cap: 2}) {
		t.Errorf("Get busy/s3 = %v, want SecretOverCapError for namespace busy, cap 2", err)
	}
	if _, err := i.Secrets.Lister().Secrets("other-class").Get("cert-0"); !apierrors.IsNotFound(err) {
		t.Errorf("Get other-class/cert-0 = %v, want NotFound", err)
	}

	// A ListenerSet counts with its Gateway's class: attached to the foreign Gateway it
	// opens no watch, attached to one of ours it does. They are handled in order, so
	// once the second is watched the first has been judged.
	for _, set := range []*gatewayv1.ListenerSet{
		testenv.ListenerSet("sets", "on-foreign", gatewayv1.ParentGatewayReference{Name: "foreign", Namespace: new(gatewayv1.Namespace("other-class"))},
			httpsEntry("https", certRef("", "foreign-set-cert"))),
		testenv.ListenerSet("sets", "on-ours", gatewayv1.ParentGatewayReference{Name: "edge", Namespace: new(gatewayv1.Namespace("granted"))},
			httpsEntry("https", certRef("", "set-cert"))),
	} {
		if _, err := gateways.GatewayV1().ListenerSets("sets").Create(t.Context(), set, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "sets/set-cert watched", func() bool { return watched(i.Secrets)[secretName("sets", "set-cert")] == 1 })
	if _, ok := watched(i.Secrets)[secretName("sets", "foreign-set-cert")]; ok {
		t.Error("a ListenerSet attached to a Gateway of another class has its Secret watched")
	}

	// The oldest Gateway goes: the newer one's Secrets fit under the cap.
	if err := gateways.GatewayV1().Gateways("busy").Delete(t.Context(), "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "busy/s3 watched once busy/old is gone", func() bool {
		got := watched(i.Secrets)
		return got[secretName("busy", "s3")] == 1 && got[secretName("busy", "s2")] == 1
	})

	// The grant goes: so does the watch of the Secret it permitted.
	i.Secrets.releaseDelay = 0
	if err := gateways.GatewayV1().ReferenceGrants("certs").Delete(t.Context(), "to-granted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "certs/shared released once its grant is gone", func() bool {
		_, ok := watched(i.Secrets)[secretName("certs", "shared")]
		return !ok
	})
}
