package policystore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies"
)

// TestInvalidPolicyMessageBounded: the InvalidPolicy Event of a ConfigMap with tens of
// thousands of problems (webhook's TestValidateManyProblems denies it) is as bounded as the
// denial, and starts with the first problem.
func TestInvalidPolicyMessageBounded(t *testing.T) {
	cm := policyCM("team-a", "hostile", "")
	cm.Data = map[string]string{}
	for i := range 20000 {
		cm.Data[fmt.Sprintf("k%05d", i)] = "x" // data keys must end in .yaml
	}
	_, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
	require.Greater(t, len(probs), MaxListedProblems, "the test needs a ConfigMap with many problems")

	msg := invalidPolicyMessage(probs)
	require.LessOrEqual(t, len(msg), kube.MaxEventMessage)
	require.True(t, strings.HasPrefix(msg, probs[0].String()))
}

// TestProblemLines bounds each listed line, cutting at a character boundary.
func TestProblemLines(t *testing.T) {
	long := policies.Problems{{Key: "p.yaml", Policy: "x", Err: field.Invalid(field.NewPath("spec"), strings.Repeat("é", 2000), "too long")}}
	lines := ProblemLines("ns/cm: ", long)
	require.Len(t, lines, 1)
	require.LessOrEqual(t, len(lines[0]), MaxProblemLine)
	require.True(t, strings.HasSuffix(lines[0], "..."))
	require.True(t, strings.HasPrefix(lines[0], "ns/cm: p.yaml: x: "))
	require.Empty(t, ProblemLines("", nil))
}
