package sync

import (
	"fmt"
	gosync "sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// precedenceRoute is an HTTPRoute of namespace on gateway apps/gw created at day, one
// rule per path (a PathPrefix, or Exact with exact).
func precedenceRoute(namespace, name string, day int, exact bool, paths ...string) *gatewayv1.HTTPRoute {
	r := httpRoute(namespace, name, nil, parentRef("apps", "gw", ""))
	r.UID = types.UID(namespace + "-" + name)
	r.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, day, 0, 0, 0, 0, time.UTC))
	r.Spec.Rules = nil
	pathType := gatewayv1.PathMatchPathPrefix
	if exact {
		pathType = gatewayv1.PathMatchExact
	}
	for _, p := range paths {
		r.Spec.Rules = append(r.Spec.Rules, gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptrTo(pathType), Value: ptrTo(p)}}}})
	}
	return r
}

// judgeRoute is the RoutedAsSpecified condition of route on its first parent.
func judgeRoute(t testing.TB, d *decider, route *gatewayv1.HTTPRoute) metav1.Condition {
	t.Helper()
	view, rules, err := d.viewRoute(route)
	if err != nil {
		t.Fatal(err)
	}
	parents, _, err := d.routeParentStatuses(view, rules, nil, route.Generation, metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(parents) == 0 {
		t.Fatalf("%s/%s has no parent status", route.Namespace, route.Name)
	}
	c := findCondition(parents[0].Conditions, RoutedAsSpecifiedCondition)
	if c == nil {
		t.Fatalf("%s/%s has no %s: %+v", route.Namespace, route.Name, RoutedAsSpecifiedCondition, parents[0].Conditions)
	}
	return *c
}

// TestPrecedenceMemo: a listener's model is built once and found again while its
// inputs hold (another route's sync, a route's status write); a change of a route's
// spec (its generation), a route that comes or goes, or a change of the listener's
// hostname builds it anew.
func TestPrecedenceMemo(t *testing.T) {
	t.Parallel()
	gw := gateway("apps", "gw", allowAll(httpListener("http", 80, "")))
	a := precedenceRoute("tenant-a", "a", 1, false, "/a")
	b := precedenceRoute("tenant-b", "b", 2, false, "/b")
	statusOnly := a.DeepCopy()
	statusOnly.ResourceVersion = "42"
	statusOnly.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: parentRef("apps", "gw", ""), ControllerName: testController}}
	edited := statusOnly.DeepCopy()
	edited.Generation++
	edited.Spec.Rules[0].Matches[0].Path.Value = ptrTo("/b")
	newcomer := precedenceRoute("tenant-a", "c", 3, false, "/c")
	renamedHost := gw.DeepCopy()
	renamedHost.Generation++
	renamedHost.Spec.Listeners[0].Hostname = ptrTo(gatewayv1.Hostname("example.com"))

	memo := newPrecedenceMemo()
	steps := []struct {
		name                   string
		objs                   []runtime.Object // the caches' content
		judge                  *gatewayv1.HTTPRoute
		wantBuilds, wantHits   int64
		wantStatus, wantReason string
	}{
		{"first sync builds", []runtime.Object{gw, a, b}, b, 1, 0, "True", ReasonRoutedAsSpecified},
		{"another route's sync finds it", []runtime.Object{gw, a, b}, a, 1, 1, "True", ReasonRoutedAsSpecified},
		{"a status write keeps it", []runtime.Object{gw, statusOnly, b}, b, 1, 2, "True", ReasonRoutedAsSpecified},
		{"a spec change builds it anew", []runtime.Object{gw, edited, b}, edited, 2, 2, "False", ReasonTieOrderedByConsul},
		{"a route that comes builds it anew", []runtime.Object{gw, edited, b, newcomer}, edited, 3, 2, "False", ReasonTieOrderedByConsul},
		{"a route that goes builds it anew", []runtime.Object{gw, b, newcomer}, b, 4, 2, "True", ReasonRoutedAsSpecified},
		{"unchanged again", []runtime.Object{gw, b, newcomer}, newcomer, 4, 3, "True", ReasonRoutedAsSpecified},
		{"the listener's hostname builds it anew", []runtime.Object{renamedHost, b, newcomer}, b, 5, 3, "True", ReasonRoutedAsSpecified},
	}
	for _, step := range steps {
		d := newTestDecider(t, append([]runtime.Object{ourClass()}, step.objs...)...)
		d.precedence = memo
		c := judgeRoute(t, d, step.judge)
		got := []any{memo.builds.Load(), memo.hits.Load(), string(c.Status), c.Reason}
		want := []any{step.wantBuilds, step.wantHits, step.wantStatus, step.wantReason}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: [builds hits status reason] (-want +got):\n%s\n%s", step.name, diff, c.Message)
		}
	}
}

