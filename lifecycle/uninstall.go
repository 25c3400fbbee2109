package lifecycle

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
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
func RemoveWebhooks(ctx context.Context, c kubernetes.Interface, mutating, validating []string, secrets []types.NamespacedName) ([]string, error) {
	var done []string
	remove := func(kind string, key types.NamespacedName, del func(context.Context, string, metav1.DeleteOptions) error) error {
		err := del(ctx, key.Name, metav1.DeleteOptions{})
		switch {
		case apierrors.IsNotFound(err):
			done = append(done, fmt.Sprintf("%s %s: already gone", kind, key))
			return nil
		case err != nil:
			return fmt.Errorf("delete %s %s: %w", kind, key, err)
		}
		done = append(done, fmt.Sprintf("%s %s: deleted", kind, key))
		return nil
	}
	ar := c.AdmissionregistrationV1()
	for _, name := range mutating {
		if err := remove("MutatingWebhookConfiguration", types.NamespacedName{Name: name}, ar.MutatingWebhookConfigurations().Delete); err != nil {
			return done, err
		}
	}
	for _, name := range validating {
		if err := remove("ValidatingWebhookConfiguration", types.NamespacedName{Name: name}, ar.ValidatingWebhookConfigurations().Delete); err != nil {
			return done, err
		}
	}
	for _, key := range secrets {
		if err := remove("Secret", key, c.CoreV1().Secrets(key.Namespace).Delete); err != nil {
			return done, err
		}
	}
	return done, nil
}

// RemoveSecondLine deletes the ValidatingAdmissionPolicyBindings and then the
// ValidatingAdmissionPolicies that match selector (the second line's label,
// app.kubernetes.io/managed-by=podpatch), and says what it did, one line per object. Left
// behind, they would keep denying the objects that do not hold an enforce policy after podpatch
// is gone, with no replica to delete them when the policies go.
func RemoveSecondLine(ctx context.Context, c kubernetes.Interface, selector string) ([]string, error) {
	var done []string
	ar := c.AdmissionregistrationV1()
	bindings, err := ar.ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return done, fmt.Errorf("list ValidatingAdmissionPolicyBindings: %w", err)
	}
	for _, b := range bindings.Items {
		if err := ar.ValidatingAdmissionPolicyBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return done, fmt.Errorf("delete ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
		}
		done = append(done, fmt.Sprintf("ValidatingAdmissionPolicyBinding %s: deleted", b.Name))
	}
	policies, err := ar.ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return done, fmt.Errorf("list ValidatingAdmissionPolicies: %w", err)
	}
	for _, p := range policies.Items {
		if err := ar.ValidatingAdmissionPolicies().Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return done, fmt.Errorf("delete ValidatingAdmissionPolicy %s: %w", p.Name, err)
		}
		done = append(done, fmt.Sprintf("ValidatingAdmissionPolicy %s: deleted", p.Name))
	}
	return done, nil
}
