package rvcheck_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/consul-gateway-controller/consul-gateway-controller/tools/lint/rvcheck"
)

// TestAnalyzer checks the want comments in testdata: package bad has one example per
// rule and must be reported on every one; package good must produce no diagnostic.
// `make lint` runs the same analyzer over the whole product (bin/rvcheck, from cmd/rvcheck).
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), rvcheck.Analyzer, "bad", "good")
}
