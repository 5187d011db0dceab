package gatewayapi

// The kinds of the other Gateway API objects the controller reads, besides Gateways
// (GatewayKind), ListenerSets (ListenerSetKind) and routes (Routes).
const (
	GatewayClassKind   = "GatewayClass"
	ReferenceGrantKind = "ReferenceGrant"
)
