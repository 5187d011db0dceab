// Command rvcheck reports code that treats a Kubernetes resourceVersion as
// ordered (parsing, ordering, arithmetic); see package rvcheck for the rule.
//
// Usage, from the module root:
//
//	go run ./cmd/rvcheck ./...
//
// It exits non-zero when it reports a finding.
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/analysis/rvcheck"
)

func main() { singlechecker.Main(rvcheck.Analyzer) }
