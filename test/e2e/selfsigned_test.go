package e2e

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
)

// The self-signed overlay's Secret, where podpatch keeps its CA and serving certificate.
const (
	podpatchTLSNamespace = "podpatch-system"
	podpatchTLSSecret    = "podpatch-tls"
)

// Validities short enough to see a serving-certificate renewal and a CA rotation within the
// test. certs.SelfSigned renews a certificate when a third of its lifetime remains (counted
// from issuance, as cert-manager does). With these values:
//   - the serving certificate is renewed 20 s after it is issued;
//   - the CA is rotated 60 s after the Secret is created: the new CA joins ca-bundle.crt,
//     the bundle is published, and 5 s later (the overlap) the serving certificate moves to
//     the new CA;
//   - the first CA expires 90 s after the Secret is created.
//
// NewSelfSigned accepts them: the certificate validity does not exceed the CA's, and the
// overlap is shorter than the CA renewal window (a third of 90 s).
var rotationValidityFlags = []string{
	"--self-signed-cert-validity", "30s",
	"--self-signed-ca-validity", "90s",
	"--self-signed-rotation-overlap", rotationOverlap.String(),
}

// rotationOverlap is how long podpatch publishes a new CA before serving a certificate it signed.
const rotationOverlap = 5 * time.Second

