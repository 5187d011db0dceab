// Package v1alpha1 is this project's own API: GatewayConfig, the parameters a
// GatewayClass's parametersRef or a Gateway's spec.infrastructure.parametersRef names.
// It says how the controller deploys a Gateway's data plane (the consul-dataplane
// pods, their Service) and how those pods reach Consul.
//
// +kubebuilder:object:generate=true
// +groupName=consul-gateway-controller.github.io
package v1alpha1
