package gatewayapi

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ParentName is a parentRef as a user writes it: [namespace/]name[/section][:port].
func ParentName(ref gatewayv1.ParentReference) string {
	name := string(ref.Name)
	if ref.Namespace != nil {
		name = string(*ref.Namespace) + "/" + name
	}
	if ref.SectionName != nil {
		name += "/" + string(*ref.SectionName)
	}
	if ref.Port != nil {
		name += fmt.Sprintf(":%d", *ref.Port)
	}
	return name
}
