# With --gateway-auth-method, consul-gateway-controller writes each Gateway's ACL
# policy, role and binding rule (package consul/identity, deploy/README.md section 5).
# Attach this policy to the controller's token as well as consul-acl-policy.hcl:
#
#   consul acl policy create -name consul-gateway-controller-identities -rules @deploy/consul-acl-policy-identities.hcl
#   consul acl token update -id <the controller's token> -merge-policies -policy-name consul-gateway-controller-identities
#
# Consul has no narrower grant for writing policies, roles and binding rules: a token
# with acl = "write" may also make tokens of any privilege, so guard this token as an
# operator's.
acl = "write"
