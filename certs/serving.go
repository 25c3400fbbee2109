package certs

import "crypto/tls"

// ServingOptions configure the webhook's HTTPS listener (webhook's tlsServer,
// which takes TLSOpts() as controller-runtime's webhook.Options.TLSOpts would);
// controller-runtime's certwatcher reloads tls.crt and tls.key from CertDir
// without dropping connections.
type ServingOptions struct {
	// CertDir holds tls.crt and tls.key (and ca.crt, which the server does not read).
	CertDir string
	// EnableHTTP2 offers HTTP/2 through ALPN. It is off by default because of
	// the HTTP/2 Stream Cancellation and Rapid Reset vulnerabilities
	// (CVE-2023-44487, CVE-2023-39325; GHSA-qppj-fm5r-hxr3,
	// GHSA-4374-p667-p6c8): kubebuilder's scaffold makes the same choice, and
	// the API server calls webhooks over HTTP/1.1 just as well.
	// Go's default, and controller-runtime's webhook server, would offer "h2".
	EnableHTTP2 bool
}

// TLSOpts returns the tls.Config mutators for webhook.Options.TLSOpts: TLS 1.2
// or newer, and HTTP/1.1 only unless EnableHTTP2 is set.
func (o ServingOptions) TLSOpts() []func(*tls.Config) {
	protos := []string{"http/1.1"}
	if o.EnableHTTP2 {
		protos = []string{"h2", "http/1.1"}
	}
	return []func(*tls.Config){
		func(c *tls.Config) {
			if c.MinVersion < tls.VersionTLS12 {
				c.MinVersion = tls.VersionTLS12
			}
		},
		func(c *tls.Config) {
			c.NextProtos = append([]string(nil), protos...)
		},
	}
}
