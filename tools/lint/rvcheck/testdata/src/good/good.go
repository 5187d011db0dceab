// Package good uses resourceVersions only in the ways rvcheck allows; it
// must produce no diagnostic.
package good

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func logf(format string, args ...any) {}

func changed(a, b *metav1.Gateway) bool {
	return a.ResourceVersion != b.ResourceVersion
}

func same(a *metav1.Gateway, b metav1.Object) bool {
	rv := a.GetResourceVersion()
	return rv == b.GetResourceVersion()
}

// Passing a resourceVersion on to the API server or into logs is fine.
func relist(list metav1.ListMeta, resourceVersion string) metav1.ListOptions {
	rv := list.ResourceVersion
	logf("relisting from %s", rv)
	_ = fmt.Sprintf("rv=%s", resourceVersion)
	_ = metav1.GetOptions{ResourceVersion: rv}
	return metav1.ListOptions{
		ResourceVersion:      rv,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	}
}

// Concatenation builds keys and messages, not numbers.
func cacheKey(obj *metav1.Gateway) string {
	key := obj.Namespace + "/" + obj.Name + "@" + obj.ResourceVersion
	key += "#" + obj.GetResourceVersion()
	return key
}

func describe(obj *metav1.Gateway) string {
	switch obj.ResourceVersion {
	case "":
		return "unsaved"
	default:
		return strconv.Quote(obj.ResourceVersion)
	}
}

func matchIsNotOlder(opts metav1.ListOptions) bool {
	return opts.ResourceVersionMatch == metav1.ResourceVersionMatchNotOlderThan
}

// Ordering other fields, sorting by name, and counting a collection of
// resourceVersions are all fine.
func ordering(items []metav1.Gateway, resourceVersions []string) {
	sort.Slice(items, func(i, j int) bool {
		if items[i].Generation != items[j].Generation {
			return items[i].Generation < items[j].Generation
		}
		return strings.Compare(items[i].Name, items[j].Name) < 0
	})
	for i := 0; i < len(resourceVersions); i++ {
		_ = resourceVersions[i] == items[0].ResourceVersion
	}
	if len(resourceVersions) > 1 && len(items[0].ResourceVersion) > 0 {
		return
	}
	_ = strconv.Itoa(len(resourceVersions) - 1)
}

// Empty checks compare with "" using equality.
func hasRV(obj *metav1.Gateway) bool {
	return obj.ResourceVersion != "" && len(items(obj)) != 0
}

func items(obj *metav1.Gateway) []string { return []string{obj.ResourceVersion} }
