package e2e

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/cert-manager/cert-manager/pkg/util/pki"
	"github.com/go-logr/logr/funcr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	testcainjector "github.com/podpatch/podpatch/test/cainjector"
	"github.com/podpatch/podpatch/test/cluster"
)

// TestCertManager installs podpatch the cert-manager way (manifests/overlays/cert-manager)
// behind the real API server: the overlay's Issuer and Certificate are validated by
// cert-manager's CRDs, the serving Secret is issued as the selfSigned issuer issues it, and
// cert-manager's own CA injector fills the webhook configurations' empty caBundle from the
// `cert-manager.io/inject-ca-from` annotation. Before the injection the API server cannot
// verify podpatch and fails open; after it, both webhooks work over TLS.
func TestCertManager(t *testing.T) {
	ctx := contextBackground()
	objs := kustomizeBuild(t, "manifests/overlays/cert-manager")

	issuer := builtObjectOfKind(t, objs, "Issuer")
	certificate := builtObjectOfKind(t, objs, "Certificate")
	// The API server reaches this podpatch at https://localhost:PORT (the rewritten client
	// config), not through the Service the manifests name, so the certificate must also be
	// valid for localhost. This is the only change made to the overlay's cert-manager objects.
	dnsNames, _, err := unstructured.NestedStringSlice(certificate.Object, "spec", "dnsNames")
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedStringSlice(certificate.Object, append(dnsNames, "localhost"), "spec", "dnsNames"))
	applyManifests(t, []*unstructured.Unstructured{issuer, certificate})

	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(certificate.GroupVersionKind())
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(certificate), stored))
	crt := &cmapi.Certificate{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(stored.Object, crt))
	require.Equal(t, "podpatch-tls", crt.Spec.SecretName)

	secret := issueCertManagerSecret(t, crt)
	require.NoError(t, k8s.Create(ctx, secret))
	t.Cleanup(func() {
		if err := k8s.Delete(contextBackground(), secret); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete secret %s: %v", secret.Name, err)
		}
	})

	// Mount the stored Secret as the kubelet would, and serve it.
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret))
	ca := secret.Data[cmmeta.TLSCAKey]
	certDir := t.TempDir()
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		require.NoError(t, os.WriteFile(filepath.Join(certDir, k), secret.Data[k], 0o600))
	}
	p := startPodpatch(t, certDir)
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	p.waitForExamples(t)

	mwc, vwc := webhookConfigurations(t, objs, p.url(), nil)
	for _, o := range []client.Object{mwc, vwc} {
		require.Equal(t, "podpatch-system/podpatch", o.GetAnnotations()[cmapi.WantInjectAnnotation], o.GetName())
	}
	require.Empty(t, webhookCABundles(mwc, vwc), "only the injector may provide the CA")
	t.Cleanup(func() { // runs after installWebhooks' cleanup: other tests reuse these names
		for _, o := range []client.Object{mwc.DeepCopy(), vwc.DeepCopy()} {
			if err := k8s.Get(contextBackground(), client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
				t.Errorf("%T %s left behind: %v", o, o.GetName(), err)
			}
		}
	})
	installWebhooks(t, mwc, vwc)

	invalidPolicy := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "broken",
				Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data: map[string]string{"p.yaml": policyYAML("broken", "tolerations: [{key: spot, operator: Exits}]")},
		}
	}

	t.Run("without the CA bundle the API server cannot verify podpatch and fails open", func(t *testing.T) {
		requests := p.requests(t)
		mutating := apiserverFailOpenCount(t, "dask.podpatch.io", "admit")
		patched := false
		require.Eventually(t, func() bool {
			pod := dryRunCreate(t, daskWorker("default", "before-injection"))
			patched = pod.Annotations[policies.AppliedAnnotation] != ""
			return patched || apiserverFailOpenCount(t, "dask.podpatch.io", "admit") > mutating
		}, 30*time.Second, 200*time.Millisecond, "the API server never called the mutating webhook")
		require.False(t, patched, "a Pod was patched though the API server cannot trust podpatch")

		validating := apiserverFailOpenCount(t, "policies.podpatch.io", "validating")
		var createErr error
		require.Eventually(t, func() bool {
			createErr = k8s.Create(contextBackground(), invalidPolicy(), client.DryRunAll)
			return createErr != nil || apiserverFailOpenCount(t, "policies.podpatch.io", "validating") > validating
		}, 30*time.Second, 200*time.Millisecond, "the API server never called the validating webhook")
		require.NoError(t, createErr, "an invalid policy is admitted while podpatch cannot be verified")

		require.Equal(t, requests, p.requests(t), "no admission request got through the TLS handshake")
	})

	startCAInjector(t)

	t.Run("cert-manager's CA injector writes ca.crt into every webhook", func(t *testing.T) {
		curM := &admissionregistrationv1.MutatingWebhookConfiguration{}
		curV := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		require.Eventually(t, func() bool {
			require.NoError(t, k8s.Get(contextBackground(), client.ObjectKeyFromObject(mwc), curM))
			require.NoError(t, k8s.Get(contextBackground(), client.ObjectKeyFromObject(vwc), curV))
			bundles := webhookCABundles(curM, curV)
			return len(bundles) == len(mwc.Webhooks)+len(vwc.Webhooks)
		}, 30*time.Second, 100*time.Millisecond, "the injector never filled every caBundle")
		for _, b := range webhookCABundles(curM, curV) {
			require.Equal(t, string(ca), b, "caBundle is the Secret's ca.crt")
		}
		for _, o := range []client.Object{curM, curV} {
			managers := map[string]metav1.ManagedFieldsOperationType{}
			for _, f := range o.GetManagedFields() {
				managers[f.Manager] = f.Operation
			}
			require.Equal(t, metav1.ManagedFieldsOperationApply, managers["cert-manager-cainjector"],
				"%T: the caBundle is applied by cert-manager's injector: %v", o, managers)
		}
	})

	t.Run("the API server calls podpatch over TLS verified by the injected bundle", func(t *testing.T) {
		requests := p.requests(t)
		var pod *corev1.Pod
		require.Eventually(t, func() bool {
			pod = dryRunCreate(t, daskWorker("default", "after-injection"))
			return pod.Annotations[policies.AppliedAnnotation] != ""
		}, 30*time.Second, 200*time.Millisecond, "the API server never reached podpatch with the injected CA")
		require.Contains(t, pod.Annotations[policies.AppliedAnnotation], "podpatch-system/cost-center/cost-center")
		require.Equal(t, "data-platform", pod.Labels["cost-center"])
		require.Greater(t, p.requests(t), requests, "podpatch served the admission request")

		var createErr error
		require.Eventually(t, func() bool {
			createErr = k8s.Create(contextBackground(), invalidPolicy(), client.DryRunAll)
			return createErr != nil
		}, 30*time.Second, 200*time.Millisecond, "the invalid policy was never denied")
		require.ErrorContains(t, createErr, "denied the request")
		require.ErrorContains(t, createErr, "spec.template.spec.tolerations[0].operator: Unsupported value")
	})
}

