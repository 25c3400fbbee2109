package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
)

// flipLabel marks the Services the later webhook of TestUpdateReinvocation changes.
const flipLabel = "e2e-flip"

// startFlipper serves a mutating webhook that sets `type: LoadBalancer` on every Service it
// is sent, as a later webhook of another vendor might, on a free loopback port with the
// serving certificate in certDir; it returns its URL and counts its calls.
func startFlipper(t *testing.T, certDir string) (string, *atomic.Int64) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	calls := new(atomic.Int64)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var ar admissionv1.AdmissionReview
			if err := json.NewDecoder(r.Body).Decode(&ar); err != nil || ar.Request == nil {
				http.Error(w, "not a review", http.StatusBadRequest)
				return
			}
			calls.Add(1)
			pt := admissionv1.PatchTypeJSONPatch
			ar.Response = &admissionv1.AdmissionResponse{UID: ar.Request.UID, Allowed: true, PatchType: &pt,
				Patch: []byte(`[{"op":"replace","path":"/spec/type","value":"LoadBalancer"}]`)}
			ar.Request = nil
			_ = json.NewEncoder(w).Encode(ar)
		})}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return fmt.Sprintf("https://localhost:%d/", ln.Addr().(*net.TCPAddr).Port), calls
}

// TestUpdateReinvocation: a mutating webhook that runs after podpatch on an UPDATE (its
// configuration sorts after podpatch's) and undoes an enforced field makes the API server call
// podpatch again (reinvocationPolicy: IfNeeded), which puts the field back: the stored Service
// holds the enforce policy, and the update cost podpatch two calls (reference §5, "Enforce on
// updates").
func TestUpdateReinvocation(t *testing.T) {
	ctx := contextBackground()
	const ns = "e2e-reinvocation"
	ensureNamespace(t, ns)
	certDir, ca := servingCerts(t)
	p := startPodpatch(t, certDir)
	mwc, vwc := webhookConfigurations(t, kustomizeBuild(t, "manifests/base"), p.url(), ca)
	installWebhooks(t, mwc, vwc)
	createPolicies(t, policies.DefaultPlatformNamespace, "e2e-reinvocation", map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: internal}\nspec:\n  mode: enforce\n" +
		"  match: {managers: [dask], namespaces: [" + ns + "]}\n  service:\n    spec: {type: ClusterIP}\n"})
	svc := daskSchedulerService(ns, "reinvoked")
	svc.Labels[flipLabel] = "true"
	svc.Spec.Type = corev1.ServiceTypeNodePort
	require.Eventually(t, func() bool {
		o := svc.DeepCopy()
		return k8s.Create(ctx, o, client.DryRunAll) == nil && o.Spec.Type == corev1.ServiceTypeClusterIP
	}, 30*time.Second, 200*time.Millisecond, "podpatch never served the policy")
	require.NoError(t, k8s.Create(ctx, svc))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), svc) })

	url, calls := startFlipper(t, certDir)
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	flipper := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "zz-e2e-flipper"}, // after "podpatch"
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "flip.e2e.podpatch.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{flipLabel: "true"}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	installWebhooks(t, flipper)
	// The API server loads webhook configurations asynchronously: wait until the flipper is
	// called (podpatch puts its change back, so it shows only in its count).
	require.Eventually(t, func() bool {
		o := svc.DeepCopy()
		_ = k8s.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":"`+time.Now().Format("150405.000000")+`"}}}`)), client.DryRunAll)
		return calls.Load() > 0
	}, 30*time.Second, 200*time.Millisecond, "the later webhook was never called")

	before, flips := p.requests(t), calls.Load()
	require.NoError(t, k8s.Patch(ctx, svc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`))))
	stored := &corev1.Service{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(svc), stored))
	require.Equal(t, corev1.ServiceTypeClusterIP, stored.Spec.Type, "podpatch, called again, put the enforced type back")
	require.Equal(t, "a", stored.Labels["team"])
	require.Equal(t, int64(1), calls.Load()-flips, "the later webhook ran once")
	require.Equal(t, 2.0, p.requests(t)-before, "podpatch was called once, and again after the later webhook changed the object")
}
