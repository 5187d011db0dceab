package translate

import (
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// namingPrefixes are the prefixes every naming property is checked with: none, a plain
// one, and ones that look like the parts of an entry name.
var namingPrefixes = []string{"", "cluster-a-", "k8s.", "secret.", "a"}

type kubeObject struct{ namespace, name string }

func TestEntryNameTable(t *testing.T) {
	maxNamespace := strings.Repeat("n", 63)
	maxName := strings.Repeat(strings.Repeat("a", 62)+".", 4) + strings.Repeat("b", 253-4*63)
	if len(maxName) != 253 {
		t.Fatalf("maxName has %d characters", len(maxName))
	}
	tests := []struct {
		obj  kubeObject
		want string // without prefix
	}{
		{kubeObject{"a", "b.c"}, "b.c.a"},
		{kubeObject{"b", "c.a"}, "c.a.b"},
		{kubeObject{"c", "a.b"}, "a.b.c"},
		{kubeObject{"a", "b"}, "b.a"},
		{kubeObject{"b", "a"}, "a.b"},
		{kubeObject{"a-b", "c"}, "c.a-b"},
		{kubeObject{"b", "c.a-b"}, "c.a-b.b"},
		{kubeObject{"a", "b-c"}, "b-c.a"},
		{kubeObject{"default", "secret.gw"}, "secret.gw.default"},
		{kubeObject{"0", "0"}, "0.0"},
		{kubeObject{maxNamespace, maxName}, maxName + "." + maxNamespace},
		{kubeObject{"x", maxName}, maxName + ".x"},
		{kubeObject{maxNamespace, "x"}, "x." + maxNamespace},
	}
	for _, prefix := range namingPrefixes {
		n := Naming{Prefix: prefix}
		seen := make(map[string]kubeObject)
		for _, tt := range tests {
			got := n.EntryName(tt.obj.namespace, tt.obj.name)
			if got != prefix+tt.want {
				t.Errorf("prefix %q: EntryName(%q, %q) = %q, want %q", prefix, tt.obj.namespace, tt.obj.name, got, prefix+tt.want)
			}
			if other, dup := seen[got]; dup {
				t.Errorf("prefix %q: %v and %v both map to %q", prefix, other, tt.obj, got)
			}
			seen[got] = tt.obj
			ns, name, ok := n.SplitEntryName(got)
			if !ok || ns != tt.obj.namespace || name != tt.obj.name {
				t.Errorf("prefix %q: SplitEntryName(%q) = (%q, %q, %v), want (%q, %q, true)", prefix, got, ns, name, ok, tt.obj.namespace, tt.obj.name)
			}
		}
	}
}

func TestSplitEntryNameRejectsForeignNames(t *testing.T) {
	tests := []struct {
		prefix, entryName string
	}{
		{"", "nodot"},
		{"", ".ns"},
		{"", "name."},
		{"", ""},
		{"p-", "name.ns"}, // no prefix
		{"p-", "p-.ns"},   // empty name after the prefix
		{"p-", "p-name."}, // empty namespace
		{"p-", "p-nodot"}, // no separator
		{"p-", "q-name.ns"},
	}
	for _, tt := range tests {
		n := Naming{Prefix: tt.prefix}
		if ns, name, ok := n.SplitEntryName(tt.entryName); ok {
			t.Errorf("prefix %q: SplitEntryName(%q) = (%q, %q, true), want not ok", tt.prefix, tt.entryName, ns, name)
		}
	}
}

// TestEntryNameProperties generates valid Kubernetes namespace/name pairs, drawn from a
// small alphabet so that near-collisions (dots and hyphens in the same places) are
// frequent, and checks that EntryName is injective and SplitEntryName inverts it.
func TestEntryNameProperties(t *testing.T) {
	objs := generateKubeObjects(rand.New(rand.NewPCG(1, 2)), 20000)
	for _, prefix := range namingPrefixes {
		n := Naming{Prefix: prefix}
		seen := make(map[string]kubeObject, len(objs))
		for _, obj := range objs {
			entry := n.EntryName(obj.namespace, obj.name)
			if other, dup := seen[entry]; dup && other != obj {
				t.Fatalf("prefix %q: %v and %v both map to %q", prefix, other, obj, entry)
			}
			seen[entry] = obj
			ns, name, ok := n.SplitEntryName(entry)
			if !ok || ns != obj.namespace || name != obj.name {
				t.Fatalf("prefix %q: SplitEntryName(EntryName(%q, %q)) = (%q, %q, %v)", prefix, obj.namespace, obj.name, ns, name, ok)
			}
		}
		if len(seen) < len(objs)/2 {
			t.Fatalf("generator produced only %d distinct objects", len(seen))
		}
	}
}

// TestCertificateNameVersusEntryName pins down how far certificate names are kept
// apart from entry names. For the same namespace/name they always differ. Across
// different objects they coincide exactly when the other object's name is "secret."
// followed by the Secret's name in the same namespace: a Gateway "secret.tls" and a
// Secret "tls" in one namespace share a name. That is harmless only while the two
// kinds map to different Consul kinds (api-gateway and inline-certificate), as
// names.go explains; a certificate kind that shares a Consul kind with an entry would
// need a separator Kubernetes names cannot contain.
func TestCertificateNameVersusEntryName(t *testing.T) {
	if c, e := (Naming{}).CertificateName("default", "tls"), (Naming{}).EntryName("default", "secret.tls"); c != e {
		t.Errorf("the documented coincidence is gone: CertificateName = %q, EntryName = %q; tighten this test", c, e)
	}
	objs := generateKubeObjects(rand.New(rand.NewPCG(3, 4)), 3000)
	// Add the objects that come closest: names that begin with "secret.".
	for _, o := range objs[:500] {
		if len(o.name) <= 253-len("secret.") {
			objs = append(objs, kubeObject{o.namespace, "secret." + o.name})
		}
	}
	for _, prefix := range namingPrefixes {
		n := Naming{Prefix: prefix}
		entries := make(map[string]kubeObject, len(objs))
		for _, o := range objs {
			entries[n.EntryName(o.namespace, o.name)] = o
		}
		certs := make(map[string]kubeObject, len(objs))
		for _, secret := range objs {
			cert := n.CertificateName(secret.namespace, secret.name)
			if cert == n.EntryName(secret.namespace, secret.name) {
				t.Fatalf("prefix %q: %v has the same certificate and entry name %q", prefix, secret, cert)
			}
			if other, dup := certs[cert]; dup && other != secret {
				t.Fatalf("prefix %q: Secrets %v and %v share the certificate name %q", prefix, other, secret, cert)
			}
			certs[cert] = secret
			if obj, clash := entries[cert]; clash {
				if obj.namespace != secret.namespace || obj.name != "secret."+secret.name {
					t.Fatalf("prefix %q: certificate name of %v equals the entry name of %v", prefix, secret, obj)
				}
			}
		}
	}
}

func TestNamespace(t *testing.T) {
	tests := []struct {
		name   string
		naming Naming
		kubeNS string
		want   string
	}{
		{"CE", Naming{}, "team-a", ""},
		{"CE with a prefix only", Naming{Prefix: "c1-"}, "team-a", ""},
		{"destination", Naming{DestinationNamespace: "gateways"}, "team-a", "gateways"},
		{"destination for another namespace", Naming{DestinationNamespace: "gateways"}, "team-b", "gateways"},
		{"mirror", Naming{MirrorNamespaces: true}, "team-a", "team-a"},
		{"mirror with prefix", Naming{MirrorNamespaces: true, MirrorPrefix: "k8s-"}, "team-a", "k8s-team-a"},
		{"mirroring wins over destination", Naming{MirrorNamespaces: true, MirrorPrefix: "k8s-", DestinationNamespace: "gateways"}, "team-a", "k8s-team-a"},
		{"mirror prefix without mirroring is unused", Naming{MirrorPrefix: "k8s-", DestinationNamespace: "gateways"}, "team-a", "gateways"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.naming.Namespace(tt.kubeNS); got != tt.want {
				t.Errorf("Namespace(%q) = %q, want %q", tt.kubeNS, got, tt.want)
			}
		})
	}
}

