package lifecycle

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podpatch/podpatch/policies"
)

// CheckOptions configure Check.
type CheckOptions struct {
	// MutatingWebhookConfiguration is podpatch's; Webhook names the entry whose client config
	// and CA bundle are probed (empty: the first).
	MutatingWebhookConfiguration string
	Webhook                      string
	// Namespace is where the probe Pod is created with dry-run: one the webhook's
	// namespaceSelector does not exclude.
	Namespace string
	// Labels go on the probe Pod, a Dask worker; the chart's test policy selects it by one.
	Labels map[string]string
	// ExpectPolicy, as <namespace>/<configmap>/<policy>, must be listed in the probe Pod's
	// podpatch.io/applied annotation once the API server has admitted it. Empty: the create
	// only has to succeed.
	ExpectPolicy string
	// Timeout bounds each step; steps are retried until then (a CA bundle being injected, a
	// policy reaching podpatch's informer).
	Timeout time.Duration
	// HTTPTimeout bounds one request to the webhook.
	HTTPTimeout time.Duration
	// Log receives one line per step that passed.
	Log io.Writer
}

// Check verifies what the API server relies on, in the order it relies on it: the webhook
// configuration has a CA bundle; podpatch, reached at the configuration's own client config
// (its Service or URL), presents a certificate that bundle verifies and answers an
// AdmissionReview; and a Pod created through the API server with dry-run comes back patched by
// ExpectPolicy. It returns the first step that does not pass within the timeout.
func Check(ctx context.Context, c kubernetes.Interface, o CheckOptions) error {
	if o.HTTPTimeout <= 0 {
		o.HTTPTimeout = 10 * time.Second
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	var cc admissionregistrationv1.WebhookClientConfig
	var entry string
	if err := retry(ctx, o.Timeout, func() error {
		var err error
		cc, entry, err = clientConfig(ctx, c, o.MutatingWebhookConfiguration, o.Webhook)
		return err
	}); err != nil {
		return err
	}
	logf("ok: MutatingWebhookConfiguration %s, webhook %s has a CA bundle", o.MutatingWebhookConfiguration, entry)

	probe := probePod(o.Namespace, o.Labels)
	var url string
	clientCertRequired := false
	if err := retry(ctx, o.Timeout, func() error {
		var err error
		url, err = review(ctx, cc, probe, o.HTTPTimeout)
		if clientCertRequired = errors.Is(err, errClientCertRequired); clientCertRequired {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	if clientCertRequired {
		logf("ok: %s verified with the CA bundle; it requires a client certificate (--client-ca-file), which only the API server holds, so the dry-run Pod checks its answers", url)
	} else {
		logf("ok: %s verified with the CA bundle and answered an AdmissionReview", url)
	}

	var applied string
	if err := retry(ctx, o.Timeout, func() error {
		pod, err := c.CoreV1().Pods(o.Namespace).Create(ctx, probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return fmt.Errorf("dry-run create of a Dask worker Pod in namespace %s: %w", o.Namespace, err)
		}
		applied = pod.Annotations[policies.AppliedAnnotation]
		if o.ExpectPolicy != "" && !lists(applied, o.ExpectPolicy) {
			return fmt.Errorf("dry-run Pod in namespace %s not patched by %s (%s: %q)", o.Namespace, o.ExpectPolicy, policies.AppliedAnnotation, applied)
		}
		return nil
	}); err != nil {
		return err
	}
	logf("ok: a dry-run Pod in namespace %s was admitted (%s: %q)", o.Namespace, policies.AppliedAnnotation, applied)
	return nil
}

// retry runs f until it succeeds or timeout passes, and returns f's last error then.
func retry(ctx context.Context, timeout time.Duration, f func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

// clientConfig returns a webhook entry's client config, which must carry a CA bundle.
func clientConfig(ctx context.Context, c kubernetes.Interface, name, webhook string) (admissionregistrationv1.WebhookClientConfig, string, error) {
	mwc, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return admissionregistrationv1.WebhookClientConfig{}, "", fmt.Errorf("MutatingWebhookConfiguration %s: %w", name, err)
	}
	for _, w := range mwc.Webhooks {
		if webhook != "" && w.Name != webhook {
			continue
		}
		if len(w.ClientConfig.CABundle) == 0 {
			return w.ClientConfig, w.Name, fmt.Errorf("MutatingWebhookConfiguration %s, webhook %s: caBundle is empty (cert-manager's CA injector or podpatch --self-signed has not filled it yet)", name, w.Name)
		}
		return w.ClientConfig, w.Name, nil
	}
	if webhook == "" {
		return admissionregistrationv1.WebhookClientConfig{}, "", fmt.Errorf("MutatingWebhookConfiguration %s has no webhooks", name)
	}
	return admissionregistrationv1.WebhookClientConfig{}, "", fmt.Errorf("MutatingWebhookConfiguration %s has no webhook %s", name, webhook)
}

// errClientCertRequired says that podpatch refused the check's TLS connection for want of a
// client certificate (--client-ca-file) after the check had verified podpatch's certificate.
var errClientCertRequired = errors.New("the webhook requires a client certificate")

// review posts an AdmissionReview for pod to the client config's endpoint over TLS verified
// with its CA bundle, as the API server would, and checks the answer. A server that requires
// a client certificate refuses the connection with a TLS alert only after the client has
// verified the server's certificate: review then returns errClientCertRequired.
func review(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig, pod *corev1.Pod, timeout time.Duration) (string, error) {
	url, err := endpoint(cc)
	if err != nil {
		return "", err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(cc.CABundle) {
		return url, errors.New("the caBundle holds no PEM certificate")
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		return url, err
	}
	uid := types.UID(fmt.Sprintf("podpatch-check-%d", time.Now().UnixNano()))
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       uid,
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: pod.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw}, // sent as it is, as the API server sends it
			DryRun:    ptr.To(true),
		},
	})
	if err != nil {
		return url, err
	}
	hc := &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return url, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		// TLS 1.3's alert for it (podpatch speaks 1.3); a 1.2 server says only "handshake
		// failure", which could mean anything, and stays an error.
		if strings.Contains(err.Error(), "remote error: tls: certificate required") {
			return url, fmt.Errorf("%w: %w", errClientCertRequired, err)
		}
		return url, fmt.Errorf("calling the webhook: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return url, fmt.Errorf("reading the webhook's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return url, fmt.Errorf("the webhook answered %s: %.200s", resp.Status, out)
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &got); err != nil {
		return url, fmt.Errorf("the webhook's answer is not an AdmissionReview: %w", err)
	}
	switch r := got.Response; {
	case r == nil:
		return url, errors.New("the webhook's AdmissionReview has no response")
	case r.UID != uid:
		return url, fmt.Errorf("the webhook answered for uid %q, not %q", r.UID, uid)
	case !r.Allowed:
		return url, fmt.Errorf("the webhook denied a Pod (podpatch never denies Pods): %v", r.Result)
	}
	return url, nil
}

// endpoint is the URL the API server calls for a client config.
func endpoint(cc admissionregistrationv1.WebhookClientConfig) (string, error) {
	if cc.URL != nil {
		return *cc.URL, nil
	}
	s := cc.Service
	if s == nil {
		return "", errors.New("the webhook's clientConfig names neither a URL nor a Service")
	}
	port := int32(443)
	if s.Port != nil {
		port = *s.Port
	}
	path := ""
	if s.Path != nil {
		path = *s.Path
	}
	return fmt.Sprintf("https://%s.%s.svc:%d%s", s.Name, s.Namespace, port, path), nil
}

// probePod is a Dask operator worker Pod, shaped to pass the restricted Pod Security Standard
// so that it is admitted in any namespace. It is only ever created with dry-run.
func probePod(namespace string, extra map[string]string) *corev1.Pod {
	labels := map[string]string{
		"dask.org/component":        "worker",
		"dask.org/cluster-name":     "podpatch-check",
		"dask.org/workergroup-name": "podpatch-check-default",
	}
	for k, v := range extra {
		labels[k] = v
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "podpatch-check-", Namespace: namespace, Labels: labels},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "worker",
				Image: "ghcr.io/dask/dask:latest",
				Args:  []string{"dask", "worker"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// lists reports whether a podpatch.io/applied value lists ref (entries may carry @<resourceVersion>).
func lists(applied, ref string) bool {
	for _, e := range strings.Split(applied, ",") {
		if e, _, _ = strings.Cut(e, "@"); e == ref {
			return true
		}
	}
	return false
}