// TestSelfSigned installs the self-signed overlay's webhook configurations with an empty
// caBundle, so that only podpatch's own CA injection can make the API server's TLS handshake
// succeed, and goes through certificate renewals and a CA rotation with two replicas while the
// API server keeps admitting Pods with failurePolicy Fail. The configurations are installed
// and changed by server-side apply as a GitOps tool would: its change survives the rotation,
// and podpatch's field manager owns only the caBundle fields.
func TestSelfSigned(t *testing.T) {
	ctx := contextBackground()
	secretKey := client.ObjectKey{Namespace: podpatchTLSNamespace, Name: podpatchTLSSecret}
	err := k8s.Get(ctx, secretKey, &corev1.Secret{})
	require.True(t, apierrors.IsNotFound(err), "Secret %s must not exist before podpatch creates it: %v", secretKey, err)
	// Registered first so that it runs last, once both podpatch processes have stopped and can
	// no longer recreate the Secret.
	t.Cleanup(func() {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretKey.Namespace, Name: secretKey.Name}}
		if err := k8s.Delete(contextBackground(), s); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Secret %s: %v", secretKey, err)
		}
	})
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))

	// podpatch injects its CA into configurations that exist, so they are installed before it
	// starts, with the URL of the port it will listen on.
	port := heldPort(t)
	mwc, vwc := webhookConfigurations(t, kustomizeBuild(t, "manifests/overlays/self-signed"),
		fmt.Sprintf("https://localhost:%d", port), nil)
	fail := admissionregistrationv1.Fail
	for i := range mwc.Webhooks {
		require.Empty(t, mwc.Webhooks[i].ClientConfig.CABundle, "the overlay leaves caBundle to podpatch")
		// A TLS failure must fail the create, not let an unpatched Pod through.
		mwc.Webhooks[i].FailurePolicy = &fail
	}
	for i := range vwc.Webhooks {
		require.Empty(t, vwc.Webhooks[i].ClientConfig.CABundle, "the overlay leaves caBundle to podpatch")
	}
	// A GitOps tool installs them by server-side apply; podpatch shares them with it.
	installWebhooksAsGitOps(t, mwc, vwc)
	history := watchTLSSecret(t, secretKey)

	flags := append([]string{"--self-signed",
		"--namespace", podpatchTLSNamespace, "--secret-name", podpatchTLSSecret,
		"--mutating-webhook-configuration", mwc.Name, "--validating-webhook-configuration", vwc.Name,
		// The serving certificate names --service-name NAME as NAME, NAME.NS, NAME.NS.svc and
		// NAME.NS.svc.cluster.local. In a cluster the API server dials NAME.NS.svc; here it dials
		// the rewritten URL https://localhost:PORT, so the certificate must name localhost, and the
		// Service name is the part of the names that a flag sets.
		"--service-name", "localhost"}, rotationValidityFlags...)
	p := startPodpatchOnPort(t, port, t.TempDir(), flags...)

	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, secretKey, secret))
	for _, k := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.crt"} {
		require.NotEmpty(t, secret.Data[k], "Secret %s has %s", secretKey, k)
	}
	requireServingCertValid(t, secret)
	firstCA, err := pki.DecodeX509CertificateBytes(secret.Data["ca.crt"])
	require.NoError(t, err)
	requireCABundlePublished(t, mwc.Name, vwc.Name, secretKey)
	p.waitForExamples(t)
	require.Eventually(t, func() bool {
		pod := daskWorker("default", "self-signed-probe")
		return k8s.Create(ctx, pod, client.DryRunAll) == nil && patchedByExamples(pod)
	}, 30*time.Second, 200*time.Millisecond, "the API server never reached podpatch with the injected caBundle")
	// The GitOps tool syncs a change to the configurations, without force: podpatch owns none
	// of the fields the tool applies, so nothing conflicts, and the change survives rotations.
	changeAsGitOps(mwc, vwc)
	applyAsGitOps(t, mwc, vwc)

	// A second replica shares the Secret. The API server never calls it, but it reconciles the
	// same Secret and configurations on its own schedule.
	p2 := startPodpatch(t, t.TempDir(), flags...)
	requireConverged(t, secretKey, p, p2)
	requireQuietSecret(t, secretKey, 3*time.Second)

	// Rotation: keep creating Pods through the API server until the Secret has gone through a
	// serving-certificate renewal and a CA rotation, and podpatch serves a certificate of the new
	// CA. The API server keeps its TLS connections to podpatch alive and verifies a certificate
	// only when it opens one (it does when the caBundle changes): with a caBundle left stale after
	// the rotation it goes on admitting every create over the connection it has. So a fresh
	// handshake against the caBundle published at that moment also checks, every 200 ms, what a
	// new connection of an API server would meet.
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var creates, failures, probes int
	var failed []string
	served := map[string]bool{}
	var probeErrs []string
	var lastProbe, doneAt time.Time
	var newCAPublished, newCAServed time.Time // first seen in the caBundle, first served
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && (doneAt.IsZero() || time.Since(doneAt) < 3*time.Second) {
		pod := daskWorker("default", "self-signed-rotation")
		err := k8s.Create(ctx, pod, client.DryRunAll)
		creates++
		switch {
		case err != nil:
			failures++
			failed = append(failed, fmt.Sprintf("%s: %v", time.Now().Format(time.StampMilli), err))
		case !patchedByExamples(pod):
			failures++
			failed = append(failed, fmt.Sprintf("%s: not patched: %v", time.Now().Format(time.StampMilli), pod.Annotations))
		}
		if time.Since(lastProbe) >= 200*time.Millisecond {
			lastProbe = time.Now()
			probes++
			bundle := publishedCABundle(t, mwc.Name)
			if newCAPublished.IsZero() && !onlyCA(t, bundle, firstCA) {
				newCAPublished = lastProbe
			}
			leaf, err := servedCertificate(addr, bundle)
			if err != nil {
				probeErrs = append(probeErrs, fmt.Sprintf("%s: %v", lastProbe.Format(time.StampMilli), err))
			} else {
				served[certFingerprint(leaf.Raw)] = true
				if newCAServed.IsZero() && leaf.CheckSignatureFrom(firstCA) != nil {
					newCAServed = time.Now()
				}
				if doneAt.IsZero() && history.rotated() && history.issuedByCurrentCA(leaf) {
					doneAt = time.Now()
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	h := history.snapshot()
	t.Logf("rotation: %d dry-run creates, %d failed; %d fresh handshakes, %d failed, %d serving certificates served, "+
		"the new CA served %s after its caBundle was published; "+
		"Secret: %d serving certificates, %d CAs, at most %d CAs in ca-bundle.crt, %d writes for %d distinct contents",
		creates, failures, probes, len(probeErrs), len(served), newCAServed.Sub(newCAPublished).Round(100*time.Millisecond),
		len(h.certs), len(h.cas), h.maxBundle, h.writes, len(h.states))
	require.NoError(t, h.err, "watching the Secret")
	require.Zero(t, failures, "every create is admitted and patched during the rotation; first failures: %q", firstFew(failed))
	require.Empty(t, firstFew(probeErrs), "podpatch always serves a certificate the published caBundle verifies (%d failed)", len(probeErrs))
	require.False(t, doneAt.IsZero(), "within 90 s podpatch must renew its serving certificate, rotate its CA and serve a certificate of the new CA")
	require.GreaterOrEqual(t, len(h.certs), 2, "serving certificates seen in the Secret")
	require.GreaterOrEqual(t, len(h.cas), 2, "CAs seen in the Secret")
	require.GreaterOrEqual(t, h.maxBundle, 2, "ca-bundle.crt holds the old and the new CA during the rotation")
	require.GreaterOrEqual(t, len(served), 2, "podpatch reloads renewed serving certificates")
	// The overlap is what lets every API server pick up the new caBundle before it meets a
	// certificate of the new CA; podpatch records the publication time to the second, and the
	// probes run every 200 ms.
	require.False(t, newCAPublished.IsZero(), "the new CA was published")
	require.False(t, newCAServed.IsZero(), "a certificate of the new CA was served")
	require.GreaterOrEqual(t, newCAServed.Sub(newCAPublished), rotationOverlap-1500*time.Millisecond,
		"a certificate of the new CA is served no earlier than the overlap after the caBundle holding it is published")
	// Each change of content takes at most two writes (the data, then the publication
	// annotation): replicas that fought would write far more.
	require.LessOrEqual(t, h.writes, 2*len(h.states), "Secret writes for %d distinct contents", len(h.states))

	requireServingCertValid(t, history.snapshot().last)
	requireCABundlePublished(t, mwc.Name, vwc.Name, secretKey)
	requireConverged(t, secretKey, p, p2)
	requireQuietSecret(t, secretKey, 3*time.Second)
	requireFieldOwners(t, mwc.Name, vwc.Name)
	applyAsGitOps(t, mwc, vwc) // and the tool's next sync, after the rotation, does not conflict either
}

// firstFew keeps a failure list short enough to read.
func firstFew(list []string) []string { return list[:min(len(list), 5)] }

// patchedByExamples reports whether podpatch applied the example policies to a Dask worker.
func patchedByExamples(pod *corev1.Pod) bool {
	return pod.Annotations[policies.AppliedAnnotation] != "" && pod.Labels["cost-center"] == "data-platform"
}

// requireServingCertValid checks that the Secret's serving certificate is valid for localhost
// and chains to its CA bundle, which holds its current CA.
func requireServingCertValid(t *testing.T, s *corev1.Secret) {
	t.Helper()
	require.NotNil(t, s)
	ca, err := pki.DecodeX509CertificateBytes(s.Data["ca.crt"])
	require.NoError(t, err)
	bundle, err := pki.DecodeX509CertificateSetBytes(s.Data["ca-bundle.crt"])
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(bundle, func(c *x509.Certificate) bool { return c.Equal(ca) }), "ca-bundle.crt holds ca.crt")
	_, err = tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	require.NoError(t, err, "tls.crt and tls.key belong together")
	leaf, err := pki.DecodeX509CertificateBytes(s.Data["tls.crt"])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	for _, c := range bundle {
		roots.AddCert(c)
	}
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err, "tls.crt is valid for localhost and chains to ca-bundle.crt")
}

// requireCABundlePublished waits until every webhook entry of both configurations carries the
// Secret's ca-bundle.crt.
func requireCABundlePublished(t *testing.T, mutating, validating string, secretKey client.ObjectKey) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := &corev1.Secret{}
		require.NoError(c, k8s.Get(contextBackground(), secretKey, s))
		want := s.Data["ca-bundle.crt"]
		require.NotEmpty(c, want)
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		require.NoError(c, k8s.Get(contextBackground(), client.ObjectKey{Name: mutating}, m))
		for _, w := range m.Webhooks {
			assert.Equal(c, string(want), string(w.ClientConfig.CABundle), "caBundle of mutating webhook %s", w.Name)
		}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		require.NoError(c, k8s.Get(contextBackground(), client.ObjectKey{Name: validating}, v))
		for _, w := range v.Webhooks {
			assert.Equal(c, string(want), string(w.ClientConfig.CABundle), "caBundle of validating webhook %s", w.Name)
		}
	}, 20*time.Second, 100*time.Millisecond, "every webhook entry's caBundle is the Secret's ca-bundle.crt")
}

