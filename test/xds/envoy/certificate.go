package envoy

import (
	"fmt"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// ServerCertificate is the certificate chain (PEM) the filter chain a TLS connection to
// port with server name sni reaches presents, so that a client can judge it as it would
// in a handshake. Consul puts the certificate inline in the chain's TLS context; a
// certificate from SDS or a file is not known here.
func ServerCertificate(c *Config, port uint32, sni string) ([]byte, error) {
	chain, err := c.chainFor(connection{port: port, sni: sni})
	if err != nil {
		return nil, err
	}
	ctx := &tlsv3.DownstreamTlsContext{}
	if err := chain.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
		return nil, fmt.Errorf("port %d, server name %q: TLS context: %w", port, sni, err)
	}
	certs := ctx.GetCommonTlsContext().GetTlsCertificates()
	if len(certs) != 1 {
		return nil, fmt.Errorf("%w: %d inline certificates for server name %q on port %d", ErrNotModelled, len(certs), sni, port)
	}
	pem := certs[0].GetCertificateChain().GetInlineString()
	if pem == "" {
		pem = string(certs[0].GetCertificateChain().GetInlineBytes())
	}
	if pem == "" {
		return nil, fmt.Errorf("%w: certificate for server name %q on port %d is not inline", ErrNotModelled, sni, port)
	}
	return []byte(pem), nil
}
