package main

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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/certs"
	"github.com/podpatch/podpatch/test/cluster"
)

// TestServeSIGTERM runs `podpatch serve` and sends it SIGTERM while a request is in flight:
// it stops accepting connections, answers that request in full and exits 0, which it does only
// when the requests finished within --shutdown-timeout.
func TestServeSIGTERM(t *testing.T) {
	certDir := t.TempDir()
	r := podpatch(t, "", "certs", "--service", "podpatch", "--namespace", "podpatch-system", "--out", certDir)
	require.Equal(t, 0, r.code, r.stderr)
	addr, metricsAddr, probeAddr := heldAddr(t), heldAddr(t), heldAddr(t)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)

	var stderr bytes.Buffer
	cmd := exec.Command(podpatchBin, "serve", "--policy-dir", examples, "--cert-dir", certDir,
		"--host", host, "--port", port, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probeAddr, "--permit-port-sharing",
		// A budget longer than the test's steps: the request must finish, not fall back.
		"--request-budget", "1m", "--shutdown-timeout", "50s", "--shutdown-delay", "1s")
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waited := false
	t.Cleanup(func() {
		if !waited {
			require.NoError(t, cmd.Process.Kill())
			<-exited
		}
		if t.Failed() {
			t.Logf("podpatch serve:\n%s", stderr.String())
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 50*time.Millisecond, "podpatch serve never became ready")

	// Headers and half the body on the wire: the request is in flight, being read (within its
	// read deadline, a sixth of the budget).
	ca, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "podpatch.podpatch-system.svc"})
	require.NoError(t, err)
	defer conn.Close()
	body := workerReview(t)
	_, err = fmt.Fprintf(conn, "POST /mutate HTTP/1.1\r\nHost: podpatch\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	require.NoError(t, err)
	_, err = conn.Write(body[:len(body)/2])
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, metricsAddr), "\ncontroller_runtime_webhook_requests_in_flight{webhook=\"/mutate\"} 1\n")
	}, 30*time.Second, 20*time.Millisecond)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { // no new connections once shutdown begins
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 30*time.Second, 20*time.Millisecond)
	select {
	case err := <-exited:
		waited = true
		t.Fatalf("podpatch exited with a request in flight: %v", err)
	default:
	}

	_, err = conn.Write(body[len(body)/2:])
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.NoError(t, resp.Body.Close())
	require.True(t, out.Response.Allowed)
	require.NotEmpty(t, out.Response.Patch, "the request in flight is answered in full")
	require.Empty(t, out.Response.Warnings)

	select {
	case err := <-exited:
		waited = true
		require.NoError(t, err, "podpatch exits 0 once the requests in flight are answered")
	case <-time.After(2 * time.Minute):
		t.Fatal("podpatch did not exit after SIGTERM")
	}
}

