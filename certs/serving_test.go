package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// controller-runtime complains loudly when its logger is never set.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

func TestTLSOpts(t *testing.T) {
	apply := func(o ServingOptions, c *tls.Config) *tls.Config {
		for _, f := range o.TLSOpts() {
			f(c)
		}
		return c
	}
	c := apply(ServingOptions{}, &tls.Config{NextProtos: []string{"h2"}})
	assert.Equal(t, uint16(tls.VersionTLS12), c.MinVersion)
	assert.Equal(t, []string{"http/1.1"}, c.NextProtos, "HTTP/2 is off unless enabled")

	c = apply(ServingOptions{EnableHTTP2: true}, &tls.Config{MinVersion: tls.VersionTLS13})
	assert.Equal(t, uint16(tls.VersionTLS13), c.MinVersion, "a stricter minimum is kept")
	assert.Equal(t, []string{"h2", "http/1.1"}, c.NextProtos)
}

// serveTLS serves mux on a loopback port of its own as podpatch's webhook server does: a
// certwatcher on dir's tls.crt and tls.key under the TLS settings of opts, until the test
// ends. It returns the address.
func serveTLS(t *testing.T, dir string, opts ServingOptions, mux http.Handler) string {
	t.Helper()
	cw, err := certwatcher.New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	require.NoError(t, err)
	cfg := &tls.Config{GetCertificate: cw.GetCertificate}
	for _, op := range opts.TLSOpts() {
		op(cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- cw.Start(ctx) }()
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, srv.Shutdown(context.Background()))
		assert.ErrorIs(t, <-served, http.ErrServerClosed)
		assert.NoError(t, <-watched)
	})
	return ln.Addr().String()
}

// TestWebhookServerHotReload serves as podpatch's webhook server does (serveTLS)
// and replaces the certificate under it while clients keep calling: no
// request may fail, and new connections must end up with the new certificate.
func TestWebhookServerHotReload(t *testing.T) {
	const service, namespace = "podpatch", "podpatch-system"
	dir := t.TempDir()
	first, err := Generate(GenerateOptions{Service: service, Namespace: namespace})
	require.NoError(t, err)
	second, err := Generate(GenerateOptions{Service: service, Namespace: namespace})
	require.NoError(t, err)
	require.NoError(t, WriteFiles(dir, first))
	secondLeaf := mustCert(t, second.Cert)

	var writeErrs atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/ping", func(w http.ResponseWriter, _ *http.Request) {
		if _, err := io.WriteString(w, "pong"); err != nil {
			writeErrs.Add(1)
		}
	})
	addr := serveTLS(t, dir, ServingOptions{CertDir: dir}, mux)

	pool := poolOf(t, append(append([]byte{}, first.CACert...), second.CACert...))
	tlsConfig := &tls.Config{RootCAs: pool, ServerName: service + "." + namespace + ".svc", MinVersion: tls.VersionTLS12}
	url := "https://" + addr + "/ping"
	keepAlive := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig.Clone(), ForceAttemptHTTP2: true}}
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig.Clone(), DisableKeepAlives: true}}
	get := func(c *http.Client) (*http.Response, error) {
		resp, err := c.Get(url)
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(resp.Body)
		if closeErr := resp.Body.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK || string(body) != "pong" {
			return nil, fmt.Errorf("status %d, body %q", resp.StatusCode, body)
		}
		return resp, nil
	}
	require.Eventually(t, func() bool { _, err := get(fresh); return err == nil }, 20*time.Second, 50*time.Millisecond, "server starts")

	resp, err := get(keepAlive)
	require.NoError(t, err)
	assert.Equal(t, 1, resp.ProtoMajor, "HTTP/2 is not negotiated even when the client offers it")
	assert.Equal(t, "http/1.1", resp.TLS.NegotiatedProtocol)
	// A client that cannot speak TLS 1.2 is refused.
	_, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: tlsConfig.ServerName, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "protocol version")

	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range []*http.Client{keepAlive, keepAlive, fresh, fresh} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := get(c); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				ok.Add(1)
			}
		}()
	}

	// Rotate back and forth under load, ending on the second bundle.
	for i := range 7 {
		b := second
		if i%2 == 1 {
			b = first
		}
		require.NoError(t, WriteFiles(dir, b))
		time.Sleep(150 * time.Millisecond)
	}
	assert.Eventually(t, func() bool {
		resp, err := get(fresh)
		return err == nil && bytes.Equal(resp.TLS.PeerCertificates[0].Raw, secondLeaf.Raw)
	}, 20*time.Second, 50*time.Millisecond, "new connections present the new certificate")
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()

	if err, _ := firstErr.Load().(error); err != nil {
		t.Errorf("first failed request: %v", err)
	}
	assert.Zero(t, failed.Load(), "failed requests")
	assert.Zero(t, writeErrs.Load(), "failed responses")
	assert.Greater(t, ok.Load(), int64(20), "the clients kept calling during the rotation")
}

