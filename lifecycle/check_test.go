package lifecycle

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/podpatch/podpatch/certs"
)

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		cc   admissionregistrationv1.WebhookClientConfig
		want string
	}{
		{admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://localhost:9443/mutate")}, "https://localhost:9443/mutate"},
		{admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: "podpatch-system", Name: "podpatch", Path: ptr.To("/mutate"), Port: ptr.To[int32](443)}}, "https://podpatch.podpatch-system.svc:443/mutate"},
		{admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: "ns", Name: "svc"}}, "https://svc.ns.svc:443"},
	} {
		got, err := endpoint(tc.cc)
		if err != nil || got != tc.want {
			t.Errorf("endpoint(%+v) = %q, %v; want %q", tc.cc, got, err, tc.want)
		}
	}
	if _, err := endpoint(admissionregistrationv1.WebhookClientConfig{}); err == nil {
		t.Error("a client config without URL or Service is an error")
	}
}

func TestLists(t *testing.T) {
	applied := "podpatch-system/cost-center/cost-center@12,podpatch-system/podpatch-test/helm-test@40"
	if !lists(applied, "podpatch-system/podpatch-test/helm-test") {
		t.Error("an entry with @resourceVersion is listed")
	}
	if lists(applied, "podpatch-system/podpatch-test/helm") || lists("", "a/b/c") {
		t.Error("only whole entries count")
	}
}

// TestReviewClientCertRequired checks that a webhook which requires a client certificate is
// told apart from one whose certificate the bundle does not verify.
func TestReviewClientCertRequired(t *testing.T) {
	pod := probePod("default", nil)
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: x509.NewCertPool()}
	srv.StartTLS()
	defer srv.Close()
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cc := admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/mutate"), CABundle: bundle}
	_, err := review(context.Background(), cc, pod, 5*time.Second)
	require.ErrorIs(t, err, errClientCertRequired)

	// The same server, but a bundle of another CA: the check fails on the server's certificate
	// before the server can ask for a client certificate.
	other, err := certs.Generate(certs.GenerateOptions{Service: "podpatch", Namespace: "podpatch-system"})
	require.NoError(t, err)
	cc.CABundle = other.CACert
	_, err = review(context.Background(), cc, pod, 5*time.Second)
	require.ErrorContains(t, err, "certificate signed by unknown authority")
	require.NotErrorIs(t, err, errClientCertRequired)
}
