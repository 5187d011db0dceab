package informers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	configfake "github.com/consul-gateway-controller/consul-gateway-controller/api/client/fake"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A new leader's Secret watch may be behind the API server (its watch expired and it is
// relisting): WaitCaughtUp does not return while the watch holds back a newer version of
// its Secret, or the Secret's deletion, and returns once the watch delivers them.
func TestSecretCacheWaitCaughtUp(t *testing.T) {
	secrets := corev1.SchemeGroupVersion.WithResource("secrets")
	for _, tc := range []struct {
		name string
		// change changes the Secret in the API server while the watch holds events back.
		change func(tracker k8stesting.ObjectTracker) error
		// want checks the cached Secret once the watch delivered the change.
		want func(s *corev1.Secret, err error) bool
	}{{
		name: "edited",
		change: func(tracker k8stesting.ObjectTracker) error {
			newer := testenv.TLSSecret("infra", "cert", []byte("newer"), nil)
			newer.ResourceVersion = "2"
			return tracker.Update(secrets, newer, "infra")
		},
		want: func(s *corev1.Secret, err error) bool { return err == nil && s.ResourceVersion == "2" },
	}, {
		name:   "deleted",
		change: func(tracker k8stesting.ObjectTracker) error { return tracker.Delete(secrets, "infra", "cert") },
		want:   func(_ *corev1.Secret, err error) bool { return apierrors.IsNotFound(err) },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			older := testenv.TLSSecret("infra", "cert", []byte("older"), nil)
			older.ResourceVersion = "1"
			kube := kubefake.NewClientset(older)
			serveFieldSelectors(kube)
			gate := make(chan struct{})
			opened := make(chan struct{}, 10)
			kube.PrependWatchReactor("secrets", func(action k8stesting.Action) (bool, watch.Interface, error) {
				w, err := kube.Tracker().Watch(secrets, action.GetNamespace())
				if err != nil {
					return true, nil, err
				}
				opened <- struct{}{}
				return true, heldUntil(w, gate), nil
			})
			// The quorum list: what the API server holds now.
			meta := metafake.NewSimpleMetadataClient(metafake.NewTestScheme())
			meta.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				list := &metav1.List{}
				obj, err := kube.Tracker().Get(secrets, "infra", "cert")
				if apierrors.IsNotFound(err) {
					return true, list, nil
				}
				if err != nil {
					return true, nil, err
				}
				s := obj.(*corev1.Secret)
				list.Items = append(list.Items, runtime.RawExtension{Object: &metav1.PartialObjectMetadata{ObjectMeta: s.ObjectMeta}})
				return true, list, nil
			})
			i := startInformers(t, New(kube, newGatewayClientset(t, gateway("infra", "public", "consul", "", certRef("", "cert"))), configfake.NewClientset(), 0))
			<-opened

			if err := tc.change(kube.Tracker()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			caughtUp := make(chan error, 1)
			go func() { caughtUp <- i.Secrets.WaitCaughtUp(ctx, meta) }()
			// Longer than relistAfter: a second list changes nothing while the watch is held.
			select {
			case err := <-caughtUp:
				t.Fatalf("WaitCaughtUp returned (%v) while the watch held the Secret %s back", err, tc.name)
			case <-time.After(2 * relistAfter):
			}
			if s, err := i.Secrets.Lister().Secrets("infra").Get("cert"); err != nil || s.ResourceVersion != "1" {
				t.Fatalf("while held, the cache holds %v (%v), want version 1", s, err)
			}

			close(gate)
			if err := <-caughtUp; err != nil {
				t.Fatalf("WaitCaughtUp once the watch delivered: %v", err)
			}
			if s, err := i.Secrets.Lister().Secrets("infra").Get("cert"); !tc.want(s, err) {
				t.Errorf("once caught up, the cache holds %v (%v), want the Secret %s", s, err, tc.name)
			}
		})
	}
}

// heldUntil passes w's events on once gate is closed.
func heldUntil(w watch.Interface, gate <-chan struct{}) watch.Interface {
	events := make(chan watch.Event)
	proxy := watch.NewProxyWatcher(events)
	go func() {
		defer close(events)
		defer w.Stop()
		select {
		case <-gate:
		case <-proxy.StopChan():
			return
		}
		for {
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					return
				}
				select {
				case events <- e:
				case <-proxy.StopChan():
					return
				}
			case <-proxy.StopChan():
				return
			}
		}
	}()
	return proxy
}