// generateKubeObjects returns count valid namespace/name pairs: namespaces are RFC 1123
// labels (at most 63 characters), names RFC 1123 subdomains (at most 253), as
// Kubernetes requires of Gateways, routes and Secrets. Lengths include the maxima.
func generateKubeObjects(r *rand.Rand, count int) []kubeObject {
	objs := make([]kubeObject, 0, count)
	for range count {
		objs = append(objs, kubeObject{namespace: randomLabel(r, 63), name: randomSubdomain(r)})
	}
	return objs
}

func TestGeneratedKubeObjectsAreValid(t *testing.T) {
	for _, o := range generateKubeObjects(rand.New(rand.NewPCG(1, 2)), 20000) {
		if errs := validation.IsDNS1123Label(o.namespace); len(errs) > 0 {
			t.Fatalf("namespace %q: %v", o.namespace, errs)
		}
		if errs := validation.IsDNS1123Subdomain(o.name); len(errs) > 0 {
			t.Fatalf("name %q: %v", o.name, errs)
		}
	}
}

// randomLabel returns an RFC 1123 label of 1 to maxLen characters, mostly short ones.
func randomLabel(r *rand.Rand, maxLen int) string {
	n := 1 + r.IntN(4)
	switch r.IntN(10) {
	case 0:
		n = maxLen
	case 1:
		n = 1 + r.IntN(maxLen)
	}
	const inner = "ab-"
	const edge = "ab0"
	b := make([]byte, n)
	for i := range b {
		if i == 0 || i == n-1 {
			b[i] = edge[r.IntN(len(edge))]
		} else {
			b[i] = inner[r.IntN(len(inner))]
		}
	}
	return string(b)
}

// randomSubdomain returns an RFC 1123 subdomain: dot-separated labels, at most 253
// characters.
func randomSubdomain(r *rand.Rand) string {
	if r.IntN(20) == 0 { // the maximum length, in full labels and a last short one
		var sb strings.Builder
		for sb.Len()+64 <= 253 {
			sb.WriteString(randomLabel(r, 63)[:1] + strings.Repeat("a", 62) + ".")
		}
		sb.WriteString(strings.Repeat("b", 253-sb.Len()))
		return sb.String()
	}
	labels := make([]string, 1+r.IntN(3)) // at most 3*63+2 characters
	for i := range labels {
		labels[i] = randomLabel(r, 63)
	}
	return strings.Join(labels, ".")
}
