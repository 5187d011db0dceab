# Consul ACL policy of the responder's token (deploy/responder/).
#
#   consul acl policy create -name consul-gateway-controller-responder -rules @deploy/consul-acl-policy-responder.hcl
#   consul acl token create -description consul-gateway-controller-responder -policy-name consul-gateway-controller-responder
#
# service:write on its own service is all it needs: Consul signs its leaf certificate
# (/v1/agent/connect/ca/leaf), answers whether a caller may reach it
# (/v1/agent/connect/authorize, which also reads the service's intentions) and lets it
# register and deregister its instances with it. Reading the CA roots needs no rule.
# With --service=S (and the controller's --responder-service=S), name S here.
service "consul-gateway-controller-responder" {
  policy = "write"
}
