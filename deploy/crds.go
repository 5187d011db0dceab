// Package deploy is what a cluster operator applies (kustomize base, Helm chart, CRDs);
// its one Go file carries the CustomResourceDefinitions into the binary, so that the
// translate command judges objects by the schemas and rules the API server serves.
package deploy

import "embed"

// CRDs holds this project's CRD (crds/, generated from api/v1alpha1) and the Gateway
// API standard-channel manifests the chart installs (helm/.../files/gateway-api, copied
// from the sigs.k8s.io/gateway-api module go.mod requires by make generate, and held
// equal to it by make lint): the very CRDs a cluster of this release serves. Documents
// of other kinds among them (the Gateway API's ValidatingAdmissionPolicy) are there too.
//
//go:embed crds/*.yaml helm/consul-gateway-controller/files/gateway-api/*.yaml
var CRDs embed.FS
