package informers

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	configfake "github.com/consul-gateway-controller/consul-gateway-controller/api/client/fake"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The cache keeps of a certificate Secret only tls.crt and tls.key, and of a Secret
// whose two keys are over MaxCertificateBytes nothing, marked refused.
func TestSecretCacheKeepsOnlyCertificateKeys(t *testing.T) {
	padded := testenv.TLSSecret("infra", "padded", []byte("cert"), []byte("key"))
	padded.Data["ca.crt"] = []byte("ca")
	padded.Data["padding"] = bytes.Repeat([]byte("x"), 512<<10)
	oversize := testenv.TLSSecret("infra", "oversize", bytes.Repeat([]byte("c"), MaxCertificateBytes), []byte("key"))
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
