package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// AdminUser is the identity of the harness's admin token (group system:masters).
const AdminUser = "admin"

// KubeAPI is an etcd plus a kube-apiserver with RBAC, token authentication and
// self-signed serving certificates, all on loopback.
type KubeAPI struct {
	etcd      *process
	apiserver *process
	host      string
	caFile    string
	tokens    map[string]string
}

func startKubeAPI(dir, logDir string, users []string, extraArgs []string) (*KubeAPI, error) {
	etcdBin, err := binary("etcd")
	if err != nil {
		return nil, err
	}
	apiserverBin, err := binary("kube-apiserver")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	etcdPeer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	k := &KubeAPI{
		host:   fmt.Sprintf("https://127.0.0.1:%d", ports[2]),
		caFile: filepath.Join(dir, "certs", "apiserver.crt"),
		tokens: map[string]string{},
	}
	k.etcd = &process{
		watched: true,
		name:    "etcd",
		path:    etcdBin,
		logPath: filepath.Join(logDir, "etcd.log"),
		args: []string{
			"--name=testenv",
			"--data-dir=" + filepath.Join(dir, "etcd"),
			"--listen-client-urls=" + etcdClient,
			"--advertise-client-urls=" + etcdClient,
			"--listen-peer-urls=" + etcdPeer,
			"--initial-advertise-peer-urls=" + etcdPeer,
			"--initial-cluster=testenv=" + etcdPeer,
			"--unsafe-no-fsync",
		},
	}
	apiserverArgs, err := k.writeAuthFiles(dir, users)
	if err != nil {
		return nil, err
	}
	k.apiserver = &process{
		watched: true,
		name:    "kube-apiserver",
		path:    apiserverBin,
		logPath: filepath.Join(logDir, "kube-apiserver.log"),
		args: append(apiserverArgs,
			"--etcd-servers="+etcdClient,
			"--cert-dir="+filepath.Join(dir, "certs"),
			"--bind-address=127.0.0.1",
			// Also where the kubernetes Service points; without it the server looks for
			// a default route, which a loopback-only network namespace has not.
			"--advertise-address=127.0.0.1",
			// A loopback address is refused for the kubernetes Service's endpoints, which
			// nothing here uses.
			"--endpoint-reconciler-type=none",
			"--secure-port="+strconv.Itoa(ports[2]),
			"--authorization-mode=RBAC",
			"--service-cluster-ip-range=10.96.0.0/16",
		),
	}
	k.apiserver.args = append(k.apiserver.args, extraArgs...)
	if err := k.StartEtcd(); err != nil {
		return nil, err
	}
	if err := k.StartAPIServer(); err != nil {
		_ = k.etcd.stop(5 * time.Second)
		return nil, err
	}
	return k, nil
}

// writeAuthFiles creates the service-account key pair and the static token file (an
// admin in system:masters and one token per named test identity, with no groups beyond
// system:authenticated, so tests grant them exactly what RBAC they mean to test).
func (k *KubeAPI) writeAuthFiles(dir string, users []string) ([]string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	keyFile := filepath.Join(dir, "sa.key")
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	var lines []string
	for i, user := range append([]string{AdminUser}, users...) {
		token, err := randomToken()
		if err != nil {
			return nil, err
		}
		k.tokens[user] = token
		line := fmt.Sprintf("%s,%s,uid-%d", token, user, i)
		if user == AdminUser {
			line += `,"system:masters"`
		}
		lines = append(lines, line)
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	return []string{
		"--service-account-key-file=" + keyFile,
		"--service-account-signing-key-file=" + keyFile,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--token-auth-file=" + tokenFile,
	}, nil
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// StartEtcd starts etcd (again) on its data dir and waits until it serves.
func (k *KubeAPI) StartEtcd() error {
	if err := k.etcd.start(); err != nil {
		return err
	}
	url := k.EtcdURL() + "/health"
	return k.etcd.waitFor(30*time.Second, func() error { return httpOK(http.DefaultClient, url, "") })
}

// EtcdURL is etcd's client URL.
func (k *KubeAPI) EtcdURL() string {
	return strings.TrimPrefix(k.etcd.args[2], "--listen-client-urls=")
}

// StopEtcd stops etcd; its data dir is kept for StartEtcd.
func (k *KubeAPI) StopEtcd() error { return k.etcd.stop(10 * time.Second) }

// StartAPIServer starts kube-apiserver (again) and waits for /readyz.
func (k *KubeAPI) StartAPIServer() error {
	if err := k.apiserver.start(); err != nil {
		return err
	}
	return k.apiserver.waitFor(60*time.Second, func() error {
		client, err := rest.HTTPClientFor(k.Config(AdminUser))
		if err != nil {
			return err
		}
		return httpOK(client, k.host+"/readyz", "")
	})
}

// StopAPIServer stops kube-apiserver gracefully.
func (k *KubeAPI) StopAPIServer() error { return k.apiserver.stop(15 * time.Second) }

// Host is the apiserver's https URL.
func (k *KubeAPI) Host() string { return k.host }

// Token returns the bearer token of a user named in Options.Users, or of AdminUser.
func (k *KubeAPI) Token(user string) string {
	token, ok := k.tokens[user]
	if !ok {
		panic(fmt.Sprintf("testenv: no token for user %q; name it in Options.Users", user))
	}
	return token
}

// Config returns a rest.Config that authenticates as user and trusts the serving cert.
func (k *KubeAPI) Config(user string) *rest.Config {
	return &rest.Config{
		Host:            k.host,
		BearerToken:     k.Token(user),
		TLSClientConfig: rest.TLSClientConfig{CAFile: k.caFile},
		QPS:             100,
		Burst:           200,
	}
}

// WriteKubeconfig writes a kubeconfig for user to path, for binaries and kubectl.
func (k *KubeAPI) WriteKubeconfig(path, user string) error {
	return k.WriteTokenKubeconfig(path, user, k.Token(user))
}

// WriteTokenKubeconfig writes a kubeconfig that authenticates with token (for example a
// ServiceAccount's, from the TokenRequest API) to path; name labels it.
func (k *KubeAPI) WriteTokenKubeconfig(path, name, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: k.host, CertificateAuthority: k.caFile}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: name}
	cfg.CurrentContext = "testenv"
	return clientcmd.WriteToFile(*cfg, path)
}

func (k *KubeAPI) stop() error {
	apiErr := k.apiserver.stop(15 * time.Second)
	etcdErr := k.etcd.stop(10 * time.Second)
	if apiErr != nil {
		return apiErr
	}
	return etcdErr
}

// httpOK GETs url and returns nil on 200.
func httpOK(client *http.Client, url, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("X-Consul-Token", token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
