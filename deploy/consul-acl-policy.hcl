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
# its Gateway's api-gateway entry, on a synthetic node "gateway-<kubernetes node>".
# Consul authorizes a registration by node:write on the node and service:write on the
# service. It also lets the controller write the service-defaults of
# consul_gateway_controller_blackhole, where refused requests go (see docs/consul.md,
# "The blackhole").
#
# With --manage-intentions (the default) it also keeps, in the service-intentions entry
# of every service a route sends to, a source allowing the route's gateway: Consul
# authorizes that by intentions:write on the destination, which can be any service.
#
# Scope it with --consul-entry-prefix=P: every entry, every gateway service and every
# synthetic node ("Pgateway-<node>") then starts with P. Replace the service rule below
# with read (and intentions = "write") on "" and write on "P" and on
# "consul_gateway_controller_blackhole", and the node rule's prefix with "Pgateway-".
# Without a prefix the gateway services are named after their namespaces, so the
# service rule must cover every service.
service_prefix "" {
  policy     = "write"
  intentions = "write"
}
# Read every node (Consul hides instances on nodes a token cannot read); write only the
# synthetic nodes.
node_prefix "" {
  policy = "read"
}
node_prefix "gateway-" {
  policy = "write"
}

# The agent's version, to know what the connected Consul can program.
agent_prefix "" {
  policy = "read"
}
