package policies

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// TestSharedRulesLintAndAdmission: a rule that one policy alone can break is enforced by lint on
// the policy and by admission on the patched object, by the same rule code of package validity
// (lint applies the policy to synthetic objects, validity.Own): the same values break both, in
// the same words, and the same values with the rule kept pass both.
func TestSharedRulesLintAndAdmission(t *testing.T) {
	for _, c := range []struct {
		name        string
		spec        string // the pod spec: a policy's template and a Pod's
		field, rule string // lint's field; admission's rule; "" = valid
	}{
		{"duplicate port names", "{containers: [{name: a, image: x, ports: [{containerPort: 1, name: p}, {containerPort: 2, name: p}]}]}",
			"spec.template.spec.containers[0].ports[1].name", validity.RuleDuplicatePortName},
		{"distinct port names", "{containers: [{name: a, image: x, ports: [{containerPort: 1, name: p}, {containerPort: 2, name: q}]}]}", "", ""},
		{"a resource claim with both sources", "{resourceClaims: [{name: gpu, resourceClaimName: a, resourceClaimTemplateName: b}], containers: [{name: a, image: x}]}",
			"spec.template.spec.resourceClaims[0]", validity.RuleResourceClaimSource},
		{"a resource claim with one source", "{resourceClaims: [{name: gpu, resourceClaimName: a}], containers: [{name: a, image: x}]}", "", ""},
		{"an extended resource requested without a limit", "{containers: [{name: a, image: x, resources: {requests: {nvidia.com/gpu: '1'}}}]}",
			"spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]", validity.RuleExtendedResourceLimit},
		{"an extended resource requested with its limit", "{containers: [{name: a, image: x, resources: {requests: {nvidia.com/gpu: '1'}, limits: {nvidia.com/gpu: '1'}}}]}", "", ""},
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
			}

			// admission, on a Pod with the same values.
			js, err := yaml.YAMLToJSON([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec: " + c.spec))
			require.NoError(t, err)
			vs, err := Check(Input{Kind: profiles.KindPod, Object: js})
			require.NoError(t, err)
			if c.rule == "" {
				require.Empty(t, vs)
				return
			}
			require.Len(t, vs, 1, "%v", vs)
			require.Equal(t, c.rule, vs[0].Rule)
			require.Equal(t, vs[0].Message, probs[0].Err.Detail, "lint says what admission says")
		})
	}
}

// lintVerdict is what lint says of a policy that breaks one rule of package validity alone.
type lintVerdict int

const (
	// lintOwn: lint refuses it with the rule's own words, found by admission's rule code on a
	// synthetic object (validity.Own).
	lintOwn lintVerdict = iota
	// lintFields: the field rules (internal/k8sfields) refuse it first, in the policy's terms.
	lintFields
	// lintAdmits: lint accepts it; the object or the cluster may complete it, and admission
	// decides, object by object.
	lintAdmits
)

