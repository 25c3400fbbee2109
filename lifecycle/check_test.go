package lifecycle

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
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