// TestServe runs the composition root in process with --policy-dir on loopback over TLS: the
// answer to an AdmissionReview is exactly what render predicts, the probes and metrics answer,
// and once stopped it is unready but still answers for --shutdown-delay. (The requests in
// flight at shutdown are TestServeSIGTERM's, on the binary.)
func TestServe(t *testing.T) {
	certDir := t.TempDir()
	b, err := certs.Generate(certs.GenerateOptions{Service: "podpatch", Namespace: "podpatch-system"})
	require.NoError(t, err)
	require.NoError(t, certs.WriteFiles(certDir, b))
	o := newServeOptions()
	_, err = parseCommand("serve", nil, io.Discard, false, o) // the defaults, as runServe gets them
	require.NoError(t, err)
	addr := heldAddr(t)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	o.Host = host
	o.Port, err = strconv.Atoi(port)
	require.NoError(t, err)
	o.CertDir, o.PolicyDir = certDir, examples
	o.MetricsBindAddress, o.HealthProbeBindAddress = heldAddr(t), heldAddr(t)
	o.PermitPortSharing = true
	o.ShutdownDelay = 3 * time.Second
	require.NoError(t, o.Validate())
	require.False(t, o.needsCluster())
	require.False(t, o.elects(), "no cluster, no leader-only component")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, logr.Discard()) }()
	var generation string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + o.HealthProbeBindAddress + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		generation = resp.Header.Get("X-Podpatch-Policy-Generation")
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "readyz never became ready")

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(b.CACert))
	mutate := func() *admissionv1.AdmissionReview {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "podpatch.podpatch-system.svc"}}}
		resp, err := client.Post("https://"+addr+"/mutate", "application/json", bytes.NewReader(workerReview(t)))
		require.NoError(t, err)
		var ar admissionv1.AdmissionReview
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&ar))
		require.NoError(t, resp.Body.Close())
		require.Equal(t, "HTTP/1.1", resp.Proto, "HTTP/2 is off by default")
		require.True(t, ar.Response.Allowed)
		return &ar
	}
	ar := mutate()
	patch, err := jsonpatch.DecodePatch(ar.Response.Patch)
	require.NoError(t, err)
	worker, err := yaml.YAMLToJSON([]byte(readFile(t, daskWorker)))
	require.NoError(t, err)
	got, err := patch.Apply(worker)
	require.NoError(t, err)
	want, err := yaml.YAMLToJSON([]byte(requireOK(t, podpatch(t, "", "render", "-f", daskWorker, "--policies", examples))))
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got))

	metrics := scrape(t, o.MetricsBindAddress)
	require.Contains(t, metrics, `podpatch_admission_requests_total{kind="Pod",manager="dask",result="patched",role="worker"}`)
	require.Contains(t, metrics, "controller_runtime_webhook_latency_seconds")
	require.Contains(t, metrics, fmt.Sprintf(`podpatch_policy_generation_info{hash=%q} 1`, generation))
	require.Contains(t, metrics, "\npodpatch_ready 1\n")
	// The Go runtime and process collectors docs/metrics.md lists, and the memory limit they
	// are compared with (0: --memory-limit unset).
	for _, family := range []string{"go_goroutines", "go_threads", "go_memstats_heap_inuse_bytes", "go_gc_gomemlimit_bytes",
		"process_resident_memory_bytes", "process_open_fds", "process_max_fds", "podpatch_memory_limit_bytes"} {
		require.Regexp(t, "\n"+family+" [0-9.e+]+\n", metrics)
	}
	require.Contains(t, metrics, "\npodpatch_memory_limit_bytes 0\n")
	hresp, err := http.Get("http://" + o.HealthProbeBindAddress + "/healthz")
	require.NoError(t, err)
	require.NoError(t, hresp.Body.Close())
	require.Equal(t, http.StatusOK, hresp.StatusCode)

	// Stopped (SIGTERM): unready at once, yet new reviews are answered for the delay.
	stopped := time.Now()
	cancel()
	rresp, err := http.Get("http://" + o.HealthProbeBindAddress + "/readyz?verbose")
	require.NoError(t, err)
	body, err := io.ReadAll(rresp.Body)
	require.NoError(t, err)
	require.NoError(t, rresp.Body.Close())
	require.Equal(t, http.StatusInternalServerError, rresp.StatusCode, string(body)) // healthz.Handler's failure
	require.Contains(t, string(body), "[-]shutdown failed")
	require.Equal(t, ar.Response.Patch, mutate().Response.Patch, "still serving during --shutdown-delay")
	require.Contains(t, scrape(t, o.MetricsBindAddress), "\npodpatch_ready 0\n")
	require.NoError(t, <-done, "a graceful stop returns nil")
	require.GreaterOrEqual(t, time.Since(stopped), o.ShutdownDelay)
	_, err = net.Dial("tcp", addr)
	require.Error(t, err, "no longer accepting connections")
}

