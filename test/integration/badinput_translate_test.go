package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/cli"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// refusedByTheAPIServer are the corpus cases in which the API server refuses an
// object (its CRD validation, or the CEL rules in it): the controller never sees that
// object, so TestBadInputCorpus checks only the API server there. translate has no API
// server in front of it.
func refusedByTheAPIServer(cases []badCase) []badCase {
	var out []badCase
	for _, c := range cases {
		if slices.ContainsFunc(c.expect.Objects, func(o objectExpect) bool { return o.Refused != "" }) {
			out = append(out, c)
		}
	}
	return out
}

// badInputRefusedCases is how many corpus cases the API server refuses an object of;
// pinned like badInputCases, so that the split the report shows cannot drift.
const badInputRefusedCases = 42

// TestTranslateRefusesWhatTheAPIServerRefuses feeds each corpus case the API server
// refuses to the translate command, which has no API server in front of it and
// admits each custom resource as the API server does (internal/cli/admission.go). It
// must not panic, must exit 1, and each object the API server refuses must be
// refused there too: listed as refused with the API server's own words (the case's
// "refused" text), told on stderr, not judged, and given no Consul entry. Nothing is
// left out: no case is beyond what the CRDs' schemas and CEL rules judge offline.
func TestTranslateRefusesWhatTheAPIServerRefuses(t *testing.T) {
	all := loadBadCases(t)
	cases := refusedByTheAPIServer(all)
	t.Logf("the corpus: %d cases, of which %d are refused by the API server alone (the controller never sees those objects) and %d are judged by the controller",
		len(all), len(cases), len(all)-len(cases))
	if len(cases) != badInputRefusedCases {
		t.Errorf("%d corpus cases are refused by the API server, want %d (badInputRefusedCases)", len(cases), badInputRefusedCases)
	}
	const controller = "test.example.com/" + badInputClass
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".yaml"), func(t *testing.T) {
			result, stderr, code, panicked := translateCase(t, c, controller)
			if panicked != "" {
				t.Fatalf("translate panicked: %s", panicked)
			}
			if code != 1 {
				t.Errorf("translate exited %d, want 1 (an object refused); stderr: %s", code, stderr)
			}
			for _, want := range c.expect.Objects {
				if want.Refused == "" {
					continue
				}
				for _, problem := range translateRefusal(result, stderr, want, c.ns, controller) {
					t.Errorf("%s %s, which the API server refuses (%q): %s", want.Kind, want.Name, want.Refused, problem)
				}
			}
		})
	}
}

// translateRefusal says how translate's result and stderr fail to refuse the object
// want names as the API server does; nothing when they do.
func translateRefusal(result cli.Result, stderr string, want objectExpect, caseNS, controller string) []string {
	ns := objectNamespace(want, caseNS)
	var problems []string
	i := slices.IndexFunc(result.Refused, func(r cli.Refusal) bool {
		return r.Kind == want.Kind && r.Name == want.Name && r.Namespace == ns
	})
	switch {
	case i < 0:
		problems = append(problems, fmt.Sprintf("translate does not list it as refused (refused: %v; stderr: %s)", result.Refused, stderr))
	case !strings.Contains(result.Refused[i].Message, want.Refused):
		problems = append(problems, fmt.Sprintf("translate refuses it otherwise than the API server: %s", result.Refused[i].Message))
	case !strings.Contains(stderr, result.Refused[i].Message):
		problems = append(problems, fmt.Sprintf("stderr does not tell its refusal: %s", stderr))
	}
	if slices.ContainsFunc(result.Objects, func(o cli.ObjectStatus) bool {
		return string(o.Kind) == want.Kind && o.Name == want.Name && o.Namespace == ns
	}) {
		problems = append(problems, "translate judged it anyway")
	}
	if accepted := translateAccepts(result, want, caseNS, controller); accepted != "" {
		problems = append(problems, accepted)
	}
	return problems
}

// objectNamespace is the namespace of the object want names: the case's unless it
// names another, none for a GatewayClass.
func objectNamespace(want objectExpect, caseNS string) string {
	if want.Namespace == "" && want.Kind != "GatewayClass" {
		return caseNS
	}
	return want.Namespace
}

