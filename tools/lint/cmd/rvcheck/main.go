// Command rvcheck reports code that treats a Kubernetes resourceVersion as
// ordered (parsing, ordering, arithmetic); see package rvcheck for the rule.
//
// It lives in the tools module so that golang.org/x/tools stays out of the product's
// go.mod. `make lint` builds it into bin/ and runs it from the product's root:
//
//	bin/rvcheck ./...
//
// It exits non-zero when it reports a finding.
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/consul-gateway-controller/consul-gateway-controller/tools/lint/rvcheck"
)

func main() { singlechecker.Main(rvcheck.Analyzer) }
