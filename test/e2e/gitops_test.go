package e2e

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/certs"
)

// gitopsManager is the field manager of a GitOps tool (Argo CD, Flux) that installs the
// webhook configurations by server-side apply.
const gitopsManager = "e2e-gitops"

// The GitOps tool's own change to the configurations, made while podpatch runs.
const (
	gitopsLabel   = "gitops.example.com/revision"
	gitopsTimeout = int32(5)
)

// applyAsGitOps server-side applies the configurations under gitopsManager, without force,
// as a GitOps tool syncs its manifests (which leave caBundle out).
func applyAsGitOps(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "metadata", "resourceVersion")
		require.NoError(t, k8s.Apply(contextBackground(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(gitopsManager)),
			"%s applies %s without conflicts", gitopsManager, o.GetName())
	}
}

// installWebhooksAsGitOps applies the configurations as the GitOps tool and removes them when
// the test ends.
func installWebhooksAsGitOps(t *testing.T, objs ...client.Object) {
	t.Helper()
	applyAsGitOps(t, objs...)
	for _, o := range objs {
		t.Cleanup(func() {
			if err := k8s.Delete(contextBackground(), o); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", o.GetName(), err)
			}
		})
	}
}

// changeAsGitOps is a commit to the GitOps tool's repository: a label on both configurations
// and a longer timeout for the first mutating webhook.
func changeAsGitOps(mwc *admissionregistrationv1.MutatingWebhookConfiguration, vwc *admissionregistrationv1.ValidatingWebhookConfiguration) {
	for _, o := range []client.Object{mwc, vwc} {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[gitopsLabel] = "2"
		o.SetLabels(labels)
	}
	mwc.Webhooks[0].TimeoutSeconds = ptr.To(gitopsTimeout)
}

// requireFieldOwners checks, on what the API server stored, that the GitOps tool's change
// survived and that the configurations have two field managers: the GitOps tool, owning
// everything but caBundle, and podpatch's CA injector, owning only each webhook's caBundle
// (with the entry's key, which server-side apply records for an entry of a keyed list).
func requireFieldOwners(t *testing.T, mwcName, vwcName string) {
	t.Helper()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Name: mwcName}, m))
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Name: vwcName}, v))
	assert.Equal(t, "2", m.Labels[gitopsLabel], "the GitOps tool's label on %s", m.Name)
	assert.Equal(t, "2", v.Labels[gitopsLabel], "the GitOps tool's label on %s", v.Name)
	assert.Equal(t, gitopsTimeout, ptr.Deref(m.Webhooks[0].TimeoutSeconds, 0), "the GitOps tool's timeout of webhook %s", m.Webhooks[0].Name)

	var mNames, vNames []string
	for _, w := range m.Webhooks {
		mNames = append(mNames, w.Name)
	}
	for _, w := range v.Webhooks {
		vNames = append(vNames, w.Name)
	}
	for _, tc := range []struct {
		obj   metav1.Object
		names []string
	}{{m, mNames}, {v, vNames}} {
		owners := fieldOwners(t, tc.obj)
		var managers []string
		for name := range owners {
			managers = append(managers, name)
		}
		assert.ElementsMatch(t, []string{gitopsManager, certs.CAInjectorFieldManager}, managers,
			"field managers of %s: the GitOps tool and podpatch's CA injector, both applying", tc.obj.GetName())
		var want []string
		for _, name := range tc.names {
			k := `f:webhooks/k:{"name":"` + name + `"}/`
			want = append(want, k+".", k+"f:clientConfig/f:caBundle", k+"f:name")
		}
		sort.Strings(want)
		assert.Equal(t, want, owners[certs.CAInjectorFieldManager], "what podpatch owns in %s", tc.obj.GetName())
		assert.Contains(t, owners[gitopsManager], "f:metadata/f:labels/f:"+gitopsLabel)
		for _, f := range owners[gitopsManager] {
			assert.NotContains(t, f, "caBundle", "%s owns no caBundle of %s", gitopsManager, tc.obj.GetName())
		}
	}
	assert.Contains(t, fieldOwners(t, m)[gitopsManager], `f:webhooks/k:{"name":"`+mNames[0]+`"}/f:timeoutSeconds`)
}

// fieldOwners maps each field manager of obj to the leaves of the fields it owns, as
// slash-separated paths of managedFields keys ("." is a list entry itself), sorted. Every
// manager must own its fields by Apply.
func fieldOwners(t *testing.T, obj metav1.Object) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, e := range obj.GetManagedFields() {
		assert.Equal(t, metav1.ManagedFieldsOperationApply, e.Operation, "%s of %s", e.Manager, obj.GetName())
		var fields map[string]any
		require.NoError(t, json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields))
		var walk func(prefix string, m map[string]any)
		walk = func(prefix string, m map[string]any) {
			for k, v := range m {
				if child, _ := v.(map[string]any); len(child) > 0 {
					walk(prefix+k+"/", child)
					continue
				}
				out[e.Manager] = append(out[e.Manager], prefix+k)
			}
		}
		walk("", fields)
		sort.Strings(out[e.Manager])
	}
	return out
}
