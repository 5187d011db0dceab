# Least-privilege Consul ACL policy for consul-gateway-controller.
#
#   consul acl policy create -name consul-gateway-controller -rules @deploy/consul-acl-policy.hcl
#   consul acl token create -description consul-gateway-controller -policy-name consul-gateway-controller
#
# Give the token to the controller in CONSUL_HTTP_TOKEN_FILE (a mounted Secret) or
# CONSUL_HTTP_TOKEN; it is never logged. With --manage-service-defaults, attach
# consul-acl-policy-service-defaults.hcl as well.

# Create, update and delete the api-gateway, http-route, tcp-route and
# inline-certificate config entries (all with check-and-set).
mesh = "write"

# Read those entries back: Consul authorizes reading an api-gateway or a route by
# service:read on the names they use (the gateway, its backends); the service write
# rule below grants it.

# Register the gateway pods in the catalog: each is an api-gateway instance named like
# its Gateway's api-gateway entry (with --consul-entry-prefix, narrow this rule to that
# prefix), on a synthetic node "<kubernetes node>-virtual". Consul authorizes a
# registration by node:write on the node and service:write on the service; node names
# cannot be narrowed by a suffix, so the node rule covers every node. This replaces the
# service read rule above: write includes read. It also lets the controller write the
# service-defaults of consul_gateway_controller_blackhole, where refused requests go
# (see docs/consul.md, "The blackhole").
service_prefix "" {
  policy = "write"
}
node_prefix "" {
  policy = "write"
}

# The agent's version, to know what the connected Consul can program.
agent_prefix "" {
  policy = "read"
}
