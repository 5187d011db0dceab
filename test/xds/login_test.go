package xds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// The login test's objects (testdata/login.yaml) and its own controller's names.
const (
	loginNamespace  = "login"
	loginController = "test.example.com/login"
	loginAuthMethod = "gateway-pods"
	// loginCASecret is where the GatewayConfig tells gateway pods Consul's CA is.
	loginCASecret = "consul-ca"
)

// TestGatewayPodLogin does what a gateway pod's consul-dataplane does, against a
// default-deny Consul that speaks only TLS: it logs in through the Kubernetes auth
// method with a token of the Gateway's ServiceAccount (checked by Consul against the
// API server's TokenReview), and with the token it gets fetches the Gateway's xDS over
// TLS, with the CA of the GatewayConfig's Secret. The same token gets nothing of
// another Gateway's configuration, and may not take a backend's mesh identity or
// define its service-defaults. Once the Gateway is
// deleted, its binding rule, role and policy are gone and the login is refused.
func TestGatewayPodLogin(t *testing.T) {
	ctx := t.Context()
	agent, admin := startLoginConsul(t)
	controllerToken := loginControllerToken(t, admin)
	if err := kubectlApply(filepath.Join("testdata", "login.yaml")); err != nil {
		t.Fatal(err)
	}
	env.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: loginNamespace, Name: loginCASecret},
		Data:       map[string][]byte{"ca.crt": agent.CACertPEM()},
	})
	caFile := filepath.Join(t.TempDir(), "consul-ca.pem")
	if err := os.WriteFile(caFile, agent.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	env.RunController(t, testenv.ControllerOptions{
		Name: "login", ConsulAddr: "https://" + agent.HTTPSAddr(), ConsulToken: controllerToken,
		Env: []string{"CONSUL_CACERT=" + caFile},
		Args: []string{
			"--controller-name=" + loginController, "--cluster-id=login", "--leader-elect=false",
			"--manage-service-defaults", "--gateway-auth-method=" + loginAuthMethod, "-v=4",
		},
	})
	registerLoginBackend(t, admin)
	awaitGatewayProgrammed(t, loginNamespace, "edge")

	namer := identity.Namer{Ownership: translate.Ownership{Controller: loginController, ClusterID: "login"}}
	edge := cache.ObjectName{Namespace: loginNamespace, Name: "edge"}
	// How edge's pod reaches Consul, as the controller rendered its Deployment: the
	// ServiceAccount, auth method, CA Secret and server name the pod would use.
	edgePod := podConnectionOf(t, "edge")
	token := podLogin(t, admin, edgePod)
	if got := roleNames(token); !slices.Equal(got, []string{namer.Name(edge)}) {
		t.Errorf("the pod's token has roles %v, want only its Gateway's %s", got, namer.Name(edge))
	}
	tlsConfig := edgePod.tls

	// Its own Gateway's configuration: the listener of edge's port, routing to login-echo.
	proxy := instanceOf(t, admin, "edge")
	w := envoy.WatchWith(ctx, agent.GRPCTLSAddr(), proxy, envoy.DialOptions{Token: token.SecretID, TLS: tlsConfig})
	defer w.Close()
	fetchCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cfg, err := w.Config(fetchCtx, 2*time.Second)
	if err != nil {
		t.Fatalf("the pod's token over TLS got no configuration for its gateway: %v", err)
	}
	if listenerOn(cfg, 8080) == nil || listenerOn(cfg, 9090) != nil {
		t.Errorf("listeners served to edge's pod: %v, want the one on 8080 only", slices.Sorted(maps.Keys(cfg.Listeners)))
	}
	if !slices.ContainsFunc(slices.Sorted(maps.Keys(cfg.Clusters)), func(c string) bool { return strings.HasPrefix(c, "login-echo.") }) {
		t.Errorf("clusters served to edge's pod: %v, want echo's", slices.Sorted(maps.Keys(cfg.Clusters)))
	}

	// Another Gateway's configuration, with the same token: nothing. Consul 1.15 does
	// not end the stream of a token that may not write the proxy's service; it serves
	// it nothing (tls_test.go shows the same for a token of another service). The
	// positive control first: other's own pod gets it, so Consul has it to serve
	// when edge's token asks, and nothing served then means refused, not not ready.
	other := instanceOf(t, admin, "other")
	otherPod := podConnectionOf(t, "other")
	otherToken := podLogin(t, admin, otherPod)
	otherFetch, cancelOtherFetch := context.WithTimeout(ctx, 60*time.Second)
	defer cancelOtherFetch()
	if _, err := envoy.FetchWith(otherFetch, agent.GRPCTLSAddr(), other, envoy.DialOptions{Token: otherToken.SecretID, TLS: otherPod.tls}, 2*time.Second); err != nil {
		t.Fatalf("other's own token got no configuration: %v", err)
	}
	wo := envoy.WatchWith(ctx, agent.GRPCTLSAddr(), other, envoy.DialOptions{Token: token.SecretID, TLS: tlsConfig})
	defer wo.Close()
	otherCtx, cancelOther := context.WithTimeout(ctx, 10*time.Second)
	defer cancelOther()
	if cfg, err := wo.Config(otherCtx, time.Second); err == nil {
		t.Errorf("edge's token was served other's configuration: listeners %v", slices.Sorted(maps.Keys(cfg.Listeners)))
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("edge's token asking for other's configuration: %v (stream: %v), want nothing served", err, wo.Err())
	}

	// Acting as a backend, with the same token: its mesh identity (a leaf certificate
	// of login-echo) and its service-defaults are refused. (A catalog registration needs
	// node write, which no gateway token has, so it would say nothing of the service
	// rules.)
	asPod, err := agent.ClientWithToken(token.SecretID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := asPod.Agent().ConnectCALeaf("login-echo", nil); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("edge's token asking for echo's leaf certificate: %v, want Permission denied", err)
	}
	if _, _, err := asPod.ConfigEntries().Set(&consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "login-echo", Protocol: "tcp"}, nil); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("edge's token writing echo's service-defaults: %v, want Permission denied", err)
	}

	// The Gateway goes: its identity goes, and a new login is refused.
	if err := env.GatewayClient.GatewayV1().Gateways(loginNamespace).Delete(ctx, "edge", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "edge's binding rule, role and policy removed", func(context.Context) error {
		return identityGone(admin, namer, edge)
	})
	// A pod that runs as a ServiceAccount of the same name afterwards (the Gateway's
	// went with it, by garbage collection): Consul's TokenReview accepts its token,
	// and no binding rule gives it anything.
	testenv.Eventually(t, 60*time.Second, "the Gateway's ServiceAccount collected", func(ctx context.Context) error {
		_, err := env.KubeClient.CoreV1().ServiceAccounts(loginNamespace).Get(ctx, edgePod.serviceAccount, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return errors.New("still there")
	})
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: loginNamespace, Name: edgePod.serviceAccount}})
	saToken, err := env.ServiceAccountToken(ctx, loginNamespace, edgePod.serviceAccount)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = admin.ACL().Login(&consulapi.ACLLoginParams{AuthMethod: edgePod.authMethod, BearerToken: saToken}, nil)
	if err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("a login as edge-login after its Gateway went: %v, want Permission denied", err)
	}
}

