package responder

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"
)

// identity is the responder's certificate and the roots it trusts, as Consul last
// gave them. Both are nil until Consul first answered.
type identity struct {
	cert  atomic.Pointer[tls.Certificate]
	roots atomic.Pointer[x509.CertPool]
}

// ready reports whether the responder has a certificate and roots.
func (id *identity) ready() error {
	switch {
	case id.cert.Load() == nil:
		return errors.New("no leaf certificate from Consul yet")
	case id.roots.Load() == nil:
		return errors.New("no CA roots from Consul yet")
	}
	return nil
}

// retryWait is how long a failed read of the leaf or the roots waits before it is
// tried again.
const retryWait = 2 * time.Second

// blockingWait is how long one blocking query waits for a change.
const blockingWait = 5 * time.Minute

// follow calls read with the last index read, as a blocking query, until ctx is
// done; a failed read is logged and tried again after retryWait.
func follow(ctx context.Context, what string, read func(q *consulapi.QueryOptions) (uint64, error)) {
	logger := klog.FromContext(ctx)
	var index uint64
	for ctx.Err() == nil {
		q := (&consulapi.QueryOptions{WaitIndex: index, WaitTime: blockingWait}).WithContext(ctx)
		next, err := read(q)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Error(err, "Could not read from Consul; retrying", "what", what)
			// Start over without an index: Consul may have lost it.
			index = 0
			select {
			case <-ctx.Done():
			case <-time.After(retryWait):
			}
			continue
		}
		if next != index {
			logger.V(2).Info("Read from Consul", "what", what, "index", next)
		}
		// An index going back means Consul's state was reset: read afresh.
		if next < index {
			next = 0
		}
		index = next
	}
}

// readLeaf reads the leaf certificate of service and keeps it.
func (id *identity) readLeaf(agent *consulapi.Agent, service string) func(q *consulapi.QueryOptions) (uint64, error) {
	return func(q *consulapi.QueryOptions) (uint64, error) {
		leaf, meta, err := agent.ConnectCALeaf(service, q)
		if err != nil {
			return 0, fmt.Errorf("read leaf certificate of %s: %w", service, err)
		}
		cert, err := tls.X509KeyPair([]byte(leaf.CertPEM), []byte(leaf.PrivateKeyPEM))
		if err != nil {
			return 0, fmt.Errorf("parse leaf certificate of %s: %w", service, err)
		}
		id.cert.Store(&cert)
		return meta.LastIndex, nil
	}
}

// readRoots reads the CA roots and keeps them.
func (id *identity) readRoots(agent *consulapi.Agent) func(q *consulapi.QueryOptions) (uint64, error) {
	return func(q *consulapi.QueryOptions) (uint64, error) {
		list, meta, err := agent.ConnectCARoots(q)
		if err != nil {
			return 0, fmt.Errorf("read CA roots: %w", err)
		}
		pool := x509.NewCertPool()
		for _, root := range list.Roots {
			if !pool.AppendCertsFromPEM([]byte(root.RootCertPEM)) {
				return 0, fmt.Errorf("CA root %s holds no PEM certificate", root.ID)
			}
		}
		id.roots.Store(pool)
		return meta.LastIndex, nil
	}
}
