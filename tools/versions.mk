# The one place where the versions of the servers and tools the project builds are
# pinned. The go.mod files under tools/ must agree; TestToolVersions checks that they do.

# Kubernetes control plane (kube-apiserver, kubectl, kube-controller-manager,
# kube-scheduler). Its staging modules are pinned to the same release.
KUBERNETES_VERSION := v1.37.2
KUBE_STAGING_VERSION := v0.37.2
# etcd, at the version k8s.io/kubernetes requires.
ETCD_VERSION := v3.7.0
# kwok: the kubelet stand-in of the test cluster (fake Nodes, Pods made Ready).
KWOK_VERSION := v0.8.0
# Consul: v1.15.4 is the newest release whose whole dependency set is MPL-2.0.
CONSUL_VERSION := v1.15.4
# The consul/api release that the Consul v1.15.4 server compiles with outside its tree.
CONSUL_SERVER_API_VERSION := v1.21.1
GOLANGCI_LINT_VERSION := v2.15.0
# controller-gen writes the DeepCopy methods and the CRD of api/ (tools/codegen).
CONTROLLER_TOOLS_VERSION := v0.23.0
# Gateway API: the root go.mod pins the same version; its CRDs come from that module.
GATEWAY_API_VERSION := v1.6.3
# Helm: the tests render, lint and install the chart with it (tools/helm).
HELM_VERSION := v4.3.2
# go-containerregistry builds the OCI image of make image (tools/image).
GO_CONTAINERREGISTRY_VERSION := v0.22.1
