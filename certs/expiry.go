package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// WatchExpiry reports the expiry (NotAfter) of the serving certificate in certDir when it is
// first loaded and every time it is reloaded, so that an alert can fire before a certificate
// that nothing renews runs out: with failurePolicy Ignore an expired certificate switches every
// policy off without an error anywhere. It watches tls.crt and tls.key as the webhook server's
// own certwatcher does (the same files, the same reload rules). The returned function runs
// until ctx is done.
func WatchExpiry(certDir string, report func(notAfter time.Time)) func(context.Context) error {
	return func(ctx context.Context) error {
		w, err := certwatcher.New(filepath.Join(certDir, CertFile), filepath.Join(certDir, KeyFile))
		if err != nil {
			return fmt.Errorf("watch serving certificate: %w", err)
		}
		w.RegisterCallback(func(c tls.Certificate) {
			if leaf := leafOf(c); leaf != nil {
				report(leaf.NotAfter)
			}
		})
		return w.Start(ctx)
	}
}

// leafOf returns the parsed leaf of a certificate chain, or nil.
func leafOf(c tls.Certificate) *x509.Certificate {
	if c.Leaf != nil {
		return c.Leaf
	}
	if len(c.Certificate) == 0 {
		return nil
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}
