package cluster

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ClientCA issues TLS client certificates.
type ClientCA struct {
	// CertPEM is the CA certificate: what `podpatch serve --client-ca-file` reads.
	CertPEM []byte
	cert    *x509.Certificate
	key     crypto.Signer
}

// NewClientCA creates a CA valid for a day.
func NewClientCA(name string) (*ClientCA, error) {
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	certPEM, cert, err := pki.SignCertificate(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	return &ClientCA{CertPEM: certPEM, cert: cert, key: key}, nil
}

// Issue returns a client certificate for name and its key, both PEM.
func (ca *ClientCA) Issue(name string) (certPEM, keyPEM []byte, err error) {
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     ca.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if certPEM, _, err = pki.SignCertificate(tmpl, ca.cert, key.Public(), ca.key); err != nil {
		return nil, nil, fmt.Errorf("client certificate: %w", err)
	}
	if keyPEM, err = pki.EncodePKCS8PrivateKey(key); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// webhookClientCredentials gives kube-apiserver a client certificate for calling webhooks, as
// a cluster operator would (reference §5, --client-ca-file): it writes to dir a new client CA
// (webhook-client-ca.crt, for podpatch), a kubeconfig with a certificate that CA signed, and
// the AdmissionConfiguration (--admission-control-config-file) that hands that kubeconfig to
// both webhook admission plugins. It returns the CA and the AdmissionConfiguration's path.
//
// kube-apiserver picks a kubeconfig user by the webhook's host: for a Service,
// NAME.NAMESPACE.svc (with :PORT unless 443); for a URL, its host:port; "*.SUFFIX" matches
// by DNS suffix and "*" matches every webhook (k8s.io/apiserver/pkg/util/webhook,
// defaultAuthenticationInfoResolver). The tests' webhooks are https://localhost:PORT with
// ports picked at run time, after the API server has read this file, so the user here is
// "*": the API server presents the certificate to every webhook, and a server that does not
// ask for one never sees it.
func webhookClientCredentials(dir string) (*ClientCA, string, error) {
	ca, err := NewClientCA("podpatch-e2e-webhook-clients")
	if err != nil {
		return nil, "", err
	}
	certPEM, keyPEM, err := ca.Issue("kube-apiserver")
	if err != nil {
		return nil, "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kubeconfig := filepath.Join(dir, "webhook-client.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return nil, "", err
	}
	admission := filepath.Join(dir, "admission-configuration.yaml")
	plugin := func(name string) string {
		return fmt.Sprintf(`  - name: %s
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %q
`, name, kubeconfig)
	}
	config := "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n" +
		plugin("ValidatingAdmissionWebhook") + plugin("MutatingAdmissionWebhook")
	if err := os.WriteFile(admission, []byte(config), 0o600); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, webhookClientCAFile), ca.CertPEM, 0o644); err != nil {
		return nil, "", err
	}
	return ca, admission, nil
}

// webhookClientCAFile is the name, in the control plane's directory, of the CA of the client
// certificate kube-apiserver presents to webhooks.
const webhookClientCAFile = "webhook-client-ca.crt"

// serial is a random positive 128-bit serial number.
func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	return n.Add(n, big.NewInt(1)), nil
}
