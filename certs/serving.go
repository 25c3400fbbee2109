package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

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
	// them). The file is read again when it changes (its stat, checked at
	// each handshake); a version that does not parse, or is larger than
	// MaxCABundleSize, is ignored and the last good one kept. (controller-
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

// MaxCABundleSize bounds a CA bundle file (--client-ca-file), which is never read past it: a
// huge file must not take the server's memory with it. It is the largest PEM bundle
// cert-manager's parser (pki.DecodeX509CertificateSetBytes) accepts, 150 large CA
// certificates of 2,200 bytes: more could not be parsed anyway.
const MaxCABundleSize = 330_000

// ReadCABundle reads a PEM file of CA certificates, at most MaxCABundleSize bytes, into a
// pool. It fails when the file is larger, holds anything but certificates, or none.
func ReadCABundle(file string) (*x509.CertPool, error) {
	b, _, err := readBounded(file, MaxCABundleSize)
	if err != nil {
		return nil, err
	}
	return parseCABundle(b)
}

// readBounded reads file, failing without reading on when it holds more than limit bytes, and
// returns what it read with the file's stat taken before reading (also when the stat says it
// is too large): a change after the stat changes the stat too, so a later look notices.
func readBounded(file string, limit int64) ([]byte, os.FileInfo, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close() //nolint:errcheck // read only
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	tooLarge := func(n int64) error {
		return fmt.Errorf("%s holds %d bytes or more, over the limit of %d bytes for a CA bundle file", file, n, limit)
	}
	if fi.Size() > limit {
		return nil, fi, tooLarge(fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(b)) > limit { // it grew since the stat
		return nil, nil, tooLarge(int64(len(b)))
	}
	return b, fi, nil
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

// clientCARecheck is how long a client CA file whose stat did not change is trusted not to
// have changed: a rewrite in place within the file system's timestamp resolution, to the same
// size, would not change the stat, so the file is read again after this long.
const clientCARecheck = time.Minute

// clientCAs is the pool of a client CA file. At a handshake the file is stat'ed (handshakes
// are rare: the API server keeps its connections alive) and read again only when it changed —
// another file (a ConfigMap volume swaps a symlink), another size or modification time — or
// clientCARecheck after the last read; it is re-parsed only when its content changed.
type clientCAs struct {
	file string
	now  func() time.Time // time.Now; tests move it

	mu      sync.Mutex
	stat    os.FileInfo // of the last read, good or not
	readAt  time.Time
	content []byte
	pool    *x509.CertPool
	lastErr error // of the last read, when it gave no new pool
	reads   int   // how often the file was read, for tests
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

// current returns the pool of the file's current content, or the last good one when the file
// cannot be read or parsed. With no good version ever read, the handshake fails: no client is
// let in.
func (c *clientCAs) current() (*x509.CertPool, error) {
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	fi, statErr := os.Stat(c.file)
	c.mu.Lock()
	defer c.mu.Unlock()
	if statErr == nil && c.stat != nil && sameStat(fi, c.stat) && now().Sub(c.readAt) < clientCARecheck {
		return c.lastGood()
	}
	c.reads++
	c.readAt = now()
	b, fi, err := readBounded(c.file, MaxCABundleSize)
	c.stat = fi // nil when it could not be opened: the next handshake tries again
	if err == nil && c.pool != nil && bytes.Equal(b, c.content) {
		c.lastErr = nil
		return c.pool, nil
	}
	if err == nil {
		var pool *x509.CertPool
		if pool, err = parseCABundle(b); err == nil {
			c.content, c.pool, c.lastErr = b, pool, nil
			return pool, nil
		}
	}
	c.lastErr = err
	return c.lastGood()
}

// lastGood is the last good pool, or an error when there is none.
func (c *clientCAs) lastGood() (*x509.CertPool, error) {
	if c.pool != nil {
		return c.pool, nil
	}
	return nil, errors.Join(errors.New("no client CA to verify clients with"), c.lastErr)
}

// sameStat reports whether two stats are of the same file, unchanged: same file (device and
// inode), size and modification time.
func sameStat(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
