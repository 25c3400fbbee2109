package cluster

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// baseEntries are the webhook entries of the kustomize base.
func baseEntries(t *testing.T) []admissionregistrationv1.MutatingWebhook {
	t.Helper()
	b, err := os.ReadFile("../../manifests/base/mutatingwebhook.yaml")
	require.NoError(t, err)
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, yaml.UnmarshalStrict(b, mwc))
	require.NotEmpty(t, mwc.Webhooks)
	return mwc.Webhooks
}

// The kustomize base's objectSelectors select what the profiles recognise, and nothing of a
// manager that does not exist.
func TestBaseWebhookSelectorsFollowTheProfiles(t *testing.T) {
	require.Empty(t, WebhookSelectorProblems(baseEntries(t)))
}

// Each way an entry can drift from the profiles is found.
func TestWebhookSelectorProblemsFindsDrift(t *testing.T) {
	edits := map[string]func([]admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook{
		"an entry for a manager that does not exist": func(es []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
			e := *es[0].DeepCopy()
			e.Name = "yarn.podpatch.io"
			return append(es, e)
		},
		"a manager's entry dropped": func(es []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
			return es[1:]
		},
		"a role value left out": func(es []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
			es[0].ObjectSelector.MatchExpressions[0].Values = es[0].ObjectSelector.MatchExpressions[0].Values[:1]
			return es
		},
		"Services left out of an entry's rules": func(es []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
			es[0].Rules[0].Resources = []string{"pods"}
			return es
		},
		"updates left out (an enforce policy undone after admission)": func(es []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
			es[2].Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
			return es
		},
		"kubectl debug's subresource left out": func(es []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
			es[0].Rules[0].Resources = []string{"pods", "services", "pods/resize"}
			return es
		},
		"selecting by a label no profile reads": func(es []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
			es[0].ObjectSelector.MatchLabels = map[string]string{"team": "a"}
			return es
		},
		"an entry selecting another manager's objects": func(es []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
			es[0].ObjectSelector = es[len(es)-1].ObjectSelector.DeepCopy()
			return es
		},
		"no objectSelector": func(es []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
			es[0].ObjectSelector = &metav1.LabelSelector{}
			return es
		},
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			require.NotEmpty(t, WebhookSelectorProblems(edit(baseEntries(t))))
		})
	}
	for i := range baseEntries(t) {
		es := baseEntries(t)
		require.NotEmpty(t, WebhookSelectorProblems(append(es[:i:i], es[i+1:]...)), "without %s", es[i].Name)
	}
}