func startLoginConsul(t *testing.T) (*testenv.ConsulAgent, *consulapi.Client) {
	t.Helper()
	agent, admin := testenv.StartConsulFor(t, env.LogDir(), testenv.ConsulOptions{ACL: true, TLS: true})
	if err := env.CreateKubernetesAuthMethod(t.Context(), admin, loginAuthMethod); err != nil {
		t.Fatal(err)
	}
	return agent, admin
}

// loginControllerToken is a token with the policies deploy/ documents for the managed
// identities: consul-acl-policy.hcl and consul-acl-policy-identities.hcl.
func loginControllerToken(t *testing.T, admin *consulapi.Client) string {
	t.Helper()
	rules, err := testenv.DeployPolicies("consul-acl-policy.hcl", "consul-acl-policy-identities.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return testenv.ACLToken(t, admin, "login-controller", rules)
}

// registerLoginBackend registers login-echo as consul-k8s registers a mesh pod: the service
// and its sidecar proxy.
func registerLoginBackend(t *testing.T, admin *consulapi.Client) {
	t.Helper()
	meta := map[string]string{translate.KubeNamespaceMeta: loginNamespace}
	for _, svc := range []*consulapi.AgentService{
		{ID: "login-echo", Service: "login-echo", Address: "10.2.1.1", Port: 8080, Meta: meta},
		{Kind: consulapi.ServiceKindConnectProxy, ID: "login-echo-sidecar-proxy", Service: "login-echo-sidecar-proxy", Address: "10.2.1.1", Port: 20000, Meta: meta,
			Proxy: &consulapi.AgentServiceConnectProxyConfig{DestinationServiceName: "login-echo", LocalServicePort: 8080}},
	} {
		if _, err := admin.Catalog().Register(&consulapi.CatalogRegistration{Node: "login-backends", Address: "10.2.1.254", Service: svc}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func awaitGatewayProgrammed(t *testing.T, ns, gateway string) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, "Gateway "+ns+"/"+gateway+" Programmed", func(ctx context.Context) error {
		gw, err := env.GatewayClient.GatewayV1().Gateways(ns).Get(ctx, gateway, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := testenv.ConditionTrue(gw.Status.Conditions, "Programmed"); err != nil {
			return fmt.Errorf("%w: %s", err, testenv.ConditionText(gw.Status.Conditions, "Programmed"))
		}
		return nil
	})
}

// podConnection is how a Gateway's pods reach Consul, as its Deployment says: what
// the test must take from the controller's rendering rather than from what it wrote.
type podConnection struct {
	serviceAccount string
	authMethod     string
	tls            *tls.Config // the CA of the Secret the pod mounts, and the server name it checks
}

// podConnectionOf reads the Deployment the controller rendered for the Gateway: its
// pods' ServiceAccount, consul-dataplane's -login-auth-method and -tls-server-name,
// and the CA in the Secret mounted where -ca-certs points.
func podConnectionOf(t *testing.T, gateway string) podConnection {
	t.Helper()
	var d appsv1.Deployment
	testenv.Eventually(t, 60*time.Second, "the gateway Deployment of "+gateway, func(ctx context.Context) error {
		list, err := env.KubeClient.AppsV1().Deployments(loginNamespace).List(ctx, metav1.ListOptions{LabelSelector: dataplane.GatewayNameLabel + "=" + gateway})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d Deployments", len(list.Items))
		}
		d = list.Items[0]
		return nil
	})
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("Deployment %s has %d containers, want consul-dataplane's", d.Name, len(pod.Containers))
	}
	args := map[string]string{}
	for _, a := range pod.Containers[0].Args {
		name, value, _ := strings.Cut(a, "=")
		args[name] = value
	}
	c := podConnection{serviceAccount: pod.ServiceAccountName, authMethod: args["-login-auth-method"]}
	if c.serviceAccount == "" || c.authMethod == "" || args["-credential-type"] != "login" {
		t.Fatalf("Deployment %s: ServiceAccount %q, args %v: want a login with an auth method", d.Name, c.serviceAccount, pod.Containers[0].Args)
	}
	caPath, serverName := args["-ca-certs"], args["-tls-server-name"]
	if caPath == "" || serverName == "" {
		t.Fatalf("Deployment %s: -ca-certs %q, -tls-server-name %q: want both", d.Name, caPath, serverName)
	}
	secret, key := mountedSecretKey(t, pod, caPath)
	s, err := env.KubeClient.CoreV1().Secrets(loginNamespace).Get(t.Context(), secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data[key]) {
		t.Fatalf("Secret %s key %s holds no CA certificate", secret, key)
	}
	c.tls = &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}
	return c
}

