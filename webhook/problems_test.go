package webhook

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/podpatch/podpatch/internal/kube"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/policies"
)

// TestValidateManyProblems: a ConfigMap with tens of thousands of problems is denied with the
// first maxListedProblems of them and a count of the rest; its Event and log are as bounded.
func TestValidateManyProblems(t *testing.T) {
	cm := policyCM("team-a", "hostile", "")
	cm.Data = map[string]string{}
	for i := range 20000 {
		cm.Data[fmt.Sprintf("k%05d", i)] = "x" // data keys must end in .yaml
	}
	_, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
	require.Greater(t, len(probs), maxListedProblems, "the test needs a ConfigMap with many problems")

	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	raw, err := json.Marshal(cm)
	require.NoError(t, err)
	h := &Review{Handler: &Validator{Options: policies.DefaultOptions(), Metrics: newTestMetrics(t)}}
	_, resp := post(t, h, review(t, "ConfigMap", "team-a", admissionv1.Create, raw, false), "application/json")
	require.NotNil(t, resp)
	require.False(t, resp.Allowed)
	lines := strings.Split(resp.Result.Message, "\n")
	require.Len(t, lines, 1+maxListedProblems+1, "a header, the listed problems, and the count")
	require.Equal(t, "team-a/hostile: "+probs[0].String(), lines[1])
	require.Equal(t, fmt.Sprintf("and %d more problems", len(probs)-maxListedProblems), lines[len(lines)-1])
	require.Less(t, len(resp.Result.Message), maxListedProblems*maxProblemLine+200)

	msg := invalidPolicyMessage(probs)
	require.LessOrEqual(t, len(msg), kube.MaxEventMessage)
	require.True(t, strings.HasPrefix(msg, probs[0].String()))
}

// TestProblemLines bounds each listed line, cutting at a character boundary.
func TestProblemLines(t *testing.T) {
	long := policies.Problems{{Key: "p.yaml", Policy: "x", Err: field.Invalid(field.NewPath("spec"), strings.Repeat("é", 2000), "too long")}}
	lines := problemLines("ns/cm: ", long)
	require.Len(t, lines, 1)
	require.LessOrEqual(t, len(lines[0]), maxProblemLine)
	require.True(t, strings.HasSuffix(lines[0], "..."))
	require.True(t, strings.HasPrefix(lines[0], "ns/cm: p.yaml: x: "))
	require.Empty(t, problemLines("", nil))
}
