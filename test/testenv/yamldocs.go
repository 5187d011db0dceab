package testenv

import "github.com/consul-gateway-controller/consul-gateway-controller/internal/manifests"

// YAMLDocuments splits a multi-document YAML file (test data) into its documents,
// leaving out those that hold nothing but comments and blank lines.
func YAMLDocuments(data []byte) ([][]byte, error) { return manifests.Documents(data) }