// TestEveryRuleLintAndAdmission: for every rule of package validity, a policy that breaks it
// alone is left out by admission, for that rule, on every manager's object it applies to
// (policies/testdata/fixtures); lint refuses it where the rule is the policy's own, saying what
// admission says, since both run the same rule code. A rule added to validity.Rules without a
// row here fails the test.
func TestEveryRuleLintAndAdmission(t *testing.T) {
	q := resource.MustParse
	none := &fakeCluster{}
	maxFoo := []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{"example.com/foo": q("2")},
		Default: corev1.ResourceList{"example.com/foo": q("1")}}}
	cases := map[string]struct {
		spec   string // "" when no policy can break it alone
		lint   lintVerdict
		labels map[string]string // the namespace's
		cl     *fakeCluster
	}{
		validity.RuleDuplicateContainer: {spec: "template: {spec: {containers: [{name: x, image: a}], initContainers: [{name: x, image: b}]}}"},
		validity.RuleDuplicatePortName:  {spec: "template: {spec: {containers: [{name: '*', ports: [{containerPort: 1, name: a}, {containerPort: 2, name: a}]}]}}"},
		validity.RuleDuplicateHostPort: {spec: "template: {spec: {containers: [{name: '@main', ports: [{containerPort: 1, hostPort: 8080}]}, {name: side, image: a, ports: [{containerPort: 2, hostPort: 8080}]}]}}",
			lint: lintAdmits},
		validity.RuleDuplicateVolume:    {}, // volumes merge by name
		validity.RuleMountWithoutVolume: {spec: "template: {spec: {containers: [{name: '*', volumeMounts: [{name: elsewhere, mountPath: /x}]}]}}", lint: lintAdmits},
		validity.RuleDuplicateMountPath: {}, // mounts merge by path
		validity.RuleMountSubPath: {spec: "template: {spec: {volumes: [{name: v, emptyDir: {}}], containers: [{name: '*', volumeMounts: [{name: v, mountPath: /x, subPath: /abs}]}]}}",
			lint: lintFields},
		validity.RuleRequestAboveLimit:     {spec: "template: {spec: {containers: [{name: '*', resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]}}", lint: lintFields},
		validity.RuleExtendedResourceLimit: {spec: "template: {spec: {containers: [{name: '*', resources: {limits: {hugepages-2Mi: '3', memory: 64Gi}}}]}}"},
		validity.RulePriorityClassNotFound: {spec: "template: {spec: {priorityClassName: elsewhere}}", lint: lintAdmits, cl: none},
		validity.RulePriorityMismatch:      {}, // coupled: admission sets the priority from the class (couple.go)
		validity.RuleRuntimeClassNotFound:  {spec: "template: {spec: {runtimeClassName: elsewhere}}", lint: lintAdmits, cl: none},
		validity.RuleOverheadMismatch: {spec: "template: {spec: {runtimeClassName: gvisor, overhead: {cpu: 250m}}}", lint: lintFields,
			cl: &fakeCluster{runtime: map[string]validity.RuntimeClassInfo{"gvisor": {}}}},
		validity.RuleRuntimeClassScheduling: {spec: "template: {spec: {runtimeClassName: gvisor, nodeSelector: {sandbox: 'no'}}}", lint: lintAdmits,
			cl: &fakeCluster{runtime: map[string]validity.RuntimeClassInfo{"gvisor": {NodeSelector: map[string]string{"sandbox": "yes"}}}}},
		validity.RuleServiceAccountNotFound: {spec: "template: {spec: {serviceAccountName: elsewhere}}", lint: lintAdmits,
			cl: &fakeCluster{accounts: map[string]bool{"default/default": true, "default/flink": true, "default/spark-operator-spark": true}}},
		validity.RuleLimitRange: {spec: "template: {spec: {containers: [{name: '*', resources: {limits: {example.com/foo: '3'}}}]}}", lint: lintAdmits,
			cl: &fakeCluster{limits: map[string][]corev1.LimitRangeItem{"default": maxFoo, "dask-gateway": maxFoo, "spark-jobs": maxFoo}}},
		validity.RulePodSecurity: {spec: "template: {spec: {hostIPC: true}}", lint: lintAdmits,
			labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}},
		validity.RuleAnnotationsTooLong:      {}, // a policy is at most MaxPolicyBytes
		validity.RuleServiceHeadlessExternal: {spec: "service: {spec: {type: NodePort, clusterIP: None}}", lint: lintFields},
		validity.RuleServiceTypeField:        {spec: "service: {spec: {externalTrafficPolicy: Local}}", lint: lintFields},
		validity.RuleServicePortName:         {spec: "service: {spec: {ports: [{port: 9999}]}}", lint: lintAdmits},
		validity.RuleServiceDuplicatePort: {spec: "service: {spec: {type: NodePort, clusterIP: '', clusterIPs: null, ports: [{name: a, port: 9998, nodePort: 30000}, {name: b, port: 9999, nodePort: 30000}]}}",
			lint: lintAdmits},
		validity.RuleServicePortsRequired: {spec: "match: {managers: [dask]}\nservice: {spec: {ports: null}}", lint: lintFields},
		validity.RuleServiceExternalName:  {spec: "service: {spec: {type: ExternalName, clusterIP: '', clusterIPs: null, ports: null}}", lint: lintFields},
		validity.RulePodResources:         {spec: "template: {spec: {resources: {limits: {nvidia.com/gpu: '1'}}}}"},
		validity.RuleEnvSource:            {spec: "template: {spec: {containers: [{name: '*', env: [{name: A, valueFrom: {fileKeyRef: {volumeName: v, path: p}}}]}]}}"},
		validity.RuleResourceClaimNotFound: {spec: "template: {spec: {containers: [{name: '*', resources: {claims: [{name: elsewhere}]}}]}}",
			lint: lintAdmits},
		validity.RuleVolumeSource:        {spec: "template: {spec: {volumes: [{name: v, flocker: {datasetName: a, datasetUUID: b}}]}}"},
		validity.RuleServiceClusterIPs:   {spec: "service: {spec: {clusterIPs: [None, None]}}"},
		validity.RulePodOS:               {spec: "match: {managers: [dask-gateway, flink]}\ntemplate: {spec: {os: {name: windows}, resources: {limits: {cpu: '1'}}}}"},
		validity.RulePodFieldConflict:    {spec: "template: {spec: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [app]}]}}"},
		validity.RuleResourceClaimSource: {spec: "template: {spec: {resourceClaims: [{name: gpu, resourceClaimName: a, resourceClaimTemplateName: b}]}}"},
		validity.RuleRestartPolicyRules:  {spec: "template: {spec: {containers: [{name: '@main', restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]}]}}"},
		validity.RuleServiceIPFamilies:   {spec: "service: {spec: {ipFamilies: [IPv4, IPv6]}}"},
		validity.ReasonBudget:            {}, // the request's budget, not an object's rule
		validity.ReasonWork:              {}, // the engine's bound, not an object's rule
		validity.ReasonSelection:         {}, // the policies' selectors, not an object's rule
		validity.ReasonKubeVersion:       {}, // the cluster's version: TestKubeVersionAtAdmission
		validity.ReasonKueueMark:         {}, // a namespace policy's Kueue mark: TestNamespaceKueueMarkKeepsEnforcedPlacement
	}
	var objects [][]byte
	files, err := filepath.Glob(filepath.Join("testdata", "fixtures", "*", "*.yaml"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		js, err := yaml.YAMLToJSON(b)
		require.NoError(t, err)
		objects = append(objects, js)
	}
	for _, rule := range validity.Rules {
		c, ok := cases[rule]
		require.True(t, ok, "rule %s has no case", rule)
		if c.spec == "" {
			continue
		}
		t.Run(rule, func(t *testing.T) {
			text := docHead + "spec:\n" + indent(c.spec)
			_, probs := ParseConfigMap(policyConfigMap(DefaultPlatformNamespace, map[string]string{"p.yaml": text}), DefaultOptions())
			switch c.lint {
			case lintAdmits:
				require.Empty(t, probs)
			default:
				require.NotEmpty(t, probs)
			}

			// Admission, with the policy whatever lint says of it.
			js, err := yaml.YAMLToJSON([]byte(text))
			require.NoError(t, err)
			p, _ := parseDocument(js, ScopePlatform, DefaultOptions())
			p.Namespace, p.ConfigMap, p.Key, p.Scope = DefaultPlatformNamespace, "hostile", "p.yaml", ScopePlatform
			p.Ref = p.Namespace + "/" + p.ConfigMap + "/" + p.Name
			s := NewSet([]*Policy{p})
			ep := *p
			ep.Mode = ModeEnforce
			enforced := NewSet([]*Policy{&ep})
			applied := 0
			for _, obj := range objects {
				in := Input{Kind: profiles.Kind(strOf(objectOf(t, obj)["kind"])), Object: obj, Namespace: "default", NamespaceLabels: c.labels}
				if c.cl != nil {
					in.Lookups = c.cl
				}
				if (in.Kind != profiles.KindPod || p.template == nil) && (in.Kind != profiles.KindService || p.service == nil) {
					continue
				}
				res, err := s.Apply(in)
				require.NoError(t, err)
				if len(res.Applied)+len(res.Skipped) == 0 {
					continue // not selected
				}
				applied++
				require.Len(t, res.Skipped, 1, "%s: %s", objectOf(t, obj)["metadata"], res.Skipped)
				v := res.Skipped[0].Violation
				require.Equal(t, rule, v.Rule, "%s: %s", objectOf(t, obj)["metadata"], v)
				if c.lint == lintOwn {
					require.Len(t, probs, 1, probs.Error())
					require.Equal(t, v.Message, probs[0].Err.Detail, "lint says what admission says")
				}
				// Never break the workload: a merge policy is left out and the object admitted.
				require.False(t, res.Denied, "a merge policy left out does not deny the object")
				// Enforce means enforced (reference §5): the same policy as enforce denies it,
				// naming the policy and the rule.
				eres, err := enforced.Apply(in)
				require.NoError(t, err)
				require.True(t, eres.Denied, "%s: an enforce policy that cannot be applied denies the object", objectOf(t, obj)["metadata"])
				require.Empty(t, eres.Applied)
				require.Contains(t, eres.Denial(), ep.Ref)
				require.Contains(t, eres.Denial(), "("+rule+")")
			}
			require.NotZero(t, applied)
		})
	}
}
