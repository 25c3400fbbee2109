package lifecycle

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestRemoveWebhooks deletes what exists, reports what is already gone, leaves everything
// else, and is idempotent.
func TestRemoveWebhooks(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "podpatch"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "podpatch"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "podpatch-certs"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "podpatch-certs"}},
	)
	secrets := []types.NamespacedName{{Namespace: "ns", Name: "podpatch-certs"}}
	done, err := RemoveWebhooks(ctx, c, []string{"podpatch", "gone"}, []string{"podpatch"}, secrets)
	require.NoError(t, err)
	require.Equal(t, []string{
		"MutatingWebhookConfiguration /podpatch: deleted",
		"MutatingWebhookConfiguration /gone: already gone",
		"ValidatingWebhookConfiguration /podpatch: deleted",
		"Secret ns/podpatch-certs: deleted",
	}, done)
	mwcs, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, mwcs.Items, 1)
	require.Equal(t, "other", mwcs.Items[0].Name)
	_, err = c.CoreV1().Secrets("other").Get(ctx, "podpatch-certs", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Secrets("ns").Get(ctx, "podpatch-certs", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "%v", err)

	done, err = RemoveWebhooks(ctx, c, []string{"podpatch"}, []string{"podpatch"}, secrets)
	require.NoError(t, err)
	require.Equal(t, []string{
		"MutatingWebhookConfiguration /podpatch: already gone",
		"ValidatingWebhookConfiguration /podpatch: already gone",
		"Secret ns/podpatch-certs: already gone",
	}, done)
}

// TestRemoveWebhooksStopsOnError stops at the first failing delete and reports what it did.
func TestRemoveWebhooksStopsOnError(t *testing.T) {
	c := fake.NewClientset(&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "podpatch"}})
	boom := errors.New("forbidden")
	c.PrependReactor("delete", "validatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, boom
	})
	done, err := RemoveWebhooks(context.Background(), c, []string{"podpatch"}, []string{"podpatch"}, []types.NamespacedName{{Namespace: "ns", Name: "s"}})
	require.ErrorIs(t, err, boom)
	require.EqualError(t, err, "delete ValidatingWebhookConfiguration /podpatch: forbidden")
	require.Equal(t, []string{"MutatingWebhookConfiguration /podpatch: deleted"}, done)
}

// TestRemoveSecondLine deletes the bindings and policies with the label, and nothing else.
func TestRemoveSecondLine(t *testing.T) {
	ctx := context.Background()
	owned := map[string]string{"app.kubernetes.io/managed-by": "podpatch"}
	c := fake.NewClientset(
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "podpatch.pod.dask.worker", Labels: owned}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "podpatch.pod.dask.worker", Labels: owned}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "podpatch-policy-label"}},
	)
	done, err := RemoveSecondLine(ctx, c, "app.kubernetes.io/managed-by=podpatch")
	require.NoError(t, err)
	require.Equal(t, []string{
		"ValidatingAdmissionPolicyBinding podpatch.pod.dask.worker: deleted",
		"ValidatingAdmissionPolicy podpatch.pod.dask.worker: deleted",
	}, done)
	left, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, left.Items, 1)
	require.Equal(t, "podpatch-policy-label", left.Items[0].Name)
	done, err = RemoveSecondLine(ctx, c, "app.kubernetes.io/managed-by=podpatch")
	require.NoError(t, err)
	require.Empty(t, done, "nothing left: nothing to say")
}
