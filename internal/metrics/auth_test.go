package metrics

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	clocktesting "k8s.io/utils/clock/testing"
)

// The tokens the fake API server knows, and what it answers for them.
const (
	readerToken   = "token-of-the-reader-2f7c"   // authenticated, may get /metrics
	strangerToken = "token-of-a-stranger-81ad"   // authenticated, may not
	expiredToken  = "token-that-expired-4c0e"    // not authenticated
	forbidToken   = "token-review-forbidden-9b3" // the TokenReview itself is refused
	sarFailsToken = "token-sar-forbidden-d51e"   // authenticated; the SubjectAccessReview is refused
)

// reviewer is a fake API server's TokenReview and SubjectAccessReview endpoints.
type reviewer struct {
	client *fake.Clientset
	sars   []authorizationv1.SubjectAccessReviewSpec
}

func newReviewer() *reviewer {
	rv := &reviewer{client: fake.NewClientset()}
	rv.client.PrependReactor("create", "tokenreviews", rv.tokenReview)
	rv.client.PrependReactor("create", "subjectaccessreviews", rv.accessReview)
	return rv
}

func (rv *reviewer) tokenReview(action k8stesting.Action) (bool, runtime.Object, error) {
	review := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
	users := map[string]string{readerToken: "reader", strangerToken: "stranger", sarFailsToken: "sar-fails"}
	switch token := review.Spec.Token; {
	case token == forbidToken:
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "",
			fmt.Errorf(`User "system:serviceaccount:ns:controller" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope`))
	case users[token] != "":
		review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
			Username: "system:serviceaccount:ns:" + users[token], UID: "uid-" + users[token],
			Groups: []string{"system:serviceaccounts", "system:authenticated"},
			Extra:  map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"pod-1"}},
		}}
	default:
		review.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	return true, review, nil
}

func (rv *reviewer) accessReview(action k8stesting.Action) (bool, runtime.Object, error) {
	review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
	rv.sars = append(rv.sars, review.Spec)
	attrs := review.Spec.NonResourceAttributes
	switch {
	case review.Spec.User == "system:serviceaccount:ns:sar-fails":
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "",
			fmt.Errorf(`User "system:serviceaccount:ns:controller" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`))
	case review.Spec.User == "system:serviceaccount:ns:reader" && attrs != nil && attrs.Path == "/metrics" && attrs.Verb == "get":
		review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "RBAC: allowed by ClusterRoleBinding"}
	default:
		review.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no RBAC policy matched"}
	}
	return true, review, nil
}

// reviews counts the reviews the fake API server was asked for, by resource.
func (rv *reviewer) reviews() map[string]int {
	n := map[string]int{}
	for _, a := range rv.client.Actions() {
		n[a.GetResource().Resource]++
	}
	return n
}

