package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// gatewayAPIModule is the module whose shipped CRDs the harness installs. Its version is
// the one the root go.mod requires, so the CRDs always match the generated clients.
const gatewayAPIModule = "sigs.k8s.io/gateway-api"

// StandardCRDDir returns config/crd/standard inside the gateway-api module that the
// repository's go.mod selects, downloading the module if it is not cached yet.
func StandardCRDDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", gatewayAPIModule)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate %s: %w: %s", gatewayAPIModule, err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		// `go list -m` leaves Dir empty when the module is not in the module cache yet.
		dl := exec.Command("go", "mod", "download", gatewayAPIModule)
		dl.Dir = root
		if out, err := dl.CombinedOutput(); err != nil {
			return "", fmt.Errorf("download %s: %w: %s", gatewayAPIModule, err, out)
		}
		return StandardCRDDir()
	}
	return filepath.Join(dir, "config", "crd", "standard"), nil
}

// InstallGatewayAPI creates every object of the standard-channel manifests (the CRDs and
// the validating admission policy that guards upgrades) and waits until each CRD is
// Established and served.
func InstallGatewayAPI(ctx context.Context, cfg *rest.Config) error {
	dir, err := StandardCRDDir()
	if err != nil {
		return err
	}
	return InstallManifests(ctx, cfg, dir)
}

// InstallProjectCRDs installs this project's own CRDs (deploy/crds) and the consul-k8s
// CRDs it reads (deploy/consul-k8s: MeshService), and waits until each is Established
// and served.
func InstallProjectCRDs(ctx context.Context, cfg *rest.Config) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	for _, dir := range []string{"crds", "consul-k8s"} {
		if err := InstallManifests(ctx, cfg, filepath.Join(root, "deploy", dir)); err != nil {
			return err
		}
	}
	return nil
}

// InstallManifests creates every object of the manifests in dir (CRDs and validating
// admission policies; objects that exist are left as they are) and waits until each
// CRD among them is Established and served.
func InstallManifests(ctx context.Context, cfg *rest.Config, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no manifests in %s", dir)
	}
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var crdNames []string
	for _, file := range files {
		names, err := applyManifestFile(ctx, ext, core, file)
		if err != nil {
			return fmt.Errorf("install %s: %w", filepath.Base(file), err)
		}
		crdNames = append(crdNames, names...)
	}
	for _, name := range crdNames {
		if err := waitEstablished(ctx, ext, name); err != nil {
			return err
		}
	}
	return nil
}

// applyManifestFile creates each document of a manifest file and returns the names of
// the CRDs among them. Objects that exist already are left as they are.
func applyManifestFile(ctx context.Context, ext apiextensionsclient.Interface, core kubernetes.Interface, file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var crdNames []string
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return crdNames, nil
		}
		if err != nil {
			return nil, err
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, err
		}
		name, err := createManifestObject(ctx, ext, core, meta.Kind, doc)
		if err != nil {
			return nil, err
		}
		if meta.Kind == "CustomResourceDefinition" {
			crdNames = append(crdNames, name)
		}
	}
}

func createManifestObject(ctx context.Context, ext apiextensionsclient.Interface, core kubernetes.Interface, kind string, doc []byte) (string, error) {
	var name string
	var err error
	switch kind {
	case "":
		return "", nil // an empty document between separators
	case "CustomResourceDefinition":
		obj := &apiextensionsv1.CustomResourceDefinition{}
		if err = yaml.UnmarshalStrict(doc, obj); err == nil {
			name = obj.Name
			_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, obj, metav1.CreateOptions{})
		}
	case "ValidatingAdmissionPolicy":
		obj := &admissionv1.ValidatingAdmissionPolicy{}
		if err = yaml.UnmarshalStrict(doc, obj); err == nil {
			name = obj.Name
			_, err = core.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, obj, metav1.CreateOptions{})
		}
	case "ValidatingAdmissionPolicyBinding":
		obj := &admissionv1.ValidatingAdmissionPolicyBinding{}
		if err = yaml.UnmarshalStrict(doc, obj); err == nil {
			name = obj.Name
			_, err = core.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, obj, metav1.CreateOptions{})
		}
	default:
		return "", fmt.Errorf("unexpected kind %q in the Gateway API manifests", kind)
	}
	if apierrors.IsAlreadyExists(err) {
		err = nil
	}
	return name, err
}

func waitEstablished(ctx context.Context, ext apiextensionsclient.Interface, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not Established: %w", name, err)
	}
	return nil
}
