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
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

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
	o := DefaultConfig()
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
	go func() { done <- Run(ctx, o, policies.DefaultOptions(), logr.Discard()) }()

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
	metrics := scrape(t, o.MetricsBindAddress)
	require.Contains(t, metrics, `podpatch_admission_requests_total{kind="Pod",manager="dask",result="patched",role="worker"}`)
	require.Contains(t, metrics, fmt.Sprintf(`podpatch_policies{scope="platform"} %d`, set.Count(policies.ScopePlatform)))
	require.Contains(t, metrics, "controller_runtime_webhook_latency_seconds")
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
	require.Eventually(t, func() bool { // the request holds a slot: it is being read
		return strings.Contains(scrape(t, o.MetricsBindAddress), "\npodpatch_requests_in_flight 1\n")
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.Eventually(t, func() bool { // shutdown has begun: no new connections
		c, err := net.Dial("tcp", webhookAddr)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
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

// scrape returns the text of a /metrics endpoint; empty when it does not answer.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestManifestBudgets checks the Deployment against the webhook configurations: the request
// budget ends before either webhook's timeout, requests in flight at SIGTERM finish before the
// kubelet's SIGKILL, the memory limit reaches podpatch, and its slots fit in it.
func TestManifestBudgets(t *testing.T) {
	read := func(name string, into any) {
		t.Helper()
		b, err := os.ReadFile("../manifests/base/" + name)
		require.NoError(t, err)
		require.NoError(t, yaml.UnmarshalStrict(b, into))
	}
	var dep appsv1.Deployment
	read("deployment.yaml", &dep)
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	read("mutatingwebhook.yaml", &mwc)
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	read("validatingwebhook.yaml", &vwc)

	c := dep.Spec.Template.Spec.Containers[0]
	require.Equal(t, "serve", c.Args[0])
	o := DefaultConfig()
	for flag, into := range map[string]*time.Duration{"--request-budget": &o.RequestBudget, "--shutdown-timeout": &o.ShutdownTimeout} {
		if v, ok := argValue(c.Args[1:], flag); ok {
			d, err := time.ParseDuration(v)
			require.NoError(t, err, flag)
			*into = d
		}
	}
	if v, ok := argValue(c.Args[1:], "--max-in-flight"); ok {
		_, err := fmt.Sscan(v, &o.MaxInFlight)
		require.NoError(t, err)
	}

	require.NotEmpty(t, mwc.Webhooks)
	for _, w := range mwc.Webhooks {
		require.Less(t, o.RequestBudget, time.Duration(*w.TimeoutSeconds)*time.Second, w.Name)
	}
	for _, w := range vwc.Webhooks {
		require.Less(t, o.RequestBudget, time.Duration(*w.TimeoutSeconds)*time.Second, w.Name)
	}
	require.NotNil(t, dep.Spec.Template.Spec.TerminationGracePeriodSeconds)
	require.Less(t, o.ShutdownTimeout, time.Duration(*dep.Spec.Template.Spec.TerminationGracePeriodSeconds)*time.Second)

	limit := c.Resources.Limits.Memory()
	require.False(t, limit.IsZero(), "the container needs a memory limit")
	var fromLimit bool
	for _, e := range c.Env {
		if e.Name == "MEMORY_LIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
			ref := e.ValueFrom.ResourceFieldRef
			fromLimit = ref.Resource == "limits.memory" && ref.ContainerName == c.Name &&
				(ref.Divisor.IsZero() || ref.Divisor.Value() == 1) // bytes, as --memory-limit reads them
		}
	}
	require.True(t, fromLimit, "MEMORY_LIMIT must come from the container's limits.memory, in bytes")
	require.Equal(t, int64(manifestMemoryLimit), limit.Value(),
		"BenchmarkConcurrentMaxReviews measures against manifestMemoryLimit; keep them equal")
	require.Equal(t, defaultMaxInFlight, o.MaxInFlight, "the benchmark measures the default number of slots")
}

// argValue finds a flag's value in a container's args, as --name=value or --name value.
func argValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}