// TestServeOptions checks flag validation: --client-ca-file must hold a CA, and the leader
// election's flags (also under their deprecated names) count only when something is elected.
func TestServeOptions(t *testing.T) {
	dir := t.TempDir()
	b, err := certs.Generate(certs.GenerateOptions{Service: "kube-apiserver", Namespace: "kube-system"})
	require.NoError(t, err)
	good := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(good, b.CACert, 0o644))
	bad := filepath.Join(dir, "bad.crt")
	require.NoError(t, os.WriteFile(bad, b.Key, 0o600))
	validate := func(args ...string) error {
		o := newServeOptions()
		_, err := parseCommand("serve", args, io.Discard, false, o)
		require.NoError(t, err)
		return o.Validate()
	}
	require.NoError(t, validate())
	require.NoError(t, validate("--client-ca-file="+good))
	require.ErrorContains(t, validate("--client-ca-file="+bad), "--client-ca-file")
	require.ErrorContains(t, validate("--client-ca-file="+filepath.Join(dir, "missing")), "--client-ca-file")

	require.ErrorContains(t, validate("--leader-elect-renew-deadline=20s"), "--leader-elect-lease-duration > --leader-elect-renew-deadline")
	require.ErrorContains(t, validate("--external-url-lease-name="), "--leader-elect-resource-name must not be empty")
	require.NoError(t, validate("--leader-elect-resource-name=", "--external-urls=false"), "nothing elected")
	require.ErrorContains(t, validate("--shutdown-delay=25s"), "less than --shutdown-timeout 25s, which includes it")
	require.ErrorContains(t, validate("--shutdown-delay=-1s"), "--shutdown-delay")
	require.NoError(t, validate("--leader-elect-resource-name=", "--policy-dir=x"), "no cluster, nothing elected")
	require.ErrorContains(t, validate("--leader-elect-resource-name=", "--policy-dir=x", "--audit-interval=1m"), "--leader-elect-resource-name")
}

// workerReview is an AdmissionReview creating the Dask worker fixture in namespace default.
func workerReview(t *testing.T) []byte {
	t.Helper()
	obj, err := yaml.YAMLToJSON([]byte(readFile(t, daskWorker)))
	require.NoError(t, err)
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "sigterm",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "default",
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: obj},
		},
	})
	require.NoError(t, err)
	return b
}

// heldAddr holds a loopback port until the test ends (cluster.HoldPort) and returns its
// address, for a podpatch serve run with --permit-port-sharing.
func heldAddr(t *testing.T) string {
	t.Helper()
	h, err := cluster.HoldPort()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Release()) })
	return h.Addr()
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

// TestServeProfiling checks that Go's profiles are off by default and, with --profiling, served
// on the metrics listener and on no other: never on the webhook's, which tenants' API
// requests reach, nor on the probes'.
func TestServeProfiling(t *testing.T) {
	certDir := t.TempDir()
	b, err := certs.Generate(certs.GenerateOptions{Service: "podpatch", Namespace: "podpatch-system"})
	require.NoError(t, err)
	require.NoError(t, certs.WriteFiles(certDir, b))
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(b.CACert))
	webhookClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "podpatch.podpatch-system.svc"}}}
	status := func(c *http.Client, url string) int {
		resp, err := c.Get(url)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	for _, profiling := range []bool{false, true} {
		t.Run(fmt.Sprintf("profiling=%v", profiling), func(t *testing.T) {
			o := newServeOptions()
			addr := heldAddr(t)
			host, port, err := net.SplitHostPort(addr)
			require.NoError(t, err)
			args := []string{"--cert-dir", certDir, "--policy-dir", examples, "--shutdown-delay", "0s", "--host", host, "--port", port,
				"--metrics-bind-address", heldAddr(t), "--health-probe-bind-address", heldAddr(t), "--permit-port-sharing"}
			if profiling {
				args = append(args, "--profiling")
			}
			_, err = parseCommand("serve", args, io.Discard, false, o)
			require.NoError(t, err)
			require.Equal(t, profiling, o.Profiling, "off by default")
			require.NoError(t, o.Validate())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- serve(ctx, o, logr.Discard()) }()
			defer func() { cancel(); require.NoError(t, <-done) }()
			require.Eventually(t, func() bool {
				resp, err := http.Get("http://" + o.HealthProbeBindAddress + "/readyz")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			}, 20*time.Second, 50*time.Millisecond, "readyz never became ready")

			want := http.StatusNotFound
			if profiling {
				want = http.StatusOK
			}
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
				require.Equal(t, want, status(http.DefaultClient, "http://"+o.MetricsBindAddress+path), "metrics listener %s", path)
				require.Equal(t, http.StatusNotFound, status(http.DefaultClient, "http://"+o.HealthProbeBindAddress+path), "probe listener %s", path)
				require.Equal(t, http.StatusNotFound, status(webhookClient, "https://"+addr+path), "webhook listener %s", path)
			}
			require.Equal(t, http.StatusOK, status(http.DefaultClient, "http://"+o.MetricsBindAddress+"/metrics"))
		})
	}
}