// mountedSecretKey is the Secret and key a pod sees at path: the volume mounted at
// path's directory, and the item whose path is path's file name.
func mountedSecretKey(t *testing.T, pod corev1.PodSpec, path string) (secret, key string) {
	t.Helper()
	dir, file := filepath.Split(path)
	for _, m := range pod.Containers[0].VolumeMounts {
		if filepath.Clean(m.MountPath) != filepath.Clean(dir) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			for _, item := range v.Secret.Items {
				if item.Path == file {
					return v.Secret.SecretName, item.Key
				}
			}
		}
	}
	t.Fatalf("no Secret is mounted at %s: mounts %+v, volumes %+v", path, pod.Containers[0].VolumeMounts, pod.Volumes)
	return "", ""
}

// podLogin logs in as consul-dataplane does with -credential-type=login: a token of
// the pod's ServiceAccount (here from the TokenRequest API, which kwok's pods lack)
// sent to Consul's login endpoint with the pod's auth method.
func podLogin(t *testing.T, client *consulapi.Client, pod podConnection) *consulapi.ACLToken {
	t.Helper()
	saToken, err := env.ServiceAccountToken(t.Context(), loginNamespace, pod.serviceAccount)
	if err != nil {
		t.Fatal(err)
	}
	var token *consulapi.ACLToken
	testenv.Eventually(t, 60*time.Second, "a login as ServiceAccount "+pod.serviceAccount, func(context.Context) error {
		token, _, err = client.ACL().Login(&consulapi.ACLLoginParams{AuthMethod: pod.authMethod, BearerToken: saToken}, nil)
		return err
	})
	return token
}

func roleNames(token *consulapi.ACLToken) []string {
	var names []string
	for _, r := range token.Roles {
		names = append(names, r.Name)
	}
	return names
}

// instanceOf waits for a passing catalog instance of the Gateway's pod.
func instanceOf(t *testing.T, admin *consulapi.Client, gateway string) envoy.Proxy {
	t.Helper()
	return passingGatewayInstance(t, admin, translate.Naming{}.EntryName(loginNamespace, gateway), anyNode)
}

func identityGone(admin *consulapi.Client, namer identity.Namer, gw cache.ObjectName) error {
	var left []string
	if p, _, err := admin.ACL().PolicyReadByName(namer.Name(gw), nil); err != nil || p != nil {
		left = append(left, fmt.Sprintf("policy (%v)", err))
	}
	if r, _, err := admin.ACL().RoleReadByName(namer.Name(gw), nil); err != nil || r != nil {
		left = append(left, fmt.Sprintf("role (%v)", err))
	}
	rules, _, err := admin.ACL().BindingRuleList(loginAuthMethod, nil)
	if err != nil {
		return err
	}
	for _, r := range rules {
		if owner, ok := namer.OwnerOf(r.Description); ok && owner == gw {
			left = append(left, "binding rule "+r.ID)
		}
	}
	if len(left) > 0 {
		return errors.New("left: " + strings.Join(left, ", "))
	}
	return nil
}
