package testenv

import (
	"context"
	"fmt"
	"os"

	consulapi "github.com/hashicorp/consul/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CACert is the PEM of the certificates the API server's serving certificate chains
// to (its self-signed CA), as a client outside the harness must trust them.
func (k *KubeAPI) CACert() ([]byte, error) {
	pem, err := os.ReadFile(k.caFile)
	if err != nil {
		return nil, fmt.Errorf("read the API server's CA: %w", err)
	}
	return pem, nil
}

// authReviewer is the ServiceAccount, in kube-system, whose token a Kubernetes auth
// method sends with each TokenReview, as consul-k8s's auth method's is.
const authReviewer = "consul-auth-method"

// CreateKubernetesAuthMethod creates, in the Consul that client (a management token)
// talks to, a Kubernetes auth method named name that checks ServiceAccount tokens
// against this Env's API server: a loopback HTTPS call, so pod logins are real. The
// reviewer ServiceAccount it uses may create TokenReviews and read ServiceAccounts,
// nothing else. The auth method is deleted when ctx's test ends only if the caller
// does so; Consul agents of one test go with it anyway.
func (e *Env) CreateKubernetesAuthMethod(ctx context.Context, client *consulapi.Client, name string) error {
	jwt, err := e.reviewerToken(ctx)
	if err != nil {
		return err
	}
	ca, err := e.Kube.CACert()
	if err != nil {
		return err
	}
	method := &consulapi.ACLAuthMethod{
		Name: name, Type: "kubernetes", Description: "testenv: ServiceAccount logins of this harness's API server",
		Config: map[string]any{"Host": e.Kube.Host(), "CACert": string(ca), "ServiceAccountJWT": jwt},
	}
	if _, _, err := client.ACL().AuthMethodCreate(method, (&consulapi.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("create auth method %s: %w", name, err)
	}
	return nil
}

// reviewerToken makes the reviewer ServiceAccount and its grants once, and returns a
// token of it from the TokenRequest API.
func (e *Env) reviewerToken(ctx context.Context) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: authReviewer, Namespace: "kube-system"}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: authReviewer},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: authReviewer},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: authReviewer},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: authReviewer, Namespace: "kube-system"}},
	}
	if _, err := e.KubeClient.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create reviewer ServiceAccount: %w", err)
	}
	if _, err := e.KubeClient.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create reviewer ClusterRole: %w", err)
	}
	if _, err := e.KubeClient.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create reviewer ClusterRoleBinding: %w", err)
	}
	return e.ServiceAccountToken(ctx, sa.Namespace, sa.Name)
}

// ServiceAccountToken is a token of the ServiceAccount from the TokenRequest API, as
// the kubelet projects into its pods (kwok's pods have none, so tests ask for it).
func (e *Env) ServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	tr, err := e.KubeClient.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}
