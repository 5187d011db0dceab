# Add-on policy for --manage-service-defaults: write service-defaults entries
# (protocol http) for HTTP backends. Narrow the prefix to your backends' names where
# you can.
service_prefix "" {
  policy = "write"
}
