package policies

import (
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// TestSharedRulesLintAndAdmission: a rule that one policy alone can break is enforced by lint on
// the policy and by admission on the patched object, decided by the same function of package
// validity (validity/shared.go): the same values break both, and the same values with the rule
// kept pass both.
func TestSharedRulesLintAndAdmission(t *testing.T) {
	for _, c := range []struct {
		name        string
		spec        string // the pod spec: a policy's template and a Pod's
		field, rule string // lint's field; admission's rule; "" = valid
		message     string // a message both say, when they share it
	}{
		{"duplicate port names", "{containers: [{name: a, image: x, ports: [{containerPort: 1, name: p}, {containerPort: 2, name: p}]}]}",
			"spec.template.spec.containers[0].ports[1].name", validity.RuleDuplicatePortName, ""},
		{"distinct port names", "{containers: [{name: a, image: x, ports: [{containerPort: 1, name: p}, {containerPort: 2, name: q}]}]}", "", "", ""},
		{"a resource claim with both sources", "{resourceClaims: [{name: gpu, resourceClaimName: a, resourceClaimTemplateName: b}], containers: [{name: a, image: x}]}",
			"spec.template.spec.resourceClaims[0]", validity.RuleResourceClaimSource, validity.ClaimSourceMessage},
		{"a resource claim with one source", "{resourceClaims: [{name: gpu, resourceClaimName: a}], containers: [{name: a, image: x}]}", "", "", ""},
		{"an extended resource requested without a limit", "{containers: [{name: a, image: x, resources: {requests: {nvidia.com/gpu: '1'}}}]}",
			"spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]", validity.RuleExtendedResourceLimit, ""},
		{"an extended resource requested with its limit", "{containers: [{name: a, image: x, resources: {requests: {nvidia.com/gpu: '1'}, limits: {nvidia.com/gpu: '1'}}}]}", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			// lint, on the policy.
			text := docHead + "spec:\n" + indent("template: {spec: "+c.spec+"}")
			ps, probs := ParseConfigMap(policyConfigMap(DefaultPlatformNamespace, map[string]string{"p.yaml": text}), DefaultOptions())
			if c.field == "" {
				require.Empty(t, probs)
				require.Len(t, ps, 1)
			} else {
				require.Len(t, probs, 1, probs.Error())
				require.Equal(t, c.field, probs[0].Err.Field)
				require.Contains(t, probs[0].Err.Error(), c.message)
			}

			// admission, on a Pod with the same values.
			js, err := yaml.YAMLToJSON([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec: " + c.spec))
			require.NoError(t, err)
			vs, err := Check(Input{Kind: profiles.KindPod, Object: js})
			require.NoError(t, err)
			var rules []string
			for _, v := range vs {
				rules = append(rules, v.Rule)
				require.Contains(t, v.Message, c.message)
			}
			if c.rule == "" {
				require.Empty(t, vs)
			} else {
				require.Equal(t, []string{c.rule}, rules, "%v", vs)
			}
		})
	}
}