// translateCase runs the translate command in this process on the case's objects,
// with the shared class and the case's backend Service; a panic is caught and
// returned as text.
func translateCase(t *testing.T, c badCase, controller string) (result cli.Result, stderr string, code int, panicked string) {
	t.Helper()
	var input bytes.Buffer
	write := func(obj any) {
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		input.WriteString("---\n")
		input.Write(data)
	}
	class := testenv.GatewayClass(badInputClass, gatewayv1.GatewayController(controller))
	class.TypeMeta = metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "GatewayClass"}
	write(class)
	namespace := testenv.Namespace(c.ns, nil)
	namespace.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}
	write(namespace)
	service := testenv.Service(c.ns, c.ns+"-echo", testenv.BackendPort)
	service.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	write(service)
	for _, obj := range c.objects {
		o := obj.DeepCopy()
		if o.GetNamespace() == "" && namespacedKind(o) {
			o.SetNamespace(c.ns)
		}
		write(o.Object)
	}
	var stdout, errOut bytes.Buffer
	func() {
		defer func() {
			if r := recover(); r != nil {
				panicked = fmt.Sprint(r)
			}
		}()
		code = cli.Translate([]string{"-o", "json", "--controller-name=" + controller, "--cluster-id=bad"}, &input, &stdout, &errOut)
	}()
	// A refusal prints the result of the other objects, then exits 1; an input that
	// cannot be read prints nothing.
	if panicked != "" || stdout.Len() == 0 {
		return result, errOut.String(), code, panicked
	}
	if err := json.Unmarshal(stdout.Bytes(), &result); err != nil {
		t.Fatalf("translate's output: %v\n%s", err, stdout.String())
	}
	return result, errOut.String(), code, ""
}

// namespacedKind reports whether the case object's kind lives in a namespace: the
// corpus's cluster-scoped kinds are GatewayClasses and Namespaces.
func namespacedKind(o *unstructured.Unstructured) bool {
	return o.GetKind() != "GatewayClass" && o.GetKind() != "Namespace"
}

// translateAccepts says how translate's result accepts the object want names, ""
// when it refuses it. A GatewayClass, Gateway or ListenerSet counts as accepted when
// it and all its listeners are Accepted (a refusal may be about one listener); a
// route when a parent of ours accepts it; and any object that gets a Consul entry.
func translateAccepts(result cli.Result, want objectExpect, caseNS, controller string) string {
	ns := objectNamespace(want, caseNS)
	var problems []string
	for _, raw := range result.Entries {
		entry, err := consulapi.DecodeConfigEntryFromJSON(raw)
		if err != nil {
			problems = append(problems, "an entry translate printed does not decode: "+err.Error())
			continue
		}
		m := entry.GetMeta()
		if m["k8s-kind"] == want.Kind && m["k8s-name"] == want.Name && m["k8s-namespace"] == ns {
			problems = append(problems, fmt.Sprintf("it gets the %s entry %s", entry.GetKind(), entry.GetName()))
		}
	}
	i := slices.IndexFunc(result.Objects, func(o cli.ObjectStatus) bool {
		return string(o.Kind) == want.Kind && o.Name == want.Name && o.Namespace == ns
	})
	if i >= 0 {
		if accepted := acceptedIn(result.Objects[i], controller); accepted != "" {
			problems = append(problems, accepted)
		}
	}
	return strings.Join(problems, "; ")
}

// acceptedIn says how an object's computed status accepts it, "" when it does not.
func acceptedIn(o cli.ObjectStatus, controller string) string {
	data, err := json.Marshal(o.Status)
	if err != nil {
		return err.Error()
	}
	var s struct {
		Conditions []metav1.Condition `json:"conditions"`
		Listeners  []struct {
			Name       string             `json:"name"`
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"listeners"`
		Parents []struct {
			ControllerName string             `json:"controllerName"`
			Conditions     []metav1.Condition `json:"conditions"`
		} `json:"parents"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return err.Error()
	}
	if o.Withheld {
		return ""
	}
	switch o.Kind {
	case "GatewayClass", "Gateway", "ListenerSet":
		if !meta.IsStatusConditionTrue(s.Conditions, "Accepted") {
			return ""
		}
		for _, l := range s.Listeners {
			if !meta.IsStatusConditionTrue(l.Conditions, "Accepted") {
				return ""
			}
		}
		return "it and all its listeners are Accepted"
	default:
		for _, p := range s.Parents {
			if p.ControllerName == controller && meta.IsStatusConditionTrue(p.Conditions, "Accepted") {
				return "a parent of ours accepts it"
			}
		}
		return ""
	}
}
