package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestGatewayIdentityOnlyForItsOwnServiceAccount: a ServiceAccount of another team
// holds the name of the Gateway "taken"'s. Its tokens get no role of the Gateway's
// (no binding rule is written, and the rule of "edge" names its own ServiceAccount's
// UID), no Deployment or Service is created, and Programmed names it. Once it is
// deleted, the controller's own ServiceAccount is created and bound, and its token
// gets the Gateway's role. Before, the binding rule selected the name only, and the
// foreign ServiceAccount's token logged in as the Gateway.
func TestGatewayIdentityOnlyForItsOwnServiceAccount(t *testing.T) {
	s := newIdentityStack(t, "identity-foreign-sa")
	foreignSA := "taken-" + s.Class
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: foreignSA}})
	env.Create(t, s.Gateway("taken", testenv.HTTPListener("http", 18081)))
	s.run(t, "identity-foreign-sa", s.token)

	// "edge" beside it is whole: its binding rule names its ServiceAccount's UID.
	s.awaitComplete(t, "edge", "the identity of edge written")
	s.awaitProgrammedMessage(t, "taken", "the foreign ServiceAccount named",
		fmt.Sprintf("ServiceAccount %s/%s exists and is not controlled by Gateway taken", s.Namespace, foreignSA))
	ctx := t.Context()
	if o, err := s.objects(ctx, "taken"); err != nil || len(o.rules) != 0 {
		t.Errorf("binding rules of taken beside a foreign ServiceAccount: %+v (%v), want none", o.rules, err)
	}
	if _, err := env.KubeClient.AppsV1().Deployments(s.Namespace).Get(ctx, foreignSA, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment %s beside a foreign ServiceAccount: %v, want none", foreignSA, err)
	}
	if _, err := env.KubeClient.CoreV1().Services(s.Namespace).Get(ctx, foreignSA, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service %s beside a foreign ServiceAccount: %v, want none", foreignSA, err)
	}
	takenRole := s.namer.Name(cache.ObjectName{Namespace: s.Namespace, Name: "taken"})
	if roles, err := s.loginRoles(ctx, foreignSA); err == nil && slices.Contains(roles, takenRole) {
		t.Errorf("a token of the foreign ServiceAccount %s logged in with the Gateway's role %s", foreignSA, takenRole)
	}

	// The name freed, the controller's ServiceAccount is created and bound.
	if err := env.KubeClient.CoreV1().ServiceAccounts(s.Namespace).Delete(ctx, foreignSA, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.awaitComplete(t, "taken", "the identity of taken written once the name is free")
	testenv.Eventually(t, 60*time.Second, "the Gateway's own ServiceAccount logs in with its role", func(ctx context.Context) error {
		roles, err := s.loginRoles(ctx, foreignSA)
		if err != nil {
			return err
		}
		if !slices.Contains(roles, takenRole) {
			return fmt.Errorf("roles %v, want %s", roles, takenRole)
		}
		return nil
	})
}

// loginRoles logs in as a pod of the ServiceAccount would and returns the roles of the
// token Consul gives; Consul refuses a login no binding rule selects.
func (s identityStack) loginRoles(ctx context.Context, serviceAccount string) ([]string, error) {
	saToken, err := env.ServiceAccountToken(ctx, s.Namespace, serviceAccount)
	if err != nil {
		return nil, err
	}
	token, _, err := s.admin.ACL().Login(&consulapi.ACLLoginParams{AuthMethod: identityAuthMethod, BearerToken: saToken}, (&consulapi.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("login as ServiceAccount %s: %w", serviceAccount, err)
	}
	var roles []string
	for _, r := range token.Roles {
		roles = append(roles, r.Name)
	}
	return roles, nil
}