// clientCert issues a TLS client certificate signed by ca.
func clientCert(t *testing.T, ca keyPair, name string) tls.Certificate {
	t.Helper()
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	require.NoError(t, err)
	serial, err := serialNumber()
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	certPEM, _, err := pki.SignCertificate(tmpl, ca.cert, key.Public(), ca.key)
	require.NoError(t, err)
	keyPEM, err := pki.EncodePKCS8PrivateKey(key)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return pair
}

// TestClientCAFile serves through controller-runtime's webhook server with
// --client-ca-file: only clients with a certificate from that CA get an
// answer, the file is re-read when it changes, a broken version is ignored,
// and the readiness check still passes.
func TestClientCAFile(t *testing.T) {
	const service, namespace = "podpatch", "podpatch-system"
	dir := t.TempDir()
	serving, err := Generate(GenerateOptions{Service: service, Namespace: namespace})
	require.NoError(t, err)
	require.NoError(t, WriteFiles(dir, serving))
	apiserverCA, err := newCA("apiserver-client", time.Now(), time.Hour)
	require.NoError(t, err)
	otherCA, err := newCA("other", time.Now(), time.Hour)
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	require.NoError(t, os.WriteFile(caFile, apiserverCA.certPEM, 0o644))

	mux := http.NewServeMux()
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	})
	addr := serveTLS(t, dir, ServingOptions{CertDir: dir, ClientCAFile: caFile}, mux)
	url := "https://" + addr + "/ping"
	// ask calls with a fresh connection (so every call is a handshake),
	// presenting certs whatever CAs the server names, and returns who the
	// server saw.
	ask := func(certs ...tls.Certificate) (string, error) {
		present := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if len(certs) == 0 {
				return &tls.Certificate{}, nil
			}
			return &certs[0], nil
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: poolOf(t, serving.CACert), ServerName: service + "." + namespace + ".svc", GetClientCertificate: present}}}
		resp, err := c.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	apiserver := clientCert(t, apiserverCA, "kube-apiserver")
	other := clientCert(t, otherCA, "someone-else")
	require.Eventually(t, func() bool { _, err := ask(apiserver); return err == nil }, 20*time.Second, 50*time.Millisecond, "server starts")
	// The readiness check (webhook.Server.StartedChecker) dials without a client certificate.
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // as the readiness check
	require.NoError(t, err, "a handshake without a client certificate succeeds")
	require.NoError(t, conn.Close())

	who, err := ask(apiserver)
	require.NoError(t, err)
	assert.Equal(t, "kube-apiserver", who)
	_, err = ask()
	require.Error(t, err, "no client certificate")
	assert.Contains(t, err.Error(), "certificate required")
	_, err = ask(other)
	require.Error(t, err, "a certificate from another CA")
	assert.Contains(t, err.Error(), "unknown certificate authority")

	// The file changes: the other CA is trusted from the next handshake on.
	require.NoError(t, writeAtomic(filepath.Dir(caFile), filepath.Base(caFile), otherCA.certPEM, 0o644))
	who, err = ask(other)
	require.NoError(t, err, "the new CA is trusted")
	assert.Equal(t, "someone-else", who)
	_, err = ask(apiserver)
	require.Error(t, err, "the old CA is not")

	// A broken file keeps the last good CA.
	require.NoError(t, os.WriteFile(caFile, []byte("not PEM"), 0o644))
	_, err = ask(other)
	require.NoError(t, err, "the last good CA still verifies")
	require.NoError(t, os.Remove(caFile))
	_, err = ask(other)
	require.NoError(t, err, "also when the file is gone")
	_, err = ask()
	require.Error(t, err)
}

func TestReadCABundle(t *testing.T) {
	dir := t.TempDir()
	ca, err := newCA("a", time.Now(), time.Hour)
	require.NoError(t, err)
	good := filepath.Join(dir, "good.crt")
	require.NoError(t, os.WriteFile(good, ca.certPEM, 0o644))
	_, err = ReadCABundle(good)
	require.NoError(t, err)
	for name, content := range map[string][]byte{"empty": nil, "garbage": []byte("not PEM"), "key": ca.keyPEM} {
		f := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(f, content, 0o644))
		_, err := ReadCABundle(f)
		assert.Error(t, err, name)
	}
	_, err = ReadCABundle(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
