package metrics

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DelegatedAuth lets through only requests whose bearer token the API server
// authenticates (a TokenReview) for a user it authorizes to get the request's path (a
// SubjectAccessReview of a non-resource URL), as kube components and kube-rbac-proxy
// guard their /metrics: 401 without a token or with one the API server does not
// accept, 403 for a user not granted get on the path, 500 when the API server could
// not be asked (the log says why).
//
// Decisions on authenticated tokens (200 and 403) are cached for TTL, keyed by the
// token's SHA-256 (the token itself is never kept, logged or compared), so a scraper
// costs two API calls per TTL rather than per scrape. A grant or a revocation
// therefore takes up to TTL to show. 401s are not cached: anyone can make up tokens,
// and a flood of them would otherwise fill the bounded cache and leave the real
// scraper's decision uncached, two API calls per scrape. Errors are not cached either.
//
// Every made-up token still costs a TokenReview, from the reviews' small client
// budget: a flood of them would queue the real scraper's review, due once per TTL,
// behind theirs until the scrape times out. So tokens never authenticated before get
// at most maxUnknownReviews reviews in flight, and beyond that a 429 without one;
// a token whose decision is cached, fresh or expired, is reviewed without waiting
// for that gate.
//
// It is written on client-go's typed clients rather than k8s.io/apiserver's
// delegating authenticator and authorizer: that package adds 25 modules to go.mod
// (gRPC, OpenTelemetry, CEL among them) and about 15 MB (+17 %) to the binary, for a
// bearer token check this file does in full.
type DelegatedAuth struct {
	client  kubernetes.Interface
	ttl     time.Duration
	timeout time.Duration
	clock   clock.PassiveClock

	mu        sync.Mutex
	decisions map[[sha256.Size]byte]decision // kept after expiry, until room is needed
	// unknownReviews holds a slot per review in flight of a token without a decision.
	unknownReviews chan struct{}
}

// DelegatedAuthConfig configures a DelegatedAuth.
type DelegatedAuthConfig struct {
	// Client creates the TokenReviews and SubjectAccessReviews, with the controller's
	// own credentials; it needs create on both (deploy/clusterrole.yaml).
	Client kubernetes.Interface
	// TTL is how long a decision is reused; 0 means DefaultAuthTTL.
	TTL time.Duration
	// Timeout bounds the two reviews of one request; 0 means DefaultAuthTimeout.
	Timeout time.Duration
	// Clock is the cache's clock; nil means the real one.
	Clock clock.PassiveClock
}

// DefaultAuthTTL is the cache time of kube components' delegated authentication and
// authorization (their --authentication-token-webhook-cache-ttl is longer, their
// delegated authorizer's is 10 s).
const DefaultAuthTTL = 10 * time.Second

// DefaultAuthTimeout is Prometheus's default scrape timeout: a review that takes
// longer fails the scrape anyway.
const DefaultAuthTimeout = 10 * time.Second

// maxDecisions bounds the cache. Only tokens the API server authenticated reach it,
// so it bounds the scrapers of one cluster; when it is full of fresh decisions, new
// ones are not cached.
const maxDecisions = 1024

// maxUnknownReviews bounds the reviews in flight of tokens without a cached decision:
// a new scraper's first review waits little, a flood of made-up tokens gets 429s
// rather than a queue in front of the known scrapers' reviews.
const maxUnknownReviews = 2

// decision is the answer for one token.
type decision struct {
	code    int    // http.StatusOK, StatusUnauthorized or StatusForbidden
	user    string // empty when the token was not authenticated
	reason  string // why not, for the log
	expires time.Time
}