// scrape is one GET /metrics with authorization (the whole header; "" for none),
// logging at -v=10 into log.
func scrape(h http.Handler, authorization string, log *bytes.Buffer) (int, string) {
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(10), textlogger.Output(log)))
	req := httptest.NewRequestWithContext(klog.NewContext(context.Background(), logger), http.MethodGet, "/metrics", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestDelegatedAuthDecides(t *testing.T) {
	tests := []struct {
		name          string
		authorization string
		want          int
		reviews       map[string]int
	}{
		{"no Authorization header", "", http.StatusUnauthorized, map[string]int{}},
		{"another scheme", "Basic " + readerToken, http.StatusUnauthorized, map[string]int{}},
		{"an empty bearer token", "Bearer ", http.StatusUnauthorized, map[string]int{}},
		{"a token the API server does not accept", "Bearer " + expiredToken, http.StatusUnauthorized, map[string]int{"tokenreviews": 1}},
		{"a user without get on /metrics", "Bearer " + strangerToken, http.StatusForbidden, map[string]int{"tokenreviews": 1, "subjectaccessreviews": 1}},
		{"a user with get on /metrics", "Bearer " + readerToken, http.StatusOK, map[string]int{"tokenreviews": 1, "subjectaccessreviews": 1}},
		{"the scheme in lower case", "bearer " + readerToken, http.StatusOK, map[string]int{"tokenreviews": 1, "subjectaccessreviews": 1}},
		{"the TokenReview refused", "Bearer " + forbidToken, http.StatusInternalServerError, map[string]int{"tokenreviews": 1}},
		{"the SubjectAccessReview refused", "Bearer " + sarFailsToken, http.StatusInternalServerError, map[string]int{"tokenreviews": 1, "subjectaccessreviews": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rv := newReviewer()
			h := MetricsHandler(NewDelegatedAuth(DelegatedAuthConfig{Client: rv.client}).Wrap)
			var log bytes.Buffer
			code, body := scrape(h, tt.authorization, &log)
			if code != tt.want {
				t.Errorf("code %d, want %d (body %q)", code, tt.want, body)
			}
			if diff := cmp.Diff(tt.reviews, rv.reviews()); diff != "" {
				t.Errorf("reviews (-want +got):\n%s", diff)
			}
			if code == http.StatusOK && !strings.Contains(body, "consul_gateway_controller_leader") {
				t.Errorf("200 without the series: %q", body)
			}
			if code != http.StatusOK && strings.TrimSpace(body) != http.StatusText(code) {
				t.Errorf("body %q: a refusal says its status and nothing else", body)
			}
			for _, token := range []string{readerToken, strangerToken, expiredToken, forbidToken, sarFailsToken} {
				if strings.Contains(log.String(), token) {
					t.Errorf("the -v=10 log holds a token:\n%s", log.String())
				}
			}
			if code == http.StatusInternalServerError && !strings.Contains(log.String(), "cannot create resource") {
				t.Errorf("the log does not say why the review failed:\n%s", log.String())
			}
		})
	}
}

// TestDelegatedAuthAsksForGetOnThePath checks the SubjectAccessReview: the user as the
// TokenReview named it, and get on the non-resource URL /metrics.
func TestDelegatedAuthAsksForGetOnThePath(t *testing.T) {
	rv := newReviewer()
	h := MetricsHandler(NewDelegatedAuth(DelegatedAuthConfig{Client: rv.client}).Wrap)
	if code, _ := scrape(h, "Bearer "+readerToken, &bytes.Buffer{}); code != http.StatusOK {
		t.Fatalf("code %d, want 200", code)
	}
	want := []authorizationv1.SubjectAccessReviewSpec{{
		User: "system:serviceaccount:ns:reader", UID: "uid-reader", Groups: []string{"system:serviceaccounts", "system:authenticated"},
		Extra:                 map[string]authorizationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"pod-1"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}
	if diff := cmp.Diff(want, rv.sars); diff != "" {
		t.Errorf("SubjectAccessReviews (-want +got):\n%s", diff)
	}
}

// TestDelegatedAuthCaches checks that a scraper costs two reviews per TTL, not per
// scrape, for allowed and forbidden tokens alike; that unauthenticated tokens and
// failed reviews are asked again; and that a full cache of fresh decisions stops
// caching instead of growing.
func TestDelegatedAuthCaches(t *testing.T) {
	rv, clock, auth, h, expect := newAuthCase(t)
	expect("first scrape", "Bearer "+readerToken, 200, map[string]int{"tokenreviews": 1, "subjectaccessreviews": 1})
	clock.SetTime(clock.Now().Add(DefaultAuthTTL - time.Second))
	expect("within the TTL", "Bearer "+readerToken, 200, map[string]int{"tokenreviews": 1, "subjectaccessreviews": 1})
	expect("a stranger", "Bearer "+strangerToken, 403, map[string]int{"tokenreviews": 2, "subjectaccessreviews": 2})
	expect("the stranger again", "Bearer "+strangerToken, 403, map[string]int{"tokenreviews": 2, "subjectaccessreviews": 2})
	expect("an unknown token", "Bearer "+expiredToken, 401, map[string]int{"tokenreviews": 3, "subjectaccessreviews": 2})
	expect("the unknown token again", "Bearer "+expiredToken, 401, map[string]int{"tokenreviews": 4, "subjectaccessreviews": 2})
	expect("a failed review", "Bearer "+forbidToken, 500, map[string]int{"tokenreviews": 5, "subjectaccessreviews": 2})
	expect("a failed review again", "Bearer "+forbidToken, 500, map[string]int{"tokenreviews": 6, "subjectaccessreviews": 2})
	clock.SetTime(clock.Now().Add(time.Second))
	expect("after the TTL", "Bearer "+readerToken, 200, map[string]int{"tokenreviews": 7, "subjectaccessreviews": 3})

	// Fill the cache with fresh decisions of other scrapers: a new one is then not kept.
	auth.decisions = map[[sha256.Size]byte]decision{}
	for i := range maxDecisions {
		auth.remember(sha256.Sum256([]byte(fmt.Sprintf("scraper-%d", i))), decision{code: http.StatusOK})
	}
	before := rv.reviews()["tokenreviews"]
	scrape(h, "Bearer "+strangerToken, &bytes.Buffer{})
	scrape(h, "Bearer "+strangerToken, &bytes.Buffer{})
	if got := rv.reviews()["tokenreviews"] - before; got != 2 || len(auth.decisions) != maxDecisions {
		t.Errorf("a full cache: %d reviews for two requests and %d decisions, want 2 and %d", got, len(auth.decisions), maxDecisions)
	}
	// Once they expire, they make room.
	clock.SetTime(clock.Now().Add(DefaultAuthTTL))
	before = rv.reviews()["tokenreviews"]
	scrape(h, "Bearer "+readerToken, &bytes.Buffer{})
	scrape(h, "Bearer "+readerToken, &bytes.Buffer{})
	if got := rv.reviews()["tokenreviews"] - before; got != 1 || len(auth.decisions) != 1 {
		t.Errorf("after the TTL: %d reviews for two requests and %d decisions, want 1 and 1", got, len(auth.decisions))
	}
}

// TestDelegatedAuthMadeUpTokensDoNotCrowdOutTheScraper floods the guard with more
// made-up tokens than the cache holds, then checks that the real scraper's decision
// is still cached: one pair of reviews per TTL, not per scrape.
func TestDelegatedAuthMadeUpTokensDoNotCrowdOutTheScraper(t *testing.T) {
	rv := newReviewer()
	clock := clocktesting.NewFakePassiveClock(time.Now())
	auth := NewDelegatedAuth(DelegatedAuthConfig{Client: rv.client, Clock: clock})
	h := MetricsHandler(auth.Wrap)
	for i := range 2 * maxDecisions {
		if code, _ := scrape(h, fmt.Sprintf("Bearer made-up-%d", i), &bytes.Buffer{}); code != http.StatusUnauthorized {
			t.Fatalf("made-up token %d: code %d, want 401", i, code)
		}
	}
	if len(auth.decisions) != 0 {
		t.Errorf("the cache holds %d decisions after the flood, want 0: 401s are not cached", len(auth.decisions))
	}
	before := rv.reviews()
	for range 3 {
		if code, _ := scrape(h, "Bearer "+readerToken, &bytes.Buffer{}); code != http.StatusOK {
			t.Fatalf("the scraper: code %d, want 200", code)
		}
	}
	after := rv.reviews()
	got := map[string]int{"tokenreviews": after["tokenreviews"] - before["tokenreviews"], "subjectaccessreviews": after["subjectaccessreviews"] - before["subjectaccessreviews"]}
	if diff := cmp.Diff(map[string]int{"tokenreviews": 1, "subjectaccessreviews": 1}, got); diff != "" {
		t.Errorf("reviews for three scrapes after the flood (-want +got):\n%s", diff)
	}
}

// TestDelegatedAuthBoundsReviewsOfUnknownTokens: with maxUnknownReviews reviews of
// unknown tokens in flight (a flood), another unknown token gets a 429 without a
// review, while a scraper whose decision is cached is reviewed again when it expires;
// a token no longer authenticated is not known any more.
func TestDelegatedAuthBoundsReviewsOfUnknownTokens(t *testing.T) {
	_, clock, auth, _, expect := newAuthCase(t)
	expect("the scraper", "Bearer "+readerToken, 200, map[string]int{"tokenreviews": 1, "subjectaccessreviews": 1})
	for range maxUnknownReviews {
		if !auth.acquireUnknownReview() {
			t.Fatal("no slot for a review of an unknown token")
		}
	}
	expect("an unknown token during a flood", "Bearer made-up", 429, map[string]int{"tokenreviews": 1, "subjectaccessreviews": 1})
	clock.SetTime(clock.Now().Add(DefaultAuthTTL))
	expect("the scraper after the TTL, during the flood", "Bearer "+readerToken, 200, map[string]int{"tokenreviews": 2, "subjectaccessreviews": 2})
	for range maxUnknownReviews {
		auth.releaseUnknownReview()
	}
	expect("an unknown token after the flood", "Bearer made-up", 401, map[string]int{"tokenreviews": 3, "subjectaccessreviews": 2})

	// A token authenticated once and revoked since is forgotten with its 401.
	auth.remember(sha256.Sum256([]byte(expiredToken)), decision{code: http.StatusOK})
	clock.SetTime(clock.Now().Add(DefaultAuthTTL))
	expect("a revoked token", "Bearer "+expiredToken, 401, map[string]int{"tokenreviews": 4, "subjectaccessreviews": 2})
	if _, _, known := auth.cached(sha256.Sum256([]byte(expiredToken))); known {
		t.Error("the revoked token is still known: it would pass the gate of unknown tokens")
	}
}

// BenchmarkScrapeUnderTokenFlood measures a real scraper's scrape with and without a
// flood of made-up tokens between its scrapes (the baseline is the "quiet" case of
// the same run). The clock moves a tenth of the TTL per scrape, as a scraper every
// second does with the 10 s TTL; the flood sends as many made-up tokens a second
// (not timed) as the cache holds. reviews/op is the API calls a scrape costs.
func BenchmarkScrapeUnderTokenFlood(b *testing.B) {
	for _, perScrape := range []int{0, maxDecisions} {
		name := "quiet"
		if perScrape > 0 {
			name = fmt.Sprintf("flood-of-%d-per-scrape", perScrape)
		}
		b.Run(name, func(b *testing.B) {
			rv := newReviewer()
			clock := clocktesting.NewFakePassiveClock(time.Now())
			h := MetricsHandler(NewDelegatedAuth(DelegatedAuthConfig{Client: rv.client, Clock: clock}).Wrap)
			scraperReviews := 0
			for i := range b.N {
				b.StopTimer()
				clock.SetTime(clock.Now().Add(DefaultAuthTTL / 10))
				for j := range perScrape {
					scrape(h, fmt.Sprintf("Bearer made-up-%d-%d", i, j), &bytes.Buffer{})
				}
				rv.client.ClearActions()
				b.StartTimer()
				if code, _ := scrape(h, "Bearer "+readerToken, &bytes.Buffer{}); code != http.StatusOK {
					b.Fatalf("code %d, want 200", code)
				}
				scraperReviews += len(rv.client.Actions())
			}
			b.ReportMetric(float64(scraperReviews)/float64(b.N), "reviews/op")
		})
	}
}

// newAuthCase is a delegated auth guard on a fake reviewer and clock, its handler, and
// expect, which scrapes with an Authorization header and checks the answer's code and
// every review made so far.
func newAuthCase(t *testing.T) (*reviewer, *clocktesting.FakePassiveClock, *DelegatedAuth, http.Handler, func(when, authorization string, code int, reviews map[string]int)) {
	rv := newReviewer()
	clock := clocktesting.NewFakePassiveClock(time.Now())
	auth := NewDelegatedAuth(DelegatedAuthConfig{Client: rv.client, Clock: clock})
	h := MetricsHandler(auth.Wrap)
	expect := func(when, authorization string, code int, reviews map[string]int) {
		t.Helper()
		if got, _ := scrape(h, authorization, &bytes.Buffer{}); got != code {
			t.Errorf("%s: code %d, want %d", when, got, code)
		}
		if diff := cmp.Diff(reviews, rv.reviews()); diff != "" {
			t.Errorf("%s: reviews (-want +got):\n%s", when, diff)
		}
	}
	return rv, clock, auth, h, expect
}
