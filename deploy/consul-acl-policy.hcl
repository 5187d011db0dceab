# Least-privilege Consul ACL policy for consul-gateway-controller.
#
#   consul acl policy create -name consul-gateway-controller -rules @deploy/consul-acl-policy.hcl
#   consul acl token create -description consul-gateway-controller -policy-name consul-gateway-controller
#
# Give the token to the controller in CONSUL_HTTP_TOKEN_FILE (a mounted Secret) or
# CONSUL_HTTP_TOKEN; it is never logged.

# api-gateway, http-route, tcp-route and inline-certificate config entries: read to
# compare and watch, write to create, update and delete (all with check-and-set).
mesh = "write"

# The agent's version, to know what the connected Consul can program.
agent_prefix "" {
  policy = "read"
}

# Only with --manage-service-defaults: service-defaults entries (protocol http) for
# HTTP backends. Narrow the prefix to the backends' names where you can.
service_prefix "" {
  policy = "write"
}
