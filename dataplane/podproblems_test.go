package dataplane

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// podProblemCase is one case of testdata/pod_problems.yaml: pods as the cache lists
// them, and the text firstPodProblem makes of them.
type podProblemCase struct {
	Name string       `json:"name"`
	Want string       `json:"want"`
	Pods []corev1.Pod `json:"pods"`
}

func TestPodProblem(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "pod_problems.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []podProblemCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			pods := make([]*corev1.Pod, len(tc.Pods))
			for i := range tc.Pods {
				pods[i] = &tc.Pods[i]
			}
			if diff := cmp.Diff(tc.Want, firstPodProblem(pods)); diff != "" {
				t.Errorf("firstPodProblem (-want +got):\n%s", diff)
			}
		})
	}
}
