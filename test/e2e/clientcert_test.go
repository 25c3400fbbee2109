package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/lifecycle"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// TestClientCert runs podpatch with --client-ca-file behind the real API server, which
// presents the client certificate its AdmissionConfiguration gives it (test/cluster.Start):
// the API server's requests are answered, anyone else's TLS handshake is refused.
func TestClientCert(t *testing.T) {
	ctx := contextBackground()
	certDir, ca := servingCerts(t)
	p := startPodpatch(t, certDir, "--client-ca-file", controlPlane.WebhookClientCAFile)
	mwc, vwc := webhookConfigurations(t, kustomizeBuild(t, "manifests/base"), p.url(), ca)
	installWebhooks(t, mwc, vwc)
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	p.waitForExamples(t)

	t.Run("the API server is answered", func(t *testing.T) {
		require.Eventually(t, func() bool { return patchedByExamples(dryRunCreate(t, daskWorker("team-a", "probe"))) },
			30*time.Second, 200*time.Millisecond, "the API server never got a patch from podpatch")
		stored := createPod(t, daskWorker("team-a", "client-cert"))
		require.True(t, patchedByExamples(stored), "stored pod: %v %v", stored.Labels, stored.Annotations)

		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "broken", Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data:       map[string]string{"p.yaml": policyYAML("broken", "tolerations: [{key: spot, operator: Exits}]")},
		}
		err := k8s.Create(ctx, cm)
		require.ErrorContains(t, err, "denied the request", "the validating webhook is called with the certificate too")
	})

	t.Run("podpatch check (helm test) passes: the certificate is verified, the answer checked through the API server", func(t *testing.T) {
		var log bytes.Buffer
		cs, err := kubernetes.NewForConfig(restConfig)
		require.NoError(t, err)
		require.NoError(t, lifecycle.Check(ctx, cs, lifecycle.CheckOptions{
			MutatingWebhookConfiguration: mwc.Name, Namespace: "team-a", ExpectPolicy: "podpatch-system/cost-center/cost-center",
			Timeout: 30 * time.Second, Log: &log}), log.String())
		require.Contains(t, log.String(), "it requires a client certificate (--client-ca-file)")
		require.Contains(t, log.String(), "ok: a dry-run Pod in namespace team-a was admitted")
	})

	t.Run("nobody else is", func(t *testing.T) {
		before := p.requests(t)
		other, err := cluster.NewClientCA("someone-else")
		require.NoError(t, err)
		_, err = postReview(t, p, ca, nil)
		require.ErrorContains(t, err, "certificate required", "no client certificate")
		_, err = postReview(t, p, ca, clientCertificate(t, other, "kube-apiserver"))
		require.ErrorContains(t, err, "unknown certificate authority", "a certificate from another CA, even with the API server's name")
		require.Equal(t, before, p.requests(t), "refused callers never reach the handler")

		// The refusals are about the certificate: the same request with one from the API
		// server's client CA is answered, with the tenant's patch.
		review, err := postReview(t, p, ca, clientCertificate(t, controlPlane.WebhookClientCA, "someone-with-the-ca"))
		require.NoError(t, err)
		require.True(t, review.Response.Allowed)
		require.NotEmpty(t, review.Response.Patch)
		require.Equal(t, before+1, p.requests(t))
	})
}

// clientCertificate issues a TLS client certificate from ca.
func clientCertificate(t *testing.T, ca *cluster.ClientCA, name string) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(name)
	require.NoError(t, err)
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return &c
}

// postReview sends an AdmissionReview for a Dask worker straight to podpatch's /mutate over a
// new connection, presenting cert (nil: none) whatever CAs the server names.
func postReview(t *testing.T, p *podpatchProcess, servingCA []byte, cert *tls.Certificate) (*admissionv1.AdmissionReview, error) {
	t.Helper()
	pod := daskWorker("team-a", "direct")
	pod.APIVersion, pod.Kind = "v1", "Pod"
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("direct"), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: pod.Namespace,
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	})
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(servingCA))
	present := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cert == nil {
			return &tls.Certificate{}, nil
		}
		return cert, nil
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, GetClientCertificate: present, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Post(p.url()+"/mutate", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(resp.Body).Decode(review); err != nil {
		return nil, err
	}
	if review.Response == nil {
		return nil, fmt.Errorf("no response in %+v", review)
	}
	return review, nil
}

// TestNetworkPolicyComponent builds an overlay that includes the optional network-policy
// component with its CIDR patched, as docs/operations.md shows, and has the API server validate the
// NetworkPolicy (server-side dry run).
func TestNetworkPolicyComponent(t *testing.T) {
	overlay := t.TempDir()
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
components:
  - %s
patches:
  - target: {kind: NetworkPolicy, name: podpatch}
    patch: |
      - {op: replace, path: /spec/ingress/0/from/0/ipBlock/cidr, value: 10.0.0.0/24}
`, relPath(t, overlay, "manifests/overlays/self-signed"), relPath(t, overlay, "manifests/components/network-policy"))
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644))
	objs, err := cluster.Kustomize(overlay)
	require.NoError(t, err)

	u := builtObjectOfKind(t, objs, "NetworkPolicy")
	np := &networkingv1.NetworkPolicy{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, np))
	require.Equal(t, "podpatch-system", np.Namespace)
	deployment := &appsv1.Deployment{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(builtObjectOfKind(t, objs, "Deployment").Object, deployment))
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	require.NoError(t, err)
	require.True(t, sel.Matches(labels.Set(deployment.Spec.Template.Labels)), "the policy selects podpatch's pods")
	require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)

	// Which ports each rule opens, and to whom.
	require.Len(t, np.Spec.Ingress, 2)
	webhook, metrics := np.Spec.Ingress[0], np.Spec.Ingress[1]
	require.Equal(t, "webhook", webhook.Ports[0].Port.String())
	require.Len(t, webhook.From, 1)
	require.NotNil(t, webhook.From[0].IPBlock)
	require.Equal(t, "10.0.0.0/24", webhook.From[0].IPBlock.CIDR, "the CIDR patch of docs/operations.md applies")
	require.Equal(t, "metrics", metrics.Ports[0].Port.String())
	containerPorts := map[string]bool{}
	for _, c := range deployment.Spec.Template.Spec.Containers {
		for _, port := range c.Ports {
			containerPorts[port.Name] = true
		}
	}
	for _, rule := range np.Spec.Ingress {
		for _, port := range rule.Ports {
			require.True(t, containerPorts[port.Port.String()], "port %s is a named port of the Deployment", port.Port)
		}
	}

	require.NoError(t, k8s.Create(contextBackground(), np, client.DryRunAll), "the API server accepts the NetworkPolicy")
	np.Spec.Ingress[0].From[0].IPBlock.CIDR = "not-a-cidr"
	require.Error(t, k8s.Create(contextBackground(), np, client.DryRunAll), "and validates what the dry run sends")
}

// relPath is the path from dir to a directory of the repository: kustomize refuses absolute
// paths to kustomizations.
func relPath(t *testing.T, dir, repoDir string) string {
	t.Helper()
	rel, err := filepath.Rel(dir, filepath.Join(repoRoot, repoDir))
	require.NoError(t, err)
	return rel
}
