package certs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	admissionregistrationv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

const gitops = "gitops" // the field manager of a GitOps tool that installs the configuration

// gitopsConfiguration is the mutating webhook configuration as a GitOps tool
// applies it: every field but caBundle, for the named webhooks.
func gitopsConfiguration(timeout int32, webhooks ...string) *admissionregistrationv1ac.MutatingWebhookConfigurationApplyConfiguration {
	ac := admissionregistrationv1ac.MutatingWebhookConfiguration(testMutating).WithLabels(map[string]string{"team": "platform"})
	for _, name := range webhooks {
		ac.WithWebhooks(admissionregistrationv1ac.MutatingWebhook().
			WithName(name).
			WithClientConfig(admissionregistrationv1ac.WebhookClientConfig().
				WithService(admissionregistrationv1ac.ServiceReference().WithNamespace(testNamespace).WithName(testService).WithPath("/mutate"))).
			WithSideEffects(admissionregistrationv1.SideEffectClassNone).
			WithAdmissionReviewVersions("v1").
			WithTimeoutSeconds(timeout))
	}
	return ac
}

// recordApplies passes c's applies through, recording each as the JSON the
// API server would receive, with its options.
type recordApplies struct {
	bodies      []string
	opts        []client.ApplyOptions
	beforeApply func() // runs once, before the next apply
}

func (r *recordApplies) client(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if f := r.beforeApply; f != nil {
				r.beforeApply = nil
				f()
			}
			b, err := json.Marshal(obj)
			if err != nil {
				return err
			}
			r.bodies = append(r.bodies, string(b))
			o := client.ApplyOptions{}
			o.ApplyOptions(opts)
			r.opts = append(r.opts, o)
			return c.Apply(ctx, obj, opts...)
		},
	})
}

// TestCAInjectorAppliesOnlyCABundle checks what the injector sends: what an
// apply names is what its field manager owns on the API server. (The fake
// client's managed fields are not the API server's: it round-trips applies
// through Go structs, which adds the required fields sideEffects and
// admissionReviewVersions. test/e2e checks the API server's managedFields.)
func TestCAInjectorAppliesOnlyCABundle(t *testing.T) {
	ctx := context.Background()
	base := fake.NewClientBuilder().Build()
	rec := &recordApplies{}
	inj := caInjector{client: rec.client(base), mutating: testMutating}
	require.NoError(t, base.Apply(ctx, gitopsConfiguration(5, "dask.podpatch.io", "spark.podpatch.io"), client.FieldOwner(gitops)))
	get := func() *admissionregistrationv1.MutatingWebhookConfiguration {
		t.Helper()
		obj := &admissionregistrationv1.MutatingWebhookConfiguration{}
		require.NoError(t, base.Get(ctx, client.ObjectKey{Name: testMutating}, obj))
		return obj
	}
	wantApply := func(rv string, bundle string, webhooks ...string) string {
		var entries []string
		for _, w := range webhooks {
			entries = append(entries, `{"name":"`+w+`","clientConfig":{"caBundle":"`+base64.StdEncoding.EncodeToString([]byte(bundle))+`"}}`)
		}
		return `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration",
			"metadata":{"name":"` + testMutating + `","resourceVersion":"` + rv + `"},
			"webhooks":[` + strings.Join(entries, ",") + `]}`
	}

	rv := get().ResourceVersion
	changed, err := inj.inject(ctx, []byte("bundle-1"))
	require.NoError(t, err)
	assert.True(t, changed)
	require.Len(t, rec.bodies, 1)
	assert.JSONEq(t, wantApply(rv, "bundle-1", "dask.podpatch.io", "spark.podpatch.io"), rec.bodies[0],
		"each webhook's caBundle, identified by the webhook's name, at the resourceVersion read, and nothing else")
	assert.Equal(t, CAInjectorFieldManager, rec.opts[0].FieldManager)
	assert.True(t, ptr.Deref(rec.opts[0].Force, false), "forced: podpatch takes caBundle over from whoever set it last")
	obj := get()
	assert.Equal(t, "platform", obj.Labels["team"])
	for _, w := range obj.Webhooks {
		assert.Equal(t, "bundle-1", string(w.ClientConfig.CABundle), w.Name)
		assert.Equal(t, int32(5), ptr.Deref(w.TimeoutSeconds, 0), "the GitOps tool's field stays: %s", w.Name)
		assert.Equal(t, "/mutate", ptr.Deref(w.ClientConfig.Service.Path, ""), w.Name)
	}

	changed, err = inj.inject(ctx, []byte("bundle-1"))
	require.NoError(t, err)
	assert.False(t, changed)
	assert.Len(t, rec.bodies, 1, "nothing written when every caBundle is current")

	// Someone replaces the configuration with one webhook fewer between the
	// injector's read and its apply (an Update, as kubectl replace or a
	// client-side apply does; an applier cannot drop an entry another manager
	// co-owns): the apply conflicts, the injector reads again, and the removed
	// entry does not come back as a stub of name and caBundle.
	rv = get().ResourceVersion
	var replaced string // the resourceVersion after the replacement
	rec.beforeApply = func() {
		obj := get()
		obj.Webhooks = obj.Webhooks[:1]
		require.NoError(t, base.Update(ctx, obj))
		replaced = obj.ResourceVersion
	}
	changed, err = inj.inject(ctx, []byte("bundle-2"))
	require.NoError(t, err)
	assert.True(t, changed)
	require.Len(t, rec.bodies, 3, "the first apply conflicted")
	assert.JSONEq(t, wantApply(rv, "bundle-2", "dask.podpatch.io", "spark.podpatch.io"), rec.bodies[1])
	assert.JSONEq(t, wantApply(replaced, "bundle-2", "dask.podpatch.io"), rec.bodies[2])
	obj = get()
	require.Len(t, obj.Webhooks, 1)
	assert.Equal(t, "dask.podpatch.io", obj.Webhooks[0].Name)
	assert.Equal(t, "bundle-2", string(obj.Webhooks[0].ClientConfig.CABundle))
}

func TestCAInjectorConfigurations(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	changed, err := caInjector{client: c, mutating: testMutating, validating: testValidating}.inject(ctx, []byte("bundle"))
	require.NoError(t, err)
	assert.True(t, changed)
	bundles, err := caBundles(c)
	require.NoError(t, err)
	require.Len(t, bundles, 4)
	for _, b := range bundles {
		assert.Equal(t, "bundle", string(b))
	}

	changed, err = caInjector{client: c, validating: testValidating}.inject(ctx, []byte("other"))
	require.NoError(t, err)
	assert.True(t, changed)
	bundles, err = caBundles(c)
	require.NoError(t, err)
	assert.Equal(t, []string{"bundle", "bundle", "other", "other"}, strings.Fields(string(bytes.Join(bundles, []byte(" ")))), "an empty name skips a configuration")

	_, err = caInjector{client: c, mutating: "missing"}.inject(ctx, []byte("bundle"))
	assert.ErrorContains(t, err, "setting caBundle of MutatingWebhookConfiguration missing")
	assert.True(t, apierrors.IsNotFound(err))
}
