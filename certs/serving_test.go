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
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
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

// freePort picks a loopback port that is free right now; controller-runtime's
// webhook server takes a port, not a listener.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// TestWebhookServerHotReload serves through controller-runtime's webhook
// server and replaces the certificate under it while clients keep calling: no
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

	port := freePort(t)
	srv := webhook.NewServer(webhook.Options{
		Host:    "127.0.0.1",
		Port:    port,
		CertDir: dir,
		TLSOpts: ServingOptions{CertDir: dir}.TLSOpts(),
	})
	var writeErrs atomic.Int64
	srv.Register("/ping", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if _, err := io.WriteString(w, "pong"); err != nil {
			writeErrs.Add(1)
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("webhook server did not stop")
		}
	})

	pool := poolOf(t, append(append([]byte{}, first.CACert...), second.CACert...))
	tlsConfig := &tls.Config{RootCAs: pool, ServerName: service + "." + namespace + ".svc", MinVersion: tls.VersionTLS12}
	url := fmt.Sprintf("https://127.0.0.1:%d/ping", port)
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
	_, err = tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, ServerName: tlsConfig.ServerName, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
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

	port := freePort(t)
	srv := webhook.NewServer(webhook.Options{
		Host:    "127.0.0.1",
		Port:    port,
		CertDir: dir,
		TLSOpts: ServingOptions{CertDir: dir, ClientCAFile: caFile}.TLSOpts(),
	})
	srv.Register("/ping", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("webhook server did not stop")
		}
	})

	url := fmt.Sprintf("https://127.0.0.1:%d/ping", port)
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
	require.NoError(t, srv.StartedChecker()(nil), "the readiness check passes without a client certificate")

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