// onlyCA reports whether the PEM bundle holds ca and no other certificate.
func onlyCA(t *testing.T, bundle []byte, ca *x509.Certificate) bool {
	t.Helper()
	certs, err := pki.DecodeX509CertificateSetBytes(bundle)
	require.NoError(t, err)
	return len(certs) == 1 && certs[0].Equal(ca)
}

// publishedCABundle is the caBundle the API server uses to call the mutating webhook.
func publishedCABundle(t *testing.T, name string) []byte {
	t.Helper()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Name: name}, m))
	require.NotEmpty(t, m.Webhooks)
	return m.Webhooks[0].ClientConfig.CABundle
}

// servedCertificate opens a new TLS connection to podpatch as the API server would for
// https://localhost:PORT, trusting roots, and returns the certificate podpatch served.
func servedCertificate(addr string, roots []byte) (*x509.Certificate, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(roots) {
		return nil, errors.New("the published caBundle holds no certificate")
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// requireConverged waits until every replica's certificate directory holds the Secret's CA,
// serving certificate and key.
func requireConverged(t *testing.T, secretKey client.ObjectKey, replicas ...*podpatchProcess) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := &corev1.Secret{}
		require.NoError(c, k8s.Get(contextBackground(), secretKey, s))
		for i, p := range replicas {
			for _, name := range []string{"ca.crt", "tls.crt", "tls.key"} {
				b, err := os.ReadFile(filepath.Join(p.certDir, name))
				require.NoError(c, err)
				assert.Equal(c, string(s.Data[name]), string(b), "replica %d: %s in --cert-dir and in the Secret", i+1, name)
			}
		}
	}, 20*time.Second, 100*time.Millisecond, "replicas write the Secret's certificate to their --cert-dir")
}

