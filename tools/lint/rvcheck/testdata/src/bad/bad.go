// Package bad holds one example of every way rvcheck says a resourceVersion
// must not be used.
package bad

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ordering a ResourceVersion field, of any struct.
func newerField(a, b *metav1.Gateway) bool {
	return a.ResourceVersion > b.ResourceVersion // want `resourceVersion is opaque: only == and != are allowed \(ordering with >\)`
}

func listNewer(a metav1.ListMeta, opts metav1.ListOptions) bool {
	return a.ResourceVersion >= opts.ResourceVersion // want `\(ordering with >=\)`
}

func getOptionsOrder(o metav1.GetOptions, p metav1.Preconditions) bool {
	return o.ResourceVersion <= *p.ResourceVersion // want `\(ordering with <=\)`
}

// Ordering through the accessor, on a struct and on an interface.
func newerAccessor(a *metav1.Gateway, b metav1.Object) bool {
	return a.GetResourceVersion() < b.GetResourceVersion() // want `\(ordering with <\)`
}

// A local copied from a resourceVersion, through a chain of locals.
func propagated(obj *metav1.Gateway, last string) bool {
	rv := obj.GetResourceVersion()
	var x = rv
	y := x
	return y < last // want `\(ordering with <\)`
}

// Propagation does not depend on source order.
func propagatedLater(obj *metav1.Gateway) bool {
	var y, x string
	if y > "5" { // want `\(ordering with >\)`
		return true
	}
	y = x
	x = obj.ResourceVersion
	return false
}

// A field that was assigned a resourceVersion.
type cache struct {
	last string
}

func (c *cache) stale(obj *metav1.Gateway) bool {
	c.last = obj.ResourceVersion
	return obj.Name < c.last // want `\(ordering with <\)`
}

// A parameter and a field named after resourceVersion.
func newerParam(resourceVersion, other string) bool {
	return other < resourceVersion // want `\(ordering with <\)`
}

type watchState struct {
	lastResourceVersion string
}

func (w watchState) behind(seen string) bool {
	return seen < w.lastResourceVersion // want `\(ordering with <\)`
}

// The "longer string is newer" trick.
func longer(a, b *metav1.Gateway) bool {
	if len(a.ResourceVersion) != len(b.ResourceVersion) {
		return len(a.ResourceVersion) > len(b.ResourceVersion) // want `\(ordering with >\)`
	}
	n := len(b.GetResourceVersion())
	return len(a.GetResourceVersion()) >= n // want `\(ordering with >=\)`
}

// Sorting by it in a comparison func literal.
func sortByRV(items []metav1.Gateway) {
	sort.Slice(items, func(i, j int) bool {
		return items[i].ResourceVersion < items[j].ResourceVersion // want `\(ordering with <\)`
	})
	slices.SortFunc(items, func(a, b metav1.Gateway) int {
		return strings.Compare(a.ResourceVersion, b.ResourceVersion) // want `\(ordering with strings.Compare\)`
	})
}

// Elements of a collection of resourceVersions.
func newestOf(resourceVersions []string) string {
	newest := ""
	for _, rv := range resourceVersions {
		if rv > newest { // want `\(ordering with >\)`
			newest = rv
		}
	}
	sort.Strings(resourceVersions)                // want `\(ordering with sort.Strings\)`
	_ = slices.Max(resourceVersions)              // want `\(ordering with slices.Max\)`
	_ = resourceVersions[0] < resourceVersions[1] // want `\(ordering with <\)`
	return newest
}

// Parsing.
func parse(obj *metav1.Gateway, list metav1.ListMeta) {
	_, _ = strconv.ParseUint(obj.ResourceVersion, 10, 64)       // want `resourceVersion is opaque: only == and != are allowed \(parsing with strconv.ParseUint\)`
	_, _ = strconv.ParseInt(list.GetResourceVersion(), 10, 64)  // want `\(parsing with strconv.ParseInt\)`
	_, _ = strconv.ParseFloat(obj.ResourceVersion, 64)          // want `\(parsing with strconv.ParseFloat\)`
	_, _ = strconv.Atoi(strings.TrimSpace(obj.ResourceVersion)) // want `\(parsing with strconv.Atoi\)`

	var n uint64
	_, _ = fmt.Sscanf(obj.ResourceVersion, "%d", &n)             // want `\(parsing with fmt.Sscanf\)`
	_, _ = fmt.Sscan(obj.ResourceVersion, &n)                    // want `\(parsing with fmt.Sscan\)`
	_, _ = fmt.Fscan(strings.NewReader(obj.ResourceVersion), &n) // want `\(parsing with fmt.Fscan\)`

	_, _ = new(big.Int).SetString(obj.ResourceVersion, 10)                   // want `\(parsing with big.Int.SetString\)`
	_, _ = new(big.Float).SetString(obj.ResourceVersion)                     // want `\(parsing with big.Float.SetString\)`
	_, _, _ = big.ParseFloat(obj.ResourceVersion, 10, 64, big.ToNearestEven) // want `\(parsing with big.ParseFloat\)`

	_, _ = json.Number(obj.ResourceVersion).Int64() // want `\(conversion to json.Number\)`
}

// Arithmetic after parsing: the parse is the finding.
func nextAfterParse(obj *metav1.Gateway) uint64 {
	n, _ := strconv.ParseUint(obj.ResourceVersion, 10, 64) // want `\(parsing with strconv.ParseUint\)`
	return n + 1
}

// Compare helpers.
func compareHelpers(a, b *metav1.Gateway) int {
	if cmp.Less(a.ResourceVersion, b.ResourceVersion) { // want `\(ordering with cmp.Less\)`
		return -1
	}
	if bytes.Compare([]byte(a.ResourceVersion), nil) > 0 { // want `\(ordering with bytes.Compare\)`
		return 1
	}
	return cmp.Compare(a.GetResourceVersion(), b.GetResourceVersion()) // want `\(ordering with cmp.Compare\)`
}

// Arithmetic and numeric conversion of a numeric resourceVersion.
func arithmetic(resourceVersion uint64, delta uint64) uint64 {
	_ = resourceVersion + 1 // want `\(arithmetic with \+\)`
	next := resourceVersion
	next++                       // want `\(arithmetic with \+\+\)`
	next -= 2                    // want `\(arithmetic with -=\)`
	_ = float64(resourceVersion) // want `\(conversion to float64\)`
	_ = next * delta             // want `\(arithmetic with \*\)`
	return resourceVersion % 7   // want `\(arithmetic with %\)`
}
