package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/podpatch/podpatch/certs"
	"github.com/podpatch/podpatch/policies"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestServe runs `podpatch serve --policy-dir manifests/examples` on loopback over TLS and
// checks that an AdmissionReview is answered exactly as render predicts, that the probes and
// metrics answer, and that a SIGTERM-style shutdown finishes a request in flight.
func TestServe(t *testing.T) {
	certDir := t.TempDir()
	b, err := certs.Generate(certs.GenerateOptions{Service: "podpatch", Namespace: "podpatch-system"})
	require.NoError(t, err)
	require.NoError(t, certs.WriteFiles(certDir, b))

	webhookAddr := freeAddr(t)
	host, port, err := net.SplitHostPort(webhookAddr)
	require.NoError(t, err)
	o := NewOptions()
	o.Host = host
	_, err = fmt.Sscan(port, &o.Port)
	require.NoError(t, err)
	o.CertDir = certDir
	o.PolicyDir = "../manifests/examples"
	o.MetricsBindAddress = freeAddr(t)
	o.HealthProbeBindAddress = freeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o, logr.Discard()) }()

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(b.CACert))
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "podpatch.podpatch-system.svc"},
	}}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + o.HealthProbeBindAddress + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "readyz never became ready")

	// The answer equals what render prints for the same object and policies.
	pod, err := os.ReadFile("../policies/testdata/fixtures/dask-operator/worker-pod.yaml")
	require.NoError(t, err)
	docs, err := policies.SplitDocuments(bytes.NewReader(pod))
	require.NoError(t, err)
	body := review(t, "Pod", "default", admissionv1.Create, docs[0].JSON, false)
	resp, err := client.Post("https://"+webhookAddr+"/mutate", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	var ar admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ar))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "HTTP/1.1", resp.Proto, "HTTP/2 is off by default")
	got := applyResponse(t, docs[0].JSON, ar.Response)

	cms, err := policies.ReadConfigMapFiles([]string{"../manifests/examples"}, "default", nil)
	require.NoError(t, err)
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(t, probs)
	want, err := set.Apply(policies.Input{Kind: policies.KindPod, Object: docs[0].JSON, Namespace: "default"})
	require.NoError(t, err)
	require.True(t, want.Changed)
	require.JSONEq(t, string(want.Object), string(got))

	// Metrics and liveness.
	mresp, err := http.Get("http://" + o.MetricsBindAddress + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(mresp.Body)
	require.NoError(t, err)
	require.NoError(t, mresp.Body.Close())
	require.Contains(t, string(metrics), `podpatch_admission_requests_total{kind="Pod",manager="dask",result="patched",role="worker"}`)
	require.Contains(t, string(metrics), `podpatch_policies{scope="platform"} 7`)
	require.Contains(t, string(metrics), "controller_runtime_webhook_latency_seconds")
	hresp, err := http.Get("http://" + o.HealthProbeBindAddress + "/healthz")
	require.NoError(t, err)
	require.NoError(t, hresp.Body.Close())
	require.Equal(t, http.StatusOK, hresp.StatusCode)

	// A request in flight when shutdown starts still gets its answer: on a raw TLS connection,
	// the headers and half the body are on the wire when the context is cancelled.
	conn, err := tls.Dial("tcp", webhookAddr, &tls.Config{RootCAs: pool, ServerName: "podpatch.podpatch-system.svc"})
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /mutate HTTP/1.1\r\nHost: podpatch\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	require.NoError(t, err)
	_, err = conn.Write(body[:len(body)/2])
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // the server has read the headers: the connection is active
	cancel()
	time.Sleep(200 * time.Millisecond) // shutdown has begun and is waiting for the request
	_, err = conn.Write(body[len(body)/2:])
	require.NoError(t, err)
	r, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.NoError(t, json.NewDecoder(r.Body).Decode(&ar))
	require.NoError(t, r.Body.Close())
	require.True(t, ar.Response.Allowed)
	require.NotEmpty(t, ar.Response.Patch)

	select {
	case err := <-done:
		require.NoError(t, err, "graceful shutdown returns nil")
	case <-time.After(30 * time.Second):
		t.Fatal("server did not stop")
	}
	_, err = client.Post("https://"+webhookAddr+"/mutate", "application/json", bytes.NewReader(body))
	require.Error(t, err, "stopped accepting")
	require.True(t, strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "reset"), err.Error())
}
