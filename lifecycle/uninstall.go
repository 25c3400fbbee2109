package lifecycle

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RemoveWebhooks deletes the named mutating and validating webhook configurations, mutating
// first, then the named Secrets (podpatch --self-signed's CA and certificate, which podpatch
// created at run time and no installer owns), and says what it did, one line per object. An
// object that is already gone is not an error, so the hook can run twice.
//
// Helm deletes a release's objects kind by kind and webhook configurations last, after the
// Deployment and Service they point at; a failed or interrupted uninstall then leaves a webhook
// that nothing serves (kyverno#3111, #5942, #9551). With failurePolicy Fail that blocks every
// Pod create in the cluster. Deleting them first, in a pre-delete hook, closes that window.
func RemoveWebhooks(ctx context.Context, c client.Client, mutating, validating []string, secrets []types.NamespacedName) ([]string, error) {
	var done []string
	remove := func(obj client.Object, kind string) error {
		err := c.Delete(ctx, obj)
		switch {
		case apierrors.IsNotFound(err):
			done = append(done, fmt.Sprintf("%s %s: already gone", kind, client.ObjectKeyFromObject(obj)))
			return nil
		case err != nil:
			return fmt.Errorf("delete %s %s: %w", kind, client.ObjectKeyFromObject(obj), err)
		}
		done = append(done, fmt.Sprintf("%s %s: deleted", kind, client.ObjectKeyFromObject(obj)))
		return nil
	}
	for _, name := range mutating {
		obj := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := remove(obj, "MutatingWebhookConfiguration"); err != nil {
			return done, err
		}
	}
	for _, name := range validating {
		obj := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := remove(obj, "ValidatingWebhookConfiguration"); err != nil {
			return done, err
		}
	}
	for _, key := range secrets {
		obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := remove(obj, "Secret"); err != nil {
			return done, err
		}
	}
	return done, nil
}
