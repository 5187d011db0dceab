package sync

import gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

// DefaultControllerName is the GatewayClass controllerName served unless a flag names
// another. Its domain is the project's own, so it cannot clash with another
// implementation's.
const DefaultControllerName gatewayv1.GatewayController = "consul-gateway-controller.github.io/gateway-controller"