// requireQuietSecret checks that the Secret is not written for window when nothing is due:
// replicas that disagreed would keep rewriting it. It waits, if needed, until the next
// renewal, computed from the Secret's certificates as podpatch computes it, is more than
// window away.
func requireQuietSecret(t *testing.T, secretKey client.ObjectKey, window time.Duration) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := &corev1.Secret{}
		require.NoError(t, k8s.Get(contextBackground(), secretKey, s))
		due := nextCertAction(t, s)
		if time.Until(due) > window+time.Second {
			time.Sleep(window)
			after := &corev1.Secret{}
			require.NoError(t, k8s.Get(contextBackground(), secretKey, after))
			require.Equal(t, s.ResourceVersion, after.ResourceVersion,
				"the Secret was written while nothing was due (next renewal at %s)", due.Format(time.StampMilli))
			return
		}
		require.True(t, time.Now().Before(deadline), "no quiet time between renewals within 60 s (next at %s)", due)
		time.Sleep(time.Until(due) + 2*time.Second)
	}
}

// nextCertAction is when podpatch next has something to do with the Secret: renew the CA or the
// serving certificate, or (now) move the serving certificate to the current CA.
func nextCertAction(t *testing.T, s *corev1.Secret) time.Time {
	t.Helper()
	ca, err := pki.DecodeX509CertificateBytes(s.Data["ca.crt"])
	require.NoError(t, err)
	leaf, err := pki.DecodeX509CertificateBytes(s.Data["tls.crt"])
	require.NoError(t, err)
	if leaf.CheckSignatureFrom(ca) != nil {
		return time.Now() // the switch to the current CA is pending
	}
	due := certRenewalTime(t, ca)
	if rt := certRenewalTime(t, leaf); rt.Before(due) {
		due = rt
	}
	bundle, err := pki.DecodeX509CertificateSetBytes(s.Data["ca-bundle.crt"])
	require.NoError(t, err)
	for _, c := range bundle {
		if !bytes.Equal(c.Raw, ca.Raw) && c.NotAfter.Before(due) {
			due = c.NotAfter // an expired CA leaves the bundle
		}
	}
	return due
}

