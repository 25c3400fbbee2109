package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testNow is a second-aligned instant: X.509 times have second precision.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

func mustCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	certs := mustCerts(t, pemBytes)
	require.Len(t, certs, 1)
	return certs[0]
}

func mustCerts(t *testing.T, pemBytes []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	rest := pemBytes
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		require.Equal(t, "CERTIFICATE", block.Type)
		c, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		out = append(out, c)
	}
}

func TestGenerate(t *testing.T) {
	b, err := Generate(GenerateOptions{
		Service: "podpatch", Namespace: "podpatch-system",
		CAValidity: 48 * time.Hour, CertValidity: 24 * time.Hour,
		Now: fixedClock(testNow),
	})
	require.NoError(t, err)

	ca := mustCert(t, b.CACert)
	assert.True(t, ca.IsCA)
	assert.Equal(t, testNow.Add(48*time.Hour), ca.NotAfter.UTC())
	assert.Equal(t, testNow.Add(-backdate), ca.NotBefore.UTC())

	leaf := mustCert(t, b.Cert)
	assert.False(t, leaf.IsCA)
	assert.Equal(t, testNow.Add(24*time.Hour), leaf.NotAfter.UTC())
	assert.Equal(t, testNow.Add(-backdate), leaf.NotBefore.UTC())
	assert.Equal(t, []string{
		"podpatch.podpatch-system.svc",
		"podpatch.podpatch-system.svc.cluster.local",
		"podpatch",
		"podpatch.podpatch-system",
	}, leaf.DNSNames)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, leaf.ExtKeyUsage)

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range leaf.DNSNames {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: testNow})
		assert.NoError(t, err, name)
	}
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "other.podpatch-system.svc", Roots: roots, CurrentTime: testNow})
	assert.Error(t, err, "a name the certificate was not issued for")
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "podpatch.podpatch-system.svc", Roots: roots, CurrentTime: testNow.Add(25 * time.Hour)})
	assert.Error(t, err, "after the certificate's validity")

	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	require.NoError(t, err, "key matches certificate")
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	require.True(t, ok, "ECDSA key, got %T", pair.PrivateKey)
	assert.Equal(t, elliptic.P256(), key.Curve)
	caPair, err := tls.X509KeyPair(b.CACert, b.CAKey)
	require.NoError(t, err, "CA key matches CA certificate")
	assert.IsType(t, &ecdsa.PrivateKey{}, caPair.PrivateKey)

	other, err := Generate(GenerateOptions{Service: "podpatch", Namespace: "podpatch-system", Now: fixedClock(testNow)})
	require.NoError(t, err)
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "podpatch.podpatch-system.svc", Roots: poolOf(t, other.CACert), CurrentTime: testNow})
	assert.Error(t, err, "another CA must not verify this certificate")
}

func TestGenerateDefaultsAndClamp(t *testing.T) {
	b, err := Generate(GenerateOptions{Service: "svc", Namespace: "ns", Now: fixedClock(testNow)})
	require.NoError(t, err)
	assert.Equal(t, testNow.Add(DefaultCAValidity), mustCert(t, b.CACert).NotAfter.UTC())
	assert.Equal(t, testNow.Add(DefaultCertValidity), mustCert(t, b.Cert).NotAfter.UTC())

	b, err = Generate(GenerateOptions{Service: "svc", Namespace: "ns", CAValidity: time.Hour, CertValidity: 10 * time.Hour, Now: fixedClock(testNow)})
	require.NoError(t, err)
	assert.Equal(t, testNow.Add(time.Hour), mustCert(t, b.Cert).NotAfter.UTC(), "serving certificate never outlives its CA")
}

func TestGenerateRejectsBadOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		opts GenerateOptions
		want string
	}{
		"no service":         {GenerateOptions{Namespace: "ns"}, `service name ""`},
		"bad service":        {GenerateOptions{Service: "Pod_Patch", Namespace: "ns"}, `service name "Pod_Patch"`},
		"bad namespace":      {GenerateOptions{Service: "svc", Namespace: "a.b"}, `namespace "a.b"`},
		"negative validity":  {GenerateOptions{Service: "svc", Namespace: "ns", CertValidity: -time.Hour}, "certificate validity -1h0m0s is negative"},
		"negative CA period": {GenerateOptions{Service: "svc", Namespace: "ns", CAValidity: -time.Hour}, "CA validity -1h0m0s is negative"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Generate(tc.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	b1, err := Generate(GenerateOptions{Service: "svc", Namespace: "ns"})
	require.NoError(t, err)
	require.NoError(t, WriteFiles(dir, b1))

	for name, want := range map[string]struct {
		data []byte
		mode os.FileMode
	}{
		CACertFile: {b1.CACert, 0o644},
		CertFile:   {b1.Cert, 0o644},
		KeyFile:    {b1.Key, 0o600},
	} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want.data, got, name)
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want.mode, st.Mode().Perm(), name)
	}
	assert.NotContains(t, string(readFile(t, dir, CACertFile)), "PRIVATE KEY", "the CA key is never written")

	b2, err := Generate(GenerateOptions{Service: "svc", Namespace: "ns"})
	require.NoError(t, err)
	require.NoError(t, WriteFiles(dir, b2))
	assert.True(t, filesEqual(dir, b2))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{CACertFile, CertFile, KeyFile}, names, "no temporary files left behind")

	mismatched := Bundle{CACert: b1.CACert, Cert: b1.Cert, Key: b2.Key}
	require.Error(t, WriteFiles(dir, mismatched))
	assert.True(t, filesEqual(dir, b2), "a refused bundle leaves the files alone")
	require.Error(t, WriteFiles(dir, Bundle{Cert: b1.Cert, Key: b1.Key}), "the CA certificate is required")
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return b
}

func poolOf(t *testing.T, pemBytes []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pemBytes))
	return pool
}
