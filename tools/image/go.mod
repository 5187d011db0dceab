// Module image packs the static controller binary into a reproducible OCI image for
// make image. Kept out of the root module so the product does not depend on
// go-containerregistry; its version is pinned in ../versions.mk.
module github.com/consul-gateway-controller/consul-gateway-controller/tools/image

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
