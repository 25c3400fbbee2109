package certs

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
)

// Names of the files WriteFiles writes, which are also the keys of those
// certificates in podpatch's self-signed Secret: the keys of a
// kubernetes.io/tls Secret as cert-manager writes it. tls.crt and tls.key are
// what controller-runtime's webhook server reads by default.
const (
	// CACertFile holds the CA certificate.
	CACertFile = cmmeta.TLSCAKey
	// CertFile holds the serving certificate.
	CertFile = corev1.TLSCertKey
	// KeyFile holds the serving certificate's private key.
	KeyFile = corev1.TLSPrivateKeyKey
)

// WriteFiles writes b's CA certificate, serving certificate and key to dir as
// ca.crt, tls.crt and tls.key (the key with mode 0600), creating dir if
// needed. It refuses a certificate and key that do not belong together.
//
// Each file is replaced atomically (a temporary file in dir renamed over the
// old one), so a reader sees either the old or the new content of a file,
// never a partial one. The files are replaced in the order ca.crt, tls.key,
// tls.crt. A reader loading the pair between the last two renames sees the
// new key with the old certificate; controller-runtime's certwatcher rejects
// such a mismatched pair and keeps serving the pair it has, and the rename of
// tls.crt that follows triggers the reload of the new, matching pair. The CA
// goes first so that whatever trusts ca.crt already trusts the issuer of the
// new certificate when it appears.
func WriteFiles(dir string, b Bundle) error {
	if len(b.CACert) == 0 || len(b.Cert) == 0 || len(b.Key) == 0 {
		return errors.New("writing certificates: CA certificate, certificate and key are all required")
	}
	if _, err := tls.X509KeyPair(b.Cert, b.Key); err != nil {
		return fmt.Errorf("writing certificates: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing certificates: %w", err)
	}
	for _, f := range files(b) {
		if err := writeAtomic(dir, f.name, f.data, f.mode); err != nil {
			return fmt.Errorf("writing certificates: %w", err)
		}
	}
	return nil
}

// file is one of the files WriteFiles writes.
type file struct {
	name string
	data []byte
	mode os.FileMode
}

// files are b's files in the order WriteFiles replaces them.
func files(b Bundle) []file {
	return []file{
		{CACertFile, b.CACert, 0o644},
		{KeyFile, b.Key, 0o600},
		{CertFile, b.Cert, 0o644},
	}
}

// filesEqual reports whether dir already holds exactly b's CA certificate,
// certificate and key. A missing or unreadable file counts as different.
func filesEqual(dir string, b Bundle) bool {
	for _, f := range files(b) {
		got, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil || !bytes.Equal(got, f.data) {
			return false
		}
	}
	return true
}

// writeAtomic replaces dir/name with data: it writes a temporary file in the
// same directory (so the rename cannot cross file systems), flushes it and
// renames it over the target. Durability of the directory entry across a crash
// is not needed: the files are always rewritten from their source.
func writeAtomic(dir, name string, data []byte, mode os.FileMode) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			if rmErr := os.Remove(tmp); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
				err = errors.Join(err, rmErr)
			}
		}
	}()
	if err := f.Chmod(mode); err != nil {
		return errors.Join(err, f.Close())
	}
	if _, err := f.Write(data); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Sync(); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}