// certRenewalTime is when podpatch renews c: a third before expiry, counted from issuance
// (certs backdates NotBefore by 5 minutes for clock skew).
func certRenewalTime(t *testing.T, c *x509.Certificate) time.Time {
	t.Helper()
	rt, err := pki.RenewalTime(c.NotBefore.Add(5*time.Minute), c.NotAfter, nil, nil, nil)
	require.NoError(t, err)
	return rt.Time
}

func certFingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// tlsSecretHistory is what a watch saw of the self-signed Secret.
type tlsSecretHistory struct {
	mu        sync.Mutex
	writes    int             // ADDED and MODIFIED events
	certs     []string        // distinct tls.crt, in the order seen
	cas       []string        // distinct ca.crt, in the order seen
	states    map[string]bool // distinct contents: ca.crt, tls.crt and ca-bundle.crt
	maxBundle int             // most CAs ca-bundle.crt held at once
	last      *corev1.Secret
	err       error
}

// watchTLSSecret records every version of the Secret until the test ends.
func watchTLSSecret(t *testing.T, key client.ObjectKey) *tlsSecretHistory {
	t.Helper()
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: scheme})
	require.NoError(t, err)
	w, err := wc.Watch(contextBackground(), &corev1.SecretList{},
		client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name})
	require.NoError(t, err)
	h := &tlsSecretHistory{states: map[string]bool{}}
	var wg sync.WaitGroup
	wg.Add(1)
	stopped := make(chan struct{})
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopped:
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					h.fail(errors.New("watch closed"))
					return
				}
				h.record(ev)
			}
		}
	}()
	t.Cleanup(func() {
		close(stopped)
		w.Stop()
		wg.Wait()
	})
	return h
}

func (h *tlsSecretHistory) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

func (h *tlsSecretHistory) record(ev watch.Event) {
	switch ev.Type {
	case watch.Added, watch.Modified:
	case watch.Error:
		h.fail(apierrors.FromObject(ev.Object))
		return
	default:
		return
	}
	s, ok := ev.Object.(*corev1.Secret)
	if !ok {
		h.fail(fmt.Errorf("watch sent a %T", ev.Object))
		return
	}
	n := 0
	if bundle, err := pki.DecodeX509CertificateSetBytes(s.Data["ca-bundle.crt"]); err == nil {
		n = len(bundle)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes++
	h.last = s
	h.maxBundle = max(h.maxBundle, n)
	if cert := string(s.Data["tls.crt"]); !slices.Contains(h.certs, cert) {
		h.certs = append(h.certs, cert)
	}
	if ca := string(s.Data["ca.crt"]); !slices.Contains(h.cas, ca) {
		h.cas = append(h.cas, ca)
	}
	h.states[string(s.Data["ca.crt"])+string(s.Data["tls.crt"])+string(s.Data["ca-bundle.crt"])] = true
}

// rotated reports whether the Secret has had two serving certificates and two CAs, with both
// CAs in the bundle at once.
func (h *tlsSecretHistory) rotated() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.certs) >= 2 && len(h.cas) >= 2 && h.maxBundle >= 2
}

// issuedByCurrentCA reports whether c was signed by the Secret's current CA.
func (h *tlsSecretHistory) issuedByCurrentCA(c *x509.Certificate) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		return false
	}
	ca, err := pki.DecodeX509CertificateBytes(h.last.Data["ca.crt"])
	return err == nil && c.CheckSignatureFrom(ca) == nil
}

// tlsSecretSnapshot is a copy of a tlsSecretHistory.
type tlsSecretSnapshot struct {
	writes, maxBundle int
	certs, cas        []string
	states            map[string]bool
	last              *corev1.Secret
	err               error
}

func (h *tlsSecretHistory) snapshot() tlsSecretSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	states := make(map[string]bool, len(h.states))
	for k, v := range h.states {
		states[k] = v
	}
	var last *corev1.Secret
	if h.last != nil {
		last = h.last.DeepCopy()
	}
	return tlsSecretSnapshot{writes: h.writes, maxBundle: h.maxBundle, certs: append([]string(nil), h.certs...),
		cas: append([]string(nil), h.cas...), states: states, last: last, err: h.err}
}
