package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// How the read-only commands read. The Kubernetes API only with list: the controller's
// ClusterRole grants list and watch and never get, and the commands run under it in
// the controller's pod; one object is read with a list whose field selector names it.
// Consul in the Enterprise namespace and partition the controller writes its entries
// to, each request bounded by --consul-timeout; the first Consul failure is kept, so
// a command prints what the cluster says and then that Consul was not reached,
// instead of aborting.

// ExitConsulNotRead is the exit code of a read-only command that printed the
// Kubernetes half of its answer but could not read Consul's.
const ExitConsulNotRead = 3

// defaultConsulTimeout bounds each Consul request of a read-only command: long
// enough for a list of every entry of a large Consul, short enough that a command
// run because Consul is in trouble answers.
const defaultConsulTimeout = 10 * time.Second

// addConsulNamingFlags adds the controller's flags that say where in Consul its
// entries are (Consul Enterprise), to n.
func addConsulNamingFlags(fs *pflag.FlagSet, n *translate.Naming) {
	fs.StringVar(&n.Partition, "consul-partition", "", "the controller's --consul-partition: Consul Enterprise admin partition of its entries (Consul CE refuses it)")
	fs.StringVar(&n.DestinationNamespace, "consul-destination-namespace", "", "the controller's --consul-destination-namespace: Consul Enterprise namespace of its entries (Consul CE refuses it)")
	fs.BoolVar(&n.MirrorNamespaces, "consul-mirror-namespaces", false, "the controller's --consul-mirror-namespaces: entries in the Consul Enterprise namespace named like their Kubernetes namespace")
	fs.StringVar(&n.MirrorPrefix, "consul-mirror-namespaces-prefix", "", "the controller's --consul-mirror-namespaces-prefix")
}

// kubeClientConfig is the kubeconfig at path, or kubectl's ($KUBECONFIG,
// ~/.kube/config), or the in-cluster configuration.
func kubeClientConfig(path string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
}

// kubeConfig loads the kubeconfig at path, as kubeClientConfig finds it.
func kubeConfig(path string) (*rest.Config, error) {
	cfg, err := kubeClientConfig(path).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// contextNamespace is the namespace of the kubeconfig's current context, as kubectl
// takes it ("default" when the context names none; the pod's own in the cluster).
func contextNamespace(path string) (string, error) {
	ns, _, err := kubeClientConfig(path).Namespace()
	if err != nil {
		return "", fmt.Errorf("the kubeconfig's namespace: %w", err)
	}
	return ns, nil
}

// byName lists the one object called name: a get that list alone allows.
func byName(name string) metav1.ListOptions {
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
}

// onlyItem is the object a byName list found, or the API server's NotFound for it.
func onlyItem[T any](items []T, resource schema.GroupResource, name string) (*T, error) {
	if len(items) == 0 {
		return nil, apierrors.NewNotFound(resource, name)
	}
	return &items[0], nil
}

// consulReader reads Consul for a read-only command: in the entries' Enterprise
// namespace and partition, each request bounded by timeout. After its first failure
// it asks nothing more (a Consul that is down would make each request wait), and err
// says what failed.
type consulReader struct {
	client  *consulapi.Client
	naming  translate.Naming
	timeout time.Duration
	err     error
}

// do runs read with a context bounded by the reader's timeout, unless an earlier
// read failed; its error is then the reader's.
func (r *consulReader) do(ctx context.Context, read func(ctx context.Context) error) error {
	if r.err != nil {
		return r.err
	}
	timeout := r.timeout
	if timeout <= 0 {
		timeout = defaultConsulTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := read(ctx); err != nil {
		r.err = consulFailure{err: err, timeout: timeout}
	}
	return r.err
}

// try is do for a read whose failure says nothing of the others (a grant of its own):
// it is not kept.
func (r *consulReader) try(ctx context.Context, read func(ctx context.Context) error) error {
	if r.err != nil {
		return r.err
	}
	err := r.do(ctx, read)
	r.err = nil
	return err
}

// entriesQuery are the options of a list of the controller's entries: in every
// namespace when the entries go to Enterprise namespaces, in their partition.
func (r *consulReader) entriesQuery(ctx context.Context) *consulapi.QueryOptions {
	return entriesQuery(r.naming).WithContext(ctx)
}

// entriesQuery is entriesQuery of the reader, for naming n.
func entriesQuery(n translate.Naming) *consulapi.QueryOptions {
	q := &consulapi.QueryOptions{Partition: n.Partition}
	if n.MirrorNamespaces || n.DestinationNamespace != "" {
		q.Namespace = "*"
	}
	return q
}

// serviceQuery are the options of a read of a service the controller names for a
// Kubernetes namespace: in the Consul namespace its entries name it in.
func serviceQuery(n translate.Naming, kubeNamespace string) *consulapi.QueryOptions {
	return &consulapi.QueryOptions{Partition: n.Partition, Namespace: n.Namespace(kubeNamespace)}
}

// consulFailure is why a command could not read Consul.
type consulFailure struct {
	err     error
	timeout time.Duration
}

// Error is the line a command prints: Consul answered with a refusal, or was not
// reached at all (within the timeout).
func (f consulFailure) Error() string {
	var status consulapi.StatusError
	switch {
	case errors.As(f.err, &status):
		return fmt.Sprintf("Consul refused the query: %v", f.err)
	case errors.Is(f.err, context.DeadlineExceeded):
		return fmt.Sprintf("Consul not reached: no answer within %s (--consul-timeout): %v", f.timeout, f.err)
	}
	return fmt.Sprintf("Consul not reached: %v", f.err)
}

func (f consulFailure) Unwrap() error { return f.err }
