package backends

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// resolveCase is one case of testdata/resolve.yaml.
type resolveCase struct {
	Name    string          `json:"name"`
	Service *corev1.Service `json:"service"`
	Pods    []*corev1.Pod   `json:"pods"`
	Port    int32           `json:"port"`
	Want    wantResolution  `json:"want"`
}

// wantResolution is what a case expects: a resolution, or a problem with its reason
// and part of its message.
type wantResolution struct {
	Service string `json:"service"`
	Pods    int    `json:"pods"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// check compares what a resolver returned with w; it reports whether a resolution
// (not a problem) was expected and got.
func (w wantResolution) check(t *testing.T, resolver string, got Resolution, problem *Problem) bool {
	t.Helper()
	if w.Reason != "" {
		if problem == nil {
			t.Fatalf("%s = %+v, want a %s problem", resolver, got, w.Reason)
		}
		if problem.Reason != w.Reason || !strings.Contains(problem.Message, w.Message) {
			t.Fatalf("problem %s: %s\nwant %s containing %q", problem.Reason, problem.Message, w.Reason, w.Message)
		}
		return false
	}
	if problem != nil {
		t.Fatalf("unexpected problem %s: %s", problem.Reason, problem.Message)
	}
	if diff := cmp.Diff(Resolution{Service: w.Service, Pods: w.Pods}, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", resolver, diff)
	}
	return true
}

// readCases reads a testdata file of cases.
func readCases[T any](t *testing.T, path string) []T {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []T
	if err := yaml.UnmarshalStrict(raw, &cases); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cases
}

// servicePort is svc's port numbered port.
func servicePort(t *testing.T, svc *corev1.Service, port int32) *corev1.ServicePort {
	t.Helper()
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			return &svc.Spec.Ports[i]
		}
	}
	t.Fatalf("the Service has no port %d", port)
	return nil
}

func TestResolve(t *testing.T) {
	for _, tc := range readCases[resolveCase](t, "testdata/resolve.yaml") {
		t.Run(tc.Name, func(t *testing.T) {
			port := servicePort(t, tc.Service, tc.Port)
			ref := tc.Service.Namespace + "/" + tc.Service.Name
			got, problem := Resolve(ref, tc.Service, port, tc.Pods)
			if !tc.Want.check(t, "Resolve", got, problem) {
				return
			}
			// Trimming keeps whatever resolution reads.
			trimmed := make([]*corev1.Pod, len(tc.Pods))
			for i, p := range tc.Pods {
				trimmed[i] = Trim(p)
			}
			if again, problem := Resolve(ref, tc.Service, port, trimmed); problem != nil || again != got {
				t.Errorf("on trimmed pods: %+v, %+v; want %+v", again, problem, got)
			}
		})
	}
}

func TestConsulNames(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	pod := func(name, annotation string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Labels: map[string]string{"app": "web", InjectStatusLabel: Injected}}}
		if annotation != "" {
			p.Annotations = map[string]string{ServiceAnnotation: annotation}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want []string
	}{
		{"no pods: none", nil, nil},
		{"pods of another Service only: none", []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "x", Labels: map[string]string{"app": "db", InjectStatusLabel: Injected}}}}, nil},
		{"one name", []*corev1.Pod{pod("a", "api"), pod("b", "api")}, []string{"api"}},
		{"every name the pods use", []*corev1.Pod{pod("a", "api"), pod("b", ""), pod("c", "api")}, []string{"api", "web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ConsulNames(svc, tc.pods)); diff != "" {
				t.Errorf("ConsulNames (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrim(t *testing.T) {
	now := metav1.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "apps", Name: "web-1", ResourceVersion: "7", UID: "u", DeletionTimestamp: &now,
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{ServiceAnnotation: "api", "kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1000)},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1234"}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{
				{Name: "sidecar", Image: "envoy", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}},
				{Name: "app", Image: "web", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP, HostPort: 80}}},
			},
			NodeName: "node",
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "apps", Name: "web-1", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{ServiceAnnotation: "api"},
		},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{}, {Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	got := Trim(pod)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Trim (-want +got):\n%s", diff)
	}
	if !SameResolution(got, Trim(pod)) {
		t.Error("a pod resolves unlike itself")
	}
	moved := pod.DeepCopy()
	moved.Spec.Containers[1].Ports[0].ContainerPort = 9090
	if SameResolution(got, Trim(moved)) {
		t.Error("a changed container port resolves alike")
	}
	relabelled := pod.DeepCopy()
	relabelled.Labels = map[string]string{"app": "api"}
	if SameResolution(got, Trim(relabelled)) {
		t.Error("changed labels resolve alike")
	}
}

func TestTargetPort(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
	for _, tc := range []struct {
		port   corev1.ServicePort
		want   int32
		wantOK bool
	}{
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080)}, 8080, true},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("http")}, 8080, true},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("grpc")}, 0, false},
		{corev1.ServicePort{Port: 80}, 80, true},
	} {
		got, ok := TargetPort(&tc.port, pod)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("TargetPort(%v) = %d, %v; want %d, %v", tc.port.TargetPort.String(), got, ok, tc.want, tc.wantOK)
		}
	}
}
