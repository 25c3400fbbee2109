package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/podpatch/podpatch/certs"
)

// handOver listens on a loopback port of its own and returns the address and a ListenFunc that
// hands that listener to the server.
func handOver(t *testing.T) (string, ListenFunc) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln.Addr().String(), func(context.Context, string) (net.Listener, error) { return ln, nil }
}

// TestTLSServerShutdown: once its context is done the server refuses new connections, lets the
// request in flight finish, and returns nil; a request that does not finish within the grace
// makes it return an error instead of waiting.
func TestTLSServerShutdown(t *testing.T) {
	certDir, pool := testCerts(t)
	start := func(h http.Handler, grace time.Duration) (string, context.CancelFunc, chan error) {
		addr, listen := handOver(t)
		s := &Server{Addr: addr, Listen: listen, CertDir: certDir, Handler: h, Grace: grace, Log: logr.Discard()}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Start(ctx) }()
		require.Eventually(t, func() bool { return s.StartedChecker()(nil) == nil }, 10*time.Second, 10*time.Millisecond)
		return s.Addr, cancel, done
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsClientConfig(pool)}}
	b := newBlocker()
	h := &Review{Handler: b}
	addr, cancel, done := start(h, time.Minute)
	body := review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false)
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Post("https://"+addr+"/mutate", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
		}
		answered <- resp
	}()
	<-b.entered
	cancel() // SIGTERM
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "new connections are refused once shutdown begins")
	select {
	case err := <-done:
		t.Fatalf("returned with a request in flight: %v", err)
	default:
	}
	close(b.release)
	resp := <-answered
	require.NotNil(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, <-done)

	// A request that never finishes: the server gives up after the grace.
	stuck := newBlocker()
	addr, cancel, done = start(&Review{Handler: stuck}, 50*time.Millisecond)
	go func() {
		resp, err := client.Post("https://"+addr+"/mutate", "application/json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-stuck.entered
	cancel()
	err := <-done
	require.ErrorContains(t, err, "requests in flight did not finish within 50ms")
	close(stuck.release)
}

// testCerts writes a serving certificate for podpatch.podpatch-system.svc and returns its
// directory and CA pool.
func testCerts(t testing.TB) (string, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	b, err := certs.Generate(certs.GenerateOptions{Service: "podpatch", Namespace: "podpatch-system"})
	require.NoError(t, err)
	require.NoError(t, certs.WriteFiles(dir, b))
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(b.CACert))
	return dir, pool
}

// tlsClientConfig trusts pool and names the service of testCerts' certificate.
func tlsClientConfig(pool *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: pool, ServerName: "podpatch.podpatch-system.svc"}
}