// NewDelegatedAuth returns the guard of --metrics-auth=kubernetes.
func NewDelegatedAuth(cfg DelegatedAuthConfig) *DelegatedAuth {
	a := &DelegatedAuth{
		client: cfg.Client, ttl: cfg.TTL, timeout: cfg.Timeout, clock: cfg.Clock,
		decisions:      map[[sha256.Size]byte]decision{},
		unknownReviews: make(chan struct{}, maxUnknownReviews),
	}
	if a.ttl <= 0 {
		a.ttl = DefaultAuthTTL
	}
	if a.timeout <= 0 {
		a.timeout = DefaultAuthTimeout
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	return a
}

// Wrap serves next only to requests the API server authenticates and authorizes.
func (a *DelegatedAuth) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := a.check(r); code != http.StatusOK {
			// The status text only: nothing of the reviews reaches the network.
			http.Error(w, http.StatusText(code), code)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// check decides one request: from the cache, or by asking the API server.
func (a *DelegatedAuth) check(r *http.Request) int {
	logger := klog.FromContext(r.Context()).WithValues("path", r.URL.Path, "remoteAddr", r.RemoteAddr)
	token, ok := bearerToken(r)
	if !ok {
		logger.V(4).Info("Refused a request without a bearer token", "code", http.StatusUnauthorized)
		return http.StatusUnauthorized
	}
	key := sha256.Sum256([]byte(token))
	cachedDecision, fresh, known := a.cached(key)
	if fresh {
		logDecision(logger, cachedDecision, true)
		return cachedDecision.code
	}
	if !known {
		if !a.acquireUnknownReview() {
			logger.V(4).Info("Refused a request: too many reviews of unknown tokens in flight", "code", http.StatusTooManyRequests)
			return http.StatusTooManyRequests
		}
		defer a.releaseUnknownReview()
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.timeout)
	defer cancel()
	d, err := a.review(ctx, token, r.URL.Path)
	if err != nil {
		// At level 0: the operator must act (RBAC, the API server), and scrapes come
		// seconds apart, not in floods.
		logger.Error(err, "Cannot decide a request: a review failed", "code", http.StatusInternalServerError)
		return http.StatusInternalServerError
	}
	a.remember(key, d)
	logDecision(logger, d, false)
	return d.code
}

func logDecision(logger klog.Logger, d decision, cached bool) {
	if d.code == http.StatusOK {
		logger.V(4).Info("Allowed a request", "user", d.user, "cached", cached)
		return
	}
	logger.V(4).Info("Refused a request", "code", d.code, "user", d.user, "reason", d.reason, "cached", cached)
}

// bearerToken is the request's bearer token, parsed as the API server does.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token, _, _ = strings.Cut(token, " ")
	return token, token != ""
}

// review asks the API server who the token is, then whether that user may get path.
func (a *DelegatedAuth) review(ctx context.Context, token, path string) (decision, error) {
	user, reason, err := a.authenticate(ctx, token)
	if err != nil {
		return decision{}, err
	}
	if user == nil {
		return decision{code: http.StatusUnauthorized, reason: reason}, nil
	}
	allowed, reason, err := a.authorize(ctx, user, path)
	if err != nil {
		return decision{}, err
	}
	if !allowed {
		return decision{code: http.StatusForbidden, user: user.Username, reason: reason}, nil
	}
	return decision{code: http.StatusOK, user: user.Username}, nil
}

// authenticate is the TokenReview: the user the token stands for, or nil and why not.
func (a *DelegatedAuth) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, string, error) {
	// Both the request and the response body carry the token, and client-go logs
	// bodies at -v=8 and up with the request context's logger: this request is not
	// logged at all, at any verbosity.
	ctx = klog.NewContext(ctx, logr.Discard())
	review, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("create a TokenReview: %w", err)
	}
	if !review.Status.Authenticated {
		return nil, "token not authenticated: " + review.Status.Error, nil
	}
	return &review.Status.User, "", nil
}

// authorize is the SubjectAccessReview of get on the non-resource URL path.
func (a *DelegatedAuth) authorize(ctx context.Context, user *authenticationv1.UserInfo, path string) (bool, string, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("create a SubjectAccessReview for %q: %w", user.Username, err)
	}
	if !review.Status.Allowed || review.Status.Denied {
		reason := review.Status.Reason
		if review.Status.EvaluationError != "" {
			reason += " (evaluation error: " + review.Status.EvaluationError + ")"
		}
		return false, "not allowed to get " + path + ": " + reason, nil
	}
	return true, "", nil
}

// cached is the decision for the token's key: fresh when it has not expired, known
// when there is one, expired or not (the token was authenticated before).
func (a *DelegatedAuth) cached(key [sha256.Size]byte) (d decision, fresh, known bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d, known = a.decisions[key]
	return d, known && a.clock.Now().Before(d.expires), known
}

// acquireUnknownReview takes a slot for a review of a token without a decision, or
// reports there is none free.
func (a *DelegatedAuth) acquireUnknownReview() bool {
	select {
	case a.unknownReviews <- struct{}{}:
		return true
	default:
		return false
	}
}

func (a *DelegatedAuth) releaseUnknownReview() { <-a.unknownReviews }

// remember caches d for the TTL, unless the token was not authenticated (then it
// forgets the token); a full cache first drops the expired decisions.
func (a *DelegatedAuth) remember(key [sha256.Size]byte, d decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if d.code == http.StatusUnauthorized {
		// A token authenticated before and no longer: it is not known any more either.
		delete(a.decisions, key)
		return
	}
	now := a.clock.Now()
	_, replaces := a.decisions[key]
	if !replaces && len(a.decisions) >= maxDecisions {
		for k, old := range a.decisions {
			if !now.Before(old.expires) {
				delete(a.decisions, k)
			}
		}
		if len(a.decisions) >= maxDecisions {
			return
		}
	}
	d.expires = now.Add(a.ttl)
	a.decisions[key] = d
}
