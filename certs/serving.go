package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
)

// ServingOptions configure the webhook's HTTPS listener (webhook.Server,
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
	// ClientCAFile, when set, makes the server require a client certificate
	// that chains to one of the CA certificates in this PEM file: the
	// credentials kube-apiserver presents to webhooks when its
	// AdmissionConfiguration gives it some, so that nobody else who can reach
	// the port can ask for patches (and read other tenants' policy values in
	// them). The file is re-read when its content changes; a version that
	// does not parse is ignored and the last good one kept. (controller-
	// runtime's own webhook.Options.ClientCAName is read once at start.)
	ClientCAFile string
}

// TLSOpts returns the tls.Config mutators for webhook.Options.TLSOpts: TLS 1.2
// or newer, HTTP/1.1 only unless EnableHTTP2 is set, and client certificates
// required and verified when ClientCAFile is set.
func (o ServingOptions) TLSOpts() []func(*tls.Config) {
	protos := []string{"http/1.1"}
	if o.EnableHTTP2 {
		protos = []string{"h2", "http/1.1"}
	}
	opts := []func(*tls.Config){
		func(c *tls.Config) {
			if c.MinVersion < tls.VersionTLS12 {
				c.MinVersion = tls.VersionTLS12
			}
		},
		func(c *tls.Config) {
			c.NextProtos = append([]string(nil), protos...)
		},
	}
	if o.ClientCAFile != "" {
		opts = append(opts, (&clientCAs{file: o.ClientCAFile}).require)
	}
	return opts
}

// ReadCABundle reads a PEM file of CA certificates into a pool. It fails when
// the file holds anything but certificates, or none.
func ReadCABundle(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return parseCABundle(b)
}

func parseCABundle(b []byte) (*x509.CertPool, error) {
	cas, err := pki.DecodeX509CertificateSetBytes(b)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	return pool, nil
}

// clientCAs is the pool of a client CA file, re-read on every handshake
// (handshakes are rare: the API server keeps its connections alive) and
// re-parsed when the content changed.
type clientCAs struct {
	file string

	mu      sync.Mutex
	content []byte
	pool    *x509.CertPool
}

// require is the TLSOpts mutator: every connection must present a client
// certificate that verifies against the current pool. The base config asks
// for one too, so that the requirement holds even if GetConfigForClient were
// bypassed; the per-connection config differs only in ClientCAs.
func (c *clientCAs) require(base *tls.Config) {
	base.ClientAuth = tls.RequireAndVerifyClientCert
	base.ClientCAs = x509.NewCertPool() // nothing verifies until the file is read
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool, err := c.current()
		if err != nil {
			return nil, err
		}
		// Clone is safe on a config in use; the clone keeps GetCertificate
		// (controller-runtime's certwatcher) and the session ticket keys.
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.ClientCAs = pool
		return cfg, nil
	}
}

// current returns the pool of the file's content now, or the last good one
// when the file cannot be read or parsed. With no good version ever read,
// the handshake fails: no client is let in.
func (c *clientCAs) current() (*x509.CertPool, error) {
	b, readErr := os.ReadFile(c.file)
	c.mu.Lock()
	defer c.mu.Unlock()
	if readErr == nil && c.pool != nil && bytes.Equal(b, c.content) {
		return c.pool, nil
	}
	err := readErr
	if err == nil {
		var pool *x509.CertPool
		if pool, err = parseCABundle(b); err == nil {
			c.content, c.pool = b, pool
			return pool, nil
		}
	}
	if c.pool != nil {
		return c.pool, nil
	}
	return nil, errors.Join(errors.New("no client CA to verify clients with"), err)
}