// builtObjectOfKind returns a copy of the one object of a kind in built manifests.
func builtObjectOfKind(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			require.Nil(t, found, "more than one %s", kind)
			found = o.DeepCopy()
		}
	}
	require.NotNil(t, found, "no %s", kind)
	return found
}

// issueCertManagerSecret issues crt as cert-manager's selfSigned issuer does (a private key per
// spec.privateKey, an X.509 template from the Certificate, signed with its own key) and
// returns the Secret cert-manager's issuing controller would store: tls.crt, tls.key,
// ca.crt (a self-signed certificate is its own CA), and the annotations that tie the Secret
// to its Certificate, which the CA injector checks before trusting ca.crt.
func issueCertManagerSecret(t *testing.T, crt *cmapi.Certificate) *corev1.Secret {
	t.Helper()
	key, err := pki.GeneratePrivateKeyForCertificate(crt)
	require.NoError(t, err)
	template, err := pki.CertificateTemplateFromCertificate(crt)
	require.NoError(t, err)
	certPEM, cert, err := pki.SignCertificate(template, template, key.Public(), key)
	require.NoError(t, err)
	require.NoError(t, cert.VerifyHostname("localhost"))
	require.ElementsMatch(t, crt.Spec.DNSNames, cert.DNSNames)
	require.Equal(t, x509.ECDSA, cert.PublicKeyAlgorithm, "spec.privateKey.algorithm")
	var encoding cmapi.PrivateKeyEncoding
	if crt.Spec.PrivateKey != nil {
		encoding = crt.Spec.PrivateKey.Encoding
	}
	keyPEM, err := pki.EncodePrivateKey(key, encoding)
	require.NoError(t, err)
	return cluster.CertManagerSecret(crt, certPEM, keyPEM, certPEM)
}

