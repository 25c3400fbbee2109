package certs

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// DefaultCAValidity is how long a generated CA is valid when no validity is given.
	DefaultCAValidity = 365 * 24 * time.Hour
	// DefaultCertValidity is how long a generated serving certificate is valid
	// when no validity is given.
	DefaultCertValidity = 90 * 24 * time.Hour

	// backdate moves NotBefore into the past so that a peer whose clock runs a
	// little behind ours still accepts a certificate issued a moment ago.
	backdate = 5 * time.Minute
)

// GenerateOptions describe the CA and serving certificate Generate creates.
type GenerateOptions struct {
	// Service and Namespace name the Service the API server calls; the serving
	// certificate is valid for Service.Namespace.svc and its variants.
	Service   string
	Namespace string
	// CAValidity is the CA's lifetime from Now; zero means DefaultCAValidity.
	CAValidity time.Duration
	// CertValidity is the serving certificate's lifetime from Now; zero means
	// DefaultCertValidity. It never extends beyond the CA's expiry.
	CertValidity time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Bundle is PEM-encoded TLS material: a CA and a serving certificate it signed.
type Bundle struct {
	// CACert is the CA certificate (ca.crt).
	CACert []byte
	// CAKey is the CA's private key; WriteFiles never writes it.
	CAKey []byte
	// Cert is the serving certificate (tls.crt).
	Cert []byte
	// Key is the serving certificate's private key (tls.key), PKCS#8.
	Key []byte
}

// Validate reports whether the options can produce certificates: the names
// must be valid Service and namespace names and the validities not negative.
// NewSelfSigned checks its names and validities with it too.
func (o GenerateOptions) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1035Label(o.Service); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("service name %q: %s", o.Service, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(msgs, "; ")))
	}
	if o.CAValidity < 0 {
		errs = append(errs, fmt.Errorf("CA validity %s is negative", o.CAValidity))
	}
	if o.CertValidity < 0 {
		errs = append(errs, fmt.Errorf("certificate validity %s is negative", o.CertValidity))
	}
	return errors.Join(errs...)
}

// Generate creates a new ECDSA P-256 CA and a serving certificate it signs for
// the Service's DNS names (see DNSNames). The serving certificate never
// outlives the CA.
func Generate(o GenerateOptions) (Bundle, error) {
	if err := o.Validate(); err != nil {
		return Bundle{}, err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	caValidity, certValidity := o.CAValidity, o.CertValidity
	if caValidity == 0 {
		caValidity = DefaultCAValidity
	}
	if certValidity == 0 {
		certValidity = DefaultCertValidity
	}
	t := now()
	ca, err := newCA(o.Service+"."+o.Namespace, t, caValidity)
	if err != nil {
		return Bundle{}, err
	}
	serving, err := newServingCert(ca, DNSNames(o.Service, o.Namespace), t, certValidity)
	if err != nil {
		return Bundle{}, err
	}
	return Bundle{CACert: ca.certPEM, CAKey: ca.keyPEM, Cert: serving.certPEM, Key: serving.keyPEM}, nil
}

// DNSNames are the names a serving certificate for a Service carries:
// NAME.NS.svc (what the API server dials), NAME.NS.svc.cluster.local, NAME and
// NAME.NS.
func DNSNames(service, namespace string) []string {
	svc := service + "." + namespace + ".svc"
	return []string{svc, svc + ".cluster.local", service, service + "." + namespace}
}

// keyPair is a parsed certificate with its key, and both in PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// newCA creates a self-signed CA valid from now for validity. The subject
// carries the creation time so that successive CAs are told apart in logs and
// bundles.
func newCA(name string, now time.Time, validity time.Duration) (keyPair, error) {
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return keyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", name, now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	certPEM, cert, err := pki.SignCertificate(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing CA certificate: %w", err)
	}
	keyPEM, err := pki.EncodePKCS8PrivateKey(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("encoding CA key: %w", err)
	}
	return keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// newServingCert creates a key and a server certificate for dnsNames signed by
// ca, valid from now for validity but never beyond the CA's expiry: a client
// could not verify it after that anyway.
func newServingCert(ca keyPair, dnsNames []string, now time.Time, validity time.Duration) (keyPair, error) {
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating serving key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return keyPair{}, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: dnsNames[0]},
		DNSNames:              dnsNames,
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	certPEM, cert, err := pki.SignCertificate(tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing serving certificate: %w", err)
	}
	keyPEM, err := pki.EncodePKCS8PrivateKey(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("encoding serving key: %w", err)
	}
	return keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// parseKeyPair decodes a PEM certificate and key and checks that they belong together.
func parseKeyPair(certPEM, keyPEM []byte) (keyPair, error) {
	cert, err := pki.DecodeX509CertificateBytes(certPEM)
	if err != nil {
		return keyPair{}, fmt.Errorf("decoding certificate: %w", err)
	}
	key, err := pki.DecodePrivateKeyBytes(keyPEM)
	if err != nil {
		return keyPair{}, fmt.Errorf("decoding private key: %w", err)
	}
	ok, err := pki.PublicKeyMatchesCertificate(key.Public(), cert)
	if err != nil {
		return keyPair{}, fmt.Errorf("comparing key and certificate: %w", err)
	}
	if !ok {
		return keyPair{}, errors.New("private key does not match certificate")
	}
	return keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// serialNumber returns a random positive 128-bit serial number (RFC 5280 allows up to 20 octets).
func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
