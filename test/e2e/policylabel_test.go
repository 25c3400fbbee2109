package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/podpatch/podpatch/policies"
)

// policyLabelWarning is what the shipped ValidatingAdmissionPolicy's message says.
const policyLabelWarning = `holds a PodTemplatePatch but not the label podpatch.io/policy: "true", so podpatch will never use its policies`

// TestPolicyLabelWarning installs the ValidatingAdmissionPolicy and binding of manifests/base
// and checks, through the warnings the API server returns to the client, that a ConfigMap
// holding a PodTemplatePatch without the label podpatch.io/policy: "true" is warned about and
// still stored, on create and on update, in a team namespace and in the platform namespace;
// and that a labelled policy, an unrelated ConfigMap and one in kube-system (left out, as by
// the mutating webhook) get no warning. No podpatch runs: the API server alone
// evaluates the policy.
func TestPolicyLabelWarning(t *testing.T) {
	var objs []*unstructured.Unstructured
	for _, o := range kustomizeBuild(t, "manifests/base") {
		if o.GetKind() == "ValidatingAdmissionPolicy" || o.GetKind() == "ValidatingAdmissionPolicyBinding" {
			objs = append(objs, o)
		}
	}
	require.Len(t, objs, 2, "manifests/base ships the policy and its binding")
	applyManifests(t, objs)
	cs, w := warningClient(t)

	configMap := func(ns, name string, labels map[string]string, value string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Data: map[string]string{"p.yaml": value}}
	}
	policy := policyYAML("workers", "nodeSelector: {pool: compute}")
	// create stores cm, deleted when the test ends, and returns the warnings of its creation.
	create := func(cm *corev1.ConfigMap) string {
		t.Helper()
		w.take()
		_, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(contextBackground(), cm, metav1.CreateOptions{})
		require.NoError(t, err, "a warning never refuses a ConfigMap")
		t.Cleanup(func() {
			_ = cs.CoreV1().ConfigMaps(cm.Namespace).Delete(contextBackground(), cm.Name, metav1.DeleteOptions{})
		})
		return strings.Join(w.take(), "\n")
	}

	// The API server loads a new policy within a second or so: until the warning comes, only
	// dry runs, which store nothing.
	probe := configMap("team-a", "probe", nil, policy)
	require.Eventually(t, func() bool {
		w.take()
		_, err := cs.CoreV1().ConfigMaps("team-a").Create(contextBackground(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err)
		return strings.Contains(strings.Join(w.take(), "\n"), policyLabelWarning)
	}, 30*time.Second, 200*time.Millisecond, "the API server never warned about an unlabelled policy ConfigMap")

	t.Run("unlabelled policy: warned and stored", func(t *testing.T) {
		got := create(configMap("team-a", "unlabelled", map[string]string{"team": "a"}, policy))
		t.Logf("the API server's warning: %s", got)
		assert.Contains(t, got, policyLabelWarning)
		assert.Contains(t, got, "podpatch-policy-label", "the warning names the policy")
		assert.Contains(t, got, `add the label podpatch.io/policy: "true"`, "the warning says how to fix it")
		stored, err := cs.CoreV1().ConfigMaps("team-a").Get(contextBackground(), "unlabelled", metav1.GetOptions{})
		require.NoError(t, err, "the ConfigMap is stored")
		assert.Equal(t, policy, stored.Data["p.yaml"])
	})
	t.Run("label not true, platform namespace: warned", func(t *testing.T) {
		got := create(configMap(policies.DefaultPlatformNamespace, "label-yes", map[string]string{policies.PolicyLabel: "yes"}, policy))
		assert.Contains(t, got, policyLabelWarning)
	})
	t.Run("labelled policy: no warning", func(t *testing.T) {
		assert.Empty(t, create(configMap("team-a", "labelled", map[string]string{policies.PolicyLabel: "true"}, policy)))
	})
	t.Run("unrelated ConfigMap: no warning, until an update makes it a policy", func(t *testing.T) {
		cm := configMap("team-a", "app-config", nil, "kind: Settings\nlogLevel: debug\n")
		assert.Empty(t, create(cm))
		cm.Data["p.yaml"] = policy
		_, err := cs.CoreV1().ConfigMaps("team-a").Update(contextBackground(), cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Contains(t, strings.Join(w.take(), "\n"), policyLabelWarning)
	})
	t.Run("kube-system: left out", func(t *testing.T) {
		assert.Empty(t, create(configMap("kube-system", "unlabelled-policy", nil, policy)))
	})
}