// webhookCABundles lists the non-empty caBundles of every webhook in the configurations.
func webhookCABundles(mwc *admissionregistrationv1.MutatingWebhookConfiguration, vwc *admissionregistrationv1.ValidatingWebhookConfiguration) []string {
	var out []string
	for _, w := range mwc.Webhooks {
		if len(w.ClientConfig.CABundle) > 0 {
			out = append(out, string(w.ClientConfig.CABundle))
		}
	}
	for _, w := range vwc.Webhooks {
		if len(w.ClientConfig.CABundle) > 0 {
			out = append(out, string(w.ClientConfig.CABundle))
		}
	}
	return out
}

// apiserverFailOpenCount reads apiserver_admission_webhook_fail_open_count for one webhook from the
// API server: how often it called the webhook, failed, and admitted anyway (failurePolicy
// Ignore).
func apiserverFailOpenCount(t *testing.T, webhook, typ string) float64 {
	t.Helper()
	var sum float64
	for _, m := range apiserverMetrics(t)["apiserver_admission_webhook_fail_open_count"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["name"] == webhook && labels["type"] == typ {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// apiserverMetrics are the API server's metrics, by family.
func apiserverMetrics(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig)
	require.NoError(t, err)
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(contextBackground())
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	require.NoError(t, err)
	return families
}

// injectorLog receives the logs of the in-process CA injector; they are shown when the test
// fails. controller-runtime's root logger (which cainjector's reconcilers use) can be set
// only once per process, so it writes here and each test brings its own buffer.
var injectorLog struct {
	once sync.Once
	mu   sync.Mutex
	buf  *bytes.Buffer
}

func captureInjectorLog(t *testing.T) {
	t.Helper()
	injectorLog.once.Do(func() {
		ctrl.SetLogger(funcr.New(func(prefix, args string) {
			injectorLog.mu.Lock()
			defer injectorLog.mu.Unlock()
			if injectorLog.buf != nil {
				injectorLog.buf.WriteString(prefix + " " + args + "\n")
			}
		}, funcr.Options{Verbosity: 4}))
	})
	buf := &bytes.Buffer{}
	injectorLog.mu.Lock()
	injectorLog.buf = buf
	injectorLog.mu.Unlock()
	t.Cleanup(func() {
		injectorLog.mu.Lock()
		defer injectorLog.mu.Unlock()
		injectorLog.buf = nil
		if t.Failed() {
			t.Logf("cainjector output:\n%s", buf)
		}
	})
}

// startCAInjector runs cert-manager's CA injector (test/cainjector) against the test
// control plane until the test ends, its log kept for a failure.
func startCAInjector(t *testing.T) {
	t.Helper()
	captureInjectorLog(t)
	stop, err := testcainjector.Start(restConfig)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("cainjector: %v", err)
		}
	})
}