// TestPrecedenceMemoFollowsParentRefs: a route's served view (its parentRefs) is kept
// per spec generation; a route that moves to another listener leaves the first
// listener's model.
func TestPrecedenceMemoFollowsParentRefs(t *testing.T) {
	t.Parallel()
	gw := gateway("apps", "gw", allowAll(httpListener("http", 80, "")), allowAll(httpListener("alt", 81, "")))
	older := precedenceRoute("tenant-a", "older", 1, false, "/p")
	older.Spec.ParentRefs = []gatewayv1.ParentReference{parentRef("apps", "gw", "http")}
	newer := precedenceRoute("tenant-b", "newer", 2, false, "/p")
	moved := newer.DeepCopy()
	moved.Generation++
	moved.Spec.ParentRefs = []gatewayv1.ParentReference{parentRef("apps", "gw", "alt")}
	memo := newPrecedenceMemo()
	for _, step := range []struct {
		name       string
		newer      *gatewayv1.HTTPRoute
		wantReason string
	}{
		{"both on every listener", newer, ReasonTieOrderedByConsul},
		{"the newer moved to alt", moved, ReasonRoutedAsSpecified},
	} {
		d := newTestDecider(t, ourClass(), gw, older, step.newer)
		d.precedence = memo
		if c := judgeRoute(t, d, older); c.Reason != step.wantReason {
			t.Errorf("%s: RoutedAsSpecified of the older route = %s/%s, want %s: %s", step.name, c.Status, c.Reason, step.wantReason, c.Message)
		}
	}
}

// TestPrecedenceNotJudged: past the matches judged on a listener, the newest routes'
// condition says plainly that their precedence was not judged, while the judged
// routes are still held against every route of the listener, judged or not.
func TestPrecedenceNotJudged(t *testing.T) {
	t.Parallel()
	gw := gateway("apps", "gw", allowAll(httpListener("http", 80, "")))
	oldest := precedenceRoute("tenant-b", "oldest", 1, true, "/p")              // 1 match, judged
	flood := precedenceRoute("tenant-a", "flood", 2, false, "/x", "/y", "/z")   // 3 matches: past the 2 left
	small := precedenceRoute("tenant-a", "small", 3, false, "/s")               // 1 match: fits
	shadow := precedenceRoute("tenant-a", "shadow", 4, false, "/p", "/q", "/r") // 3 matches, not judged; competes with oldest
	shadow.Spec.Rules[0].Matches[0].Headers = []gatewayv1.HTTPHeaderMatch{{Name: "X-Canary", Value: "1"}}
	d := newTestDecider(t, ourClass(), gw, oldest, flood, small, shadow)
	d.precedence.maxMatches = 2

	notJudged := "Precedence was not judged for this route (listener http serves 8 matches): the controller judges the matches of a listener's oldest routes up to 2, " +
		"so Consul 1.15 may send this route's requests elsewhere than the Gateway API precedence says, unreported."
	tests := []struct {
		route           *gatewayv1.HTTPRoute
		status          metav1.ConditionStatus
		reason, message string
	}{
		{oldest, metav1.ConditionFalse, ReasonPrecedenceDiffers, "Consul 1.15 may route elsewhere what the Gateway API gives this route: " +
			"listener http: GET any-host.example/p with 1 header or query value of another namespace's route is for rule 0 here; Consul may send it to rule 0 of another namespace's HTTPRoute. " +
			"Consul ranks matches by path length, then header count, then query param count: an Exact path does not outrank a PathPrefix of the same path, nor a method match one with more headers."},
		{flood, metav1.ConditionUnknown, ReasonPrecedenceNotJudged, notJudged},
		{small, metav1.ConditionTrue, ReasonRoutedAsSpecified, "Consul sends the route's requests where the Gateway API precedence does"},
		{shadow, metav1.ConditionUnknown, ReasonPrecedenceNotJudged, notJudged},
	}
	for _, tt := range tests {
		c := judgeRoute(t, d, tt.route)
		if diff := cmp.Diff([]string{string(tt.status), tt.reason, tt.message}, []string{string(c.Status), c.Reason, c.Message}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.route.Name, diff)
		}
	}
}

