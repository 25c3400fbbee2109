package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// TestShippedExcludedNamespaces: the namespaces render --explain says admission leaves out are
// those the shipped webhook configurations exclude: every webhook of manifests/base's
// MutatingWebhookConfiguration excludes exactly shippedExcludedNamespaces and the platform
// namespace by name, and the chart's excludedNamespaces default is the same list.
func TestShippedExcludedNamespaces(t *testing.T) {
	b, err := os.ReadFile("../../manifests/base/mutatingwebhook.yaml")
	require.NoError(t, err)
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	require.NoError(t, yaml.Unmarshal(b, &mwc))
	require.NotEmpty(t, mwc.Webhooks)
	want := append(slices.Clone(shippedExcludedNamespaces), "podpatch-system")
	slices.Sort(want)
	for _, w := range mwc.Webhooks {
		var got []string
		if w.NamespaceSelector != nil {
			for _, e := range w.NamespaceSelector.MatchExpressions {
				if e.Key == "kubernetes.io/metadata.name" && e.Operator == "NotIn" {
					got = append(got, e.Values...)
				}
			}
		}
		slices.Sort(got)
		assert.Equal(t, want, got, "webhook %s", w.Name)
	}

	b, err = os.ReadFile("../../manifests/chart/podpatch/values.yaml")
	require.NoError(t, err)
	var values struct {
		MutatingWebhook struct {
			ExcludedNamespaces []string `json:"excludedNamespaces"`
		} `json:"mutatingWebhook"`
	}
	require.NoError(t, yaml.Unmarshal(b, &values))
	assert.Equal(t, shippedExcludedNamespaces, values.MutatingWebhook.ExcludedNamespaces, "the chart's mutatingWebhook.excludedNamespaces")
}

// TestRenderExcludedNamespace: render patches an object in a namespace the webhook leaves out
// (it renders what the policies say), and --explain says admission would not call podpatch for
// it (render patched a kube-system Pod the webhook never sees, without a word).
func TestRenderExcludedNamespace(t *testing.T) {
	pod, err := os.ReadFile(daskWorker)
	require.NoError(t, err)
	note := "note: the webhook's namespaceSelector leaves namespace "
	for _, ns := range append(slices.Clone(shippedExcludedNamespaces), "podpatch-system", "default") {
		in := strings.Replace(string(pod), "\n  namespace: default\n", "\n  namespace: "+ns+"\n", 1)
		require.Contains(t, in, "namespace: "+ns)
		out := requireOK(t, podpatch(t, in, "render", "--explain", "--policies", examples, "-f", "-"))
		if ns == "default" {
			assert.NotContains(t, out, note)
			continue
		}
		assert.Contains(t, out, "# podpatch:   "+note+ns+" out: admission would not call podpatch for this object\n")
		assert.Contains(t, out, "podpatch.io/applied:", "render still patches the object in %s", ns)
	}
}
