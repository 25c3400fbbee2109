package policyfiles

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/internal/hostiletest"
	"github.com/podpatch/podpatch/policies"
)

// TestReadIsBounded: a file (or stdin) beyond MaxFileBytes is refused before it is parsed.
func TestReadIsBounded(t *testing.T) {
	_, err := Read("-", strings.NewReader(strings.Repeat("#", policies.MaxFileBytes+1)))
	require.ErrorIs(t, err, policies.ErrTooLarge)
	require.ErrorContains(t, err, "more than 8388608 bytes")
}

// TestFlowMappingAliasBombEverywhere: the flow-mapping alias bomb is refused in a policy
// document, in the ConfigMap file around it (lint, render --policies, --policy-dir) and in an
// object stream (render -f).
func TestFlowMappingAliasBombEverywhere(t *testing.T) {
	bomb := hostiletest.FlowMappingAliasBomb(5, 10, 4000, 2300, false)
	policy := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p}\n" + "spec:\n  template:\n    metadata:\n      annotations: " + bomb + "\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: "team-a", Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data: map[string]string{"p.yaml": policy}}
	ps, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
	require.Nil(t, ps)
	require.Contains(t, probs.Error(), "line 7: YAML anchor &s0: anchors and aliases are not accepted")

	file := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations: " + bomb + "\ndata: {}\n"
	_, err := ReadConfigMaps([]string{"-"}, "default", strings.NewReader(file))
	require.ErrorContains(t, err, "document 1: line 5: YAML anchor &s0: anchors and aliases are not accepted")

	stream := "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, labels: " + bomb + "}\n"
	_, err = policies.SplitDocuments(strings.NewReader(stream))
	require.ErrorContains(t, err, "document 2: line 3: YAML anchor &s0: anchors and aliases are not accepted")
	// A stream that starts like JSON but is YAML goes through the same front end.
	_, err = policies.SplitDocuments(strings.NewReader(bomb))
	require.ErrorContains(t, err, "anchors and aliases are not accepted")
}
