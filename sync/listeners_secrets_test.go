package sync

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
)

// erringSecrets is a SecretLister whose Get answers err, as the Secret cache does for
// a Secret it does not watch.
type erringSecrets struct{ err error }

func (l erringSecrets) List(labels.Selector) ([]*corev1.Secret, error) { return nil, nil }

func (l erringSecrets) Secrets(string) corelisters.SecretNamespaceLister { return l }

func (l erringSecrets) Get(string) (*corev1.Secret, error) { return nil, l.err }

// A certificateRef to a Secret past its namespace's cap is InvalidCertificateRef,
// saying so: not "missing", which the user could not make sense of.
func TestCheckCertificateRefOverCap(t *testing.T) {
	refs := listenerRefs{secrets: erringSecrets{&informers.SecretOverCapError{Namespace: "apps", Cap: 100}}}
	owner := listenerOwner{kind: "Gateway", namespace: "apps", name: "edge"}
	_, reason, message, err := checkCertificateRef(owner, gatewayv1.SecretObjectReference{Name: "cert-101"}, refs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{string(gatewayv1.ListenerReasonInvalidCertificateRef),
		"Secret apps/cert-101 is not watched: the listeners of namespace apps name more than 100 Secrets, the controller's limit per namespace; the oldest Gateways' and ListenerSets' references are served first"}
	if diff := cmp.Diff(want, []string{string(reason), message}); diff != "" {
		t.Errorf("reason and message (-want +got):\n%s", diff)
	}
}
