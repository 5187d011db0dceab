package node

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
)

// TestGatewayPodStartsOnThisKernel starts the gateway container of the Deployment
// dataplane.Desired renders as a node would, up to consul-dataplane's first bind: the
// runtime's creds for its securityContext (credsFor) are applied by setpriv in a
// network namespace of its own carrying the pod's sysctls; the image's entrypoint
// execs a binary carrying consul-dataplane's file capability (cap_net_bind_service=+ep,
// as its 1.1.13 image ships it), which binds each container port on loopback. The
// variations show what each setting does: without NET_BIND_SERVICE in the bounding
// set the exec fails, and with no_new_privs the file capability grants nothing, so
// the sysctl is what lets ports below 1024 bind.
func TestGatewayPodStartsOnThisKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test starts a container as a runtime does (a network namespace, setpriv, a file capability): run it as root, as CI does")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to apply a container's creds: %v", err)
	}
	rendered := renderedDeployment(t)
	initBin, dataplaneBin := installBinaries(t)

	allBind := map[int32]string{80: "ok", 443: "ok", 8080: "ok", 21000: "ok"}
	for _, tc := range []struct {
		name string
		edit func(pod *corev1.PodSpec, c *corev1.Container)
		// wantExec is the error the exec of consul-dataplane fails with; "" when it runs.
		wantExec      string
		wantEffective []string
		wantBound     map[int32]string
	}{{
		name:          "the rendered pod",
		wantEffective: []string{},
		wantBound:     allBind,
	}, {
		name: "drop ALL without adding NET_BIND_SERVICE",
		edit: func(_ *corev1.PodSpec, c *corev1.Container) {
			c.SecurityContext.Capabilities.Add = nil
		},
		wantExec: "operation not permitted",
	}, {
		// allowPrivilegeEscalation: false sets no_new_privs, which keeps the file
		// capability from granting anything: ports below 1024 need the sysctl.
		name:          "without the sysctl",
		edit:          func(pod *corev1.PodSpec, _ *corev1.Container) { pod.SecurityContext.Sysctls = nil },
		wantEffective: []string{},
		wantBound:     map[int32]string{80: "permission denied", 443: "permission denied", 8080: "ok", 21000: "ok"},
	}, {
		name: "without no_new_privs or the sysctl: the file capability binds",
		edit: func(pod *corev1.PodSpec, c *corev1.Container) {
			pod.SecurityContext.Sysctls = nil
			c.SecurityContext.AllowPrivilegeEscalation = nil
		},
		wantEffective: []string{"NET_BIND_SERVICE"},
		wantBound:     allBind,
	}, {
		// consul-k8s 1.2 and later on Kubernetes other than OpenShift.
		name: "as consul-k8s's api-gateway container: root, drop ALL, add NET_BIND_SERVICE",
		edit: func(pod *corev1.PodSpec, c *corev1.Container) {
			pod.SecurityContext = nil
			c.SecurityContext = &corev1.SecurityContext{
				RunAsUser:              new(int64(0)),
				ReadOnlyRootFilesystem: new(true),
				Capabilities:           &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
			}
		},
		wantEffective: []string{"NET_BIND_SERVICE"},
		wantBound:     allBind,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pod := rendered.Spec.Template.Spec.DeepCopy()
			c := &pod.Containers[0]
			if tc.edit != nil {
				tc.edit(pod, c)
			}
			cr, err := credsFor(pod, c, consulDataplaneUser)
			if err != nil {
				t.Fatal(err)
			}
			got, err := startContainer(stageConfig{Creds: cr, Setpriv: setpriv, Init: initBin, Dataplane: dataplaneBin, Ports: containerPorts(c)})
			if tc.wantExec != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantExec) {
					t.Fatalf("creds %+v: want the exec of consul-dataplane to fail with %q, got %v (report %+v)", cr, tc.wantExec, err, got)
				}
				t.Logf("creds %+v: %v", cr, err)
				return
			}
			if err != nil {
				t.Fatalf("creds %+v: %v", cr, err)
			}
			// The kernel holds the creds the model computed, then what the exec and
			// the binds made of them.
			want := report{UID: cr.UID, GID: cr.GID, Bounding: cr.Bounding, NoNewPrivs: cr.NoNewPrivs,
				Effective: tc.wantEffective, Bound: tc.wantBound}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("creds %+v (-want +got):\n%s", cr, diff)
			}
		})
	}
}

