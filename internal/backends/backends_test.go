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
	Want    struct {
		Service string `json:"service"`
		Pods    int    `json:"pods"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"want"`
}

func TestResolve(t *testing.T) {
	raw, err := os.ReadFile("testdata/resolve.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []resolveCase
	if err := yaml.UnmarshalStrict(raw, &cases); err != nil {
		t.Fatalf("testdata/resolve.yaml: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var port *corev1.ServicePort
			for i := range tc.Service.Spec.Ports {
				if tc.Service.Spec.Ports[i].Port == tc.Port {
					port = &tc.Service.Spec.Ports[i]
				}
			}
			if port == nil {
				t.Fatalf("the Service has no port %d", tc.Port)
			}
			ref := tc.Service.Namespace + "/" + tc.Service.Name
			got, problem := Resolve(ref, tc.Service, port, tc.Pods)
			if tc.Want.Reason != "" {
				if problem == nil {
					t.Fatalf("Resolve = %+v, want a %s problem", got, tc.Want.Reason)
				}
				if problem.Reason != tc.Want.Reason || !strings.Contains(problem.Message, tc.Want.Message) {
					t.Fatalf("problem %s: %s\nwant %s containing %q", problem.Reason, problem.Message, tc.Want.Reason, tc.Want.Message)
				}
				return
			}
			if problem != nil {
				t.Fatalf("unexpected problem %s: %s", problem.Reason, problem.Message)
			}
			if diff := cmp.Diff(Resolution{Service: tc.Want.Service, Pods: tc.Want.Pods}, got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
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