// BenchmarkTenantChurn measures the cost of tenant A's churn on a listener it shares
// with tenant B: A has N routes there and edits one (its path, so its generation);
// the controller then judges every route of the Gateway again (the siblings of the
// edited route, informers.KeyMapper), B's among them. Each sub-benchmark reports, as
// multiples of judging B's route on a listener of its own (a baseline taken in the
// same run): b-x-alone, judging B's route right after A's edit; all-x-alone, judging
// every route of the listener, which B's next edit waits behind; and, as counts, the
// listener models built and the routes whose conflicts were computed per edit.
// "before" is the decider without a memo and without a cap on the matches judged, as
// it was; "after" is the controller's.
func BenchmarkTenantChurn(b *testing.B) {
	aloneB, _ := benchChurn(b, 0, newPrecedenceMemo(), 20)
	for _, n := range []int{10, 100, 1000} {
		for _, mode := range []struct {
			name string
			memo func() *precedenceMemo
		}{
			{"before", func() *precedenceMemo { return &precedenceMemo{maxMatches: 1 << 30} }},
			{"after", newPrecedenceMemo},
		} {
			b.Run(fmt.Sprintf("routes=%d/%s", n, mode.name), func(b *testing.B) {
				memo := mode.memo()
				judgeB, all := benchChurn(b, n, memo, b.N)
				b.ReportMetric(float64(judgeB)/float64(aloneB), "b-x-alone")
				b.ReportMetric(float64(all)/float64(aloneB), "all-x-alone")
				b.ReportMetric(float64(memo.builds.Load())/float64(b.N), "models/edit")
				b.ReportMetric(float64(memo.judgements.Load())/float64(b.N), "judged/edit")
			})
		}
	}
}

// benchChurn is the mean time, over edits edits of tenant A's first route, of judging
// tenant B's route first, and every route of a listener with n routes of tenant A and
// one of tenant B.
func benchChurn(b *testing.B, n int, memo *precedenceMemo, edits int) (judgeB, all time.Duration) {
	b.StopTimer()
	for edit := range edits {
		objs := []runtime.Object{ourClass(), gateway("apps", "gw", allowAll(httpListener("http", 80, "")))}
		routeB := precedenceRoute("tenant-b", "b", 1, false, "/b", "/b/api")
		routes := []*gatewayv1.HTTPRoute{routeB}
		for i := range n {
			r := precedenceRoute("tenant-a", fmt.Sprintf("a%04d", i), 2, false, fmt.Sprintf("/a%04d", i))
			if i == 0 {
				r.Generation = int64(10 + edit)
				r.Spec.Rules[0].Matches[0].Path.Value = ptrTo(fmt.Sprintf("/edited%d", edit))
			}
			routes = append(routes, r)
		}
		for _, r := range routes {
			objs = append(objs, r)
		}
		d := newTestDecider(b, objs...)
		d.precedence = memo
		b.StartTimer()
		start := time.Now()
		for i, r := range routes {
			judgeRoute(b, d, r)
			if i == 0 {
				judgeB += time.Since(start)
			}
		}
		all += time.Since(start)
		b.StopTimer()
	}
	b.StartTimer()
	return judgeB / time.Duration(edits), all / time.Duration(edits)
}

// TestPrecedenceMemoSharedByWorkers: workers judging the routes of one listener at
// once share its model and get what one worker alone gets (run with -race).
func TestPrecedenceMemoSharedByWorkers(t *testing.T) {
	t.Parallel()
	objs := []runtime.Object{ourClass(), gateway("apps", "gw", allowAll(httpListener("http", 80, "")))}
	var routes []*gatewayv1.HTTPRoute
	for i := range 8 {
		r := precedenceRoute(fmt.Sprintf("tenant-%d", i%2), fmt.Sprintf("r%d", i), 1+i, i%2 == 0, "/p", fmt.Sprintf("/p/%d", i))
		routes = append(routes, r)
		objs = append(objs, r)
	}
	alone := newTestDecider(t, objs...)
	want := make([]metav1.Condition, len(routes))
	for i, r := range routes {
		want[i] = judgeRoute(t, alone, r)
	}
	shared := newTestDecider(t, objs...)
	got := make([]metav1.Condition, len(routes))
	var wg gosync.WaitGroup
	for i, r := range routes {
		wg.Go(func() { got[i] = judgeRoute(t, shared, r) })
	}
	wg.Wait()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("conditions judged at once (-alone +shared):\n%s", diff)
	}
	if builds := shared.precedence.builds.Load(); builds > int64(len(routes)) || shared.precedence.hits.Load()+builds != int64(len(routes)) {
		t.Errorf("builds %d, hits %d for %d syncs of one listener", builds, shared.precedence.hits.Load(), len(routes))
	}
}
