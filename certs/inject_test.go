package certs

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	admissionregistrationv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
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

// recordApplies records every apply through a fake clientset, as the body
// the API server would receive, with its options, and lets it pass.
type recordApplies struct {
	bodies []string
	opts   []metav1.PatchOptions
}

func (r *recordApplies) record(c *fake.Clientset) {
	c.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p, ok := a.(k8stesting.PatchAction)
		if !ok || p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		r.bodies = append(r.bodies, string(p.GetPatch()))
		r.opts = append(r.opts, a.(k8stesting.PatchActionImpl).PatchOptions)
		return false, nil, nil
	})
}

// TestCAInjectorAppliesOnlyCABundle checks what the injector sends: what an
// apply names is what its field manager owns on the API server. (The fake
// clientset's managed fields are not the API server's: it round-trips applies
// through Go structs, which adds the required fields sideEffects and
// admissionReviewVersions. test/e2e checks the API server's managedFields.)
func TestCAInjectorAppliesOnlyCABundle(t *testing.T) {
	ctx := context.Background()
	base := optimistic(fake.NewClientset(), nil)
	mwcs := base.AdmissionregistrationV1().MutatingWebhookConfigurations()
	_, err := mwcs.Apply(ctx, gitopsConfiguration(5, "dask.podpatch.io", "spark.podpatch.io"), metav1.ApplyOptions{FieldManager: gitops})
	require.NoError(t, err)
	rec := &recordApplies{}
	rec.record(base)
	inj := caInjector{client: base, mutating: testMutating}
	get := func() *admissionregistrationv1.MutatingWebhookConfiguration {
		t.Helper()
		obj, err := mwcs.Get(ctx, testMutating, metav1.GetOptions{})
		require.NoError(t, err)
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
	var once atomic.Bool
	// Ahead of the recorder and optimistic (reactors run last-prepended
	// first), under the fake's lock: so straight to its tracker.
	base.PrependReactor("patch", "mutatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !once.CompareAndSwap(false, true) {
			return false, nil, nil
		}
		gvr := admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations")
		o, err := base.Tracker().Get(gvr, "", testMutating)
		if err != nil {
			return true, nil, err
		}
		obj := o.(*admissionregistrationv1.MutatingWebhookConfiguration).DeepCopy()
		obj.Webhooks = obj.Webhooks[:1]
		obj.ResourceVersion = "replaced" // the tracker itself keeps it as given
		if err := base.Tracker().Update(gvr, obj, ""); err != nil {
			return true, nil, err
		}
		o, err = base.Tracker().Get(gvr, "", testMutating)
		if err != nil {
			return true, nil, err
		}
		replaced = o.(*admissionregistrationv1.MutatingWebhookConfiguration).ResourceVersion
		return false, nil, nil
	})
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
