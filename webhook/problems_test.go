package webhook

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// TestValidateManyProblems: a ConfigMap with tens of thousands of problems is denied with the
// first policystore.MaxListedProblems of them and a count of the rest; its Event is as bounded
// (policystore's TestInvalidPolicyMessageBounded).
func TestValidateManyProblems(t *testing.T) {
	cm := policyCM("team-a", "hostile", "")
	cm.Data = map[string]string{}
	for i := range 20000 {
		cm.Data[fmt.Sprintf("k%05d", i)] = "x" // data keys must end in .yaml
	}
	_, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
	require.Greater(t, len(probs), policystore.MaxListedProblems, "the test needs a ConfigMap with many problems")

	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	raw, err := json.Marshal(cm)
	require.NoError(t, err)
	h := &Review{Handler: &Validator{Options: policies.DefaultOptions(), Metrics: newTestMetrics(t)}}
	_, resp := post(t, h, review(t, "ConfigMap", "team-a", admissionv1.Create, raw, false), "application/json")
	require.NotNil(t, resp)
	require.False(t, resp.Allowed)
	lines := strings.Split(resp.Result.Message, "\n")
	require.Len(t, lines, 1+policystore.MaxListedProblems+1, "a header, the listed problems, and the count")
	require.Equal(t, "team-a/hostile: "+probs[0].String(), lines[1])
	require.Equal(t, fmt.Sprintf("and %d more problems", len(probs)-policystore.MaxListedProblems), lines[len(lines)-1])
	require.Less(t, len(resp.Result.Message), policystore.MaxListedProblems*policystore.MaxProblemLine+200)
}