// renderedDeployment is the Deployment dataplane.Desired renders for a Gateway with
// listeners on 80, 443 and 8080, with the controller's default image.
func renderedDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	http := func(name string, port gatewayv1.PortNumber) gatewayv1.Listener {
		return gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType}
	}
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "edge", UID: "uid-edge"},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "consul", Listeners: []gatewayv1.Listener{http("http", 80), http("https", 443), http("alt", 8080)}},
	}
	class := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "consul"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: "consul-gateway-controller.github.io/gateway-controller"}}
	objects := dataplane.Desired(dataplane.Gateway{Gateway: gw, Class: class},
		dataplane.Defaults{Image: v1alpha1.DefaultImage, ConsulAddress: "consul-server.consul.svc", GRPCPort: v1alpha1.DefaultGRPCPort, TLS: true})
	data, err := json.Marshal(objects.Deployment)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	containers := d.Spec.Template.Spec.Containers
	if len(containers) != 1 || len(d.Spec.Template.Spec.InitContainers) != 0 {
		t.Fatalf("the gateway pod has %d containers and %d init containers; this test models one container", len(containers), len(d.Spec.Template.Spec.InitContainers))
	}
	// consulDataplaneUser is this image's USER.
	if containers[0].Image != v1alpha1.DefaultImage || v1alpha1.DefaultImage != "hashicorp/consul-dataplane:1.1.13" {
		t.Fatalf("image %s: consulDataplaneUser describes hashicorp/consul-dataplane:1.1.13; read the new image's Dockerfile", containers[0].Image)
	}
	return &d
}

func containerPorts(c *corev1.Container) []int32 {
	var ports []int32
	for _, p := range c.Ports {
		ports = append(ports, p.ContainerPort)
	}
	return ports
}

// installBinaries copies the test binary twice into a directory every user may
// enter: init, without file capabilities, and consul-dataplane, with the image's.
func installBinaries(t *testing.T) (initBin, dataplaneBin string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "node-exec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	initBin, dataplaneBin = filepath.Join(dir, "dumb-init"), filepath.Join(dir, "consul-dataplane")
	for _, path := range []string{initBin, dataplaneBin} {
		if err := copyFile(self, path); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Setxattr(dataplaneBin, "security.capability", fileCapability(netBindService), 0); err != nil {
		t.Fatalf("set the file capability of %s: %v", dataplaneBin, err)
	}
	return initBin, dataplaneBin
}

// netBindService is CAP_NET_BIND_SERVICE's bit.
const netBindService = 10

// fileCapability is a security.capability value granting caps permitted and
// effective: struct vfs_cap_data revision 2 (linux/capability.h), little-endian: the
// magic with the effective flag, then permitted and inheritable of bits 0-31, then of
// bits 32-63.
func fileCapability(caps ...int) []byte {
	const revision2, effective = 0x02000000, 0x000001
	data := make([]byte, 20)
	binary.LittleEndian.PutUint32(data, revision2|effective)
	for _, c := range caps {
		permitted := data[4+8*(c/32):]
		binary.LittleEndian.PutUint32(permitted, binary.LittleEndian.Uint32(permitted)|1<<(c%32))
	}
	return data
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// startContainer runs the runtime role in a new network namespace and returns the
// dataplane role's report, or the error of the first role that failed.
func startContainer(cfg stageConfig) (report, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return report{}, err
	}
	self, err := os.Executable()
	if err != nil {
		return report{}, err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{roleEnv + "=runtime", configEnv + "=" + string(data)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return report{}, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var r report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return report{}, fmt.Errorf("the dataplane role's report %q: %w", stdout.String(), err)
	}
	return r, nil
}
