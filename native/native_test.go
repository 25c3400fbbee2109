package native

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policyfiles"
)

// set compiles policy documents: platform ones, and namespace ones of team-a.
func set(t *testing.T, platform, namespace []string) *policies.Set {
	t.Helper()
	var cms []policies.SourcedConfigMap
	for i, docs := range [][]string{platform, namespace} {
		if len(docs) == 0 {
			continue
		}
		ns := policies.DefaultPlatformNamespace
		if i == 1 {
			ns = "team-a"
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data: map[string]string{"p.yaml": strings.Join(docs, "---\n")}}
		cms = append(cms, policies.SourcedConfigMap{File: ns + ".yaml", ConfigMap: cm})
	}
	s, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(t, probs, "%s", policies.ProblemLines(probs))
	return s
}

func doc(name, spec string) string {
	return fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: %s}\nspec: %s\n", name, spec)
}

func compile(t *testing.T, platform, namespace []string) Output {
	t.Helper()
	return Compile(set(t, platform, namespace), policies.DefaultPlatformNamespace, Options{ExcludedNamespaces: []string{"kube-system"}})
}

// TestLeft: a policy part compiles whole or is left to the webhook, each field that keeps it
// there listed with its reason.
func TestLeft(t *testing.T) {
	cases := []struct {
		name, spec     string
		field, reason  string
		kind           profiles.Kind
		compiledToo    bool // its pod part compiles, another part does not
		namespaceScope bool
	}{
		{name: "resources", spec: `{template: {spec: {containers: [{name: "*", env: [{name: A, value: b}], resources: {limits: {cpu: "1"}}}]}}}`,
			field: "spec.containers[*].resources", reason: "LimitRanges", kind: profiles.KindPod},
		{name: "env-from", spec: `{template: {spec: {containers: [{name: main, env: [{name: A, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]}]}}}`,
			field: "spec.containers[main].env[A]", reason: reasonContainerFields, kind: profiles.KindPod},
		{name: "init", spec: `{template: {spec: {initContainers: [{name: "*", env: [{name: A, value: b}]}]}}}`,
			field: "spec.initContainers", reason: reasonContainers, kind: profiles.KindPod},
		{name: "preferred", spec: `{template: {spec: {affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: {matchExpressions: [{key: a, operator: Exists}]}}]}}}}}`,
			field: "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution", reason: reasonNotYet, kind: profiles.KindPod},
		{name: "pod-affinity", spec: `{template: {spec: {affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: zone}}]}}}}}`,
			field: "spec.affinity.podAntiAffinity", reason: reasonNotYet, kind: profiles.KindPod},
		{name: "service", spec: `{template: {metadata: {labels: {a: b}}}, service: {metadata: {labels: {a: b}}}}`,
			field: "service", reason: "Services are not compiled", kind: profiles.KindService, compiledToo: true},
		{name: "whole-map", spec: `{mode: merge, template: {metadata: {annotations: null}}}`,
			field: "metadata.annotations", reason: reasonWholeRemoval, kind: profiles.KindPod},
		{name: "kueue", spec: `{template: {metadata: {labels: {kueue.x-k8s.io/queue-name: q}}}}`,
			field: "metadata.labels[kueue.x-k8s.io/queue-name]", reason: reasonKueueMark, kind: profiles.KindPod},
		{name: "api-annotation", spec: `{template: {metadata: {annotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: "true"}}}}`,
			field: "metadata.annotations[cluster-autoscaler.kubernetes.io/safe-to-evict]", reason: reasonAPIAnnotation, kind: profiles.KindPod},
		{name: "glob-class", spec: `{match: {clusters: ["[ab]*"]}, template: {metadata: {labels: {a: b}}}}`,
			field: "match", reason: "character class", kind: profiles.KindPod},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := compile(t, []string{doc(c.name, c.spec)}, nil)
			require.NotEmpty(t, out.Left)
			l := out.Left[0]
			require.Equal(t, policies.DefaultPlatformNamespace+"/p/"+c.name, l.Ref)
			require.Equal(t, c.kind, l.Kind)
			require.Equal(t, c.field, l.Field)
			require.Contains(t, l.Reason, c.reason)
			require.Equal(t, c.compiledToo, len(out.Compiled) == 1, "compiled: %v", out.Compiled)
			if !c.compiledToo {
				require.Empty(t, out.Groups)
			}
		})
	}
}

// TestSelectionFixedPoint: a selector reading a label that a policy sets depends on the
// webhook's fixed point; that policy is left, the one setting the label compiles.
func TestSelectionFixedPoint(t *testing.T) {
	out := compile(t, []string{
		doc("sets", `{template: {metadata: {labels: {tier: gold}}}}`),
		doc("reads", `{match: {selector: {matchLabels: {tier: gold}}}, template: {metadata: {annotations: {a: b}}}}`),
	}, nil)
	require.Len(t, out.Left, 1)
	require.Equal(t, "match.selector", out.Left[0].Field)
	require.Contains(t, out.Left[0].Reason, "reads label tier, which podpatch-system/p/sets sets or removes")
	require.Len(t, out.Compiled, 1)
	require.Equal(t, "podpatch-system/p/sets", out.Compiled[0].Ref)
}

// TestGroups: one MAP per manager and role the compiled policies can select, its binding
// rejecting other Pods by the recognition labels and the excluded namespaces, a later profile
// leaving out the Pods an earlier one recognises, and each policy's selection a variable.
func TestGroups(t *testing.T) {
	out := compile(t, []string{
		doc("drivers", `{match: {managers: [spark], roles: [driver], clusters: ["prod-*"]}, template: {metadata: {labels: {a: b}}}}`),
		doc("flink", `{match: {managers: [flink]}, template: {spec: {nodeSelector: {pool: x}}}}`),
	}, []string{doc("mine", `{mode: default, match: {managers: [spark], roles: [driver]}, template: {metadata: {annotations: {n: "1"}}}}`)})
	require.Empty(t, out.Left)
	var names []string
	for _, g := range out.Groups {
		names = append(names, g.Policy.Name)
		require.Equal(t, g.Policy.Name, g.Binding.Spec.PolicyName)
		require.Equal(t, admissionregistrationv1.Ignore, *g.Policy.Spec.FailurePolicy)
		require.Equal(t, []string{"kube-system"}, g.Binding.Spec.MatchResources.NamespaceSelector.MatchExpressions[0].Values)
		require.Equal(t, ManagedBy, g.Policy.Labels[ManagedByLabel])
	}
	require.Equal(t, []string{"podpatch.spark.scheduler.pod", "podpatch.flink.scheduler.pod", "podpatch.flink.worker.pod"}, names)
	spark := out.Groups[0]
	require.Equal(t, []string{"podpatch-system/p/drivers", "team-a/p/mine"}, spark.Refs)
	require.Equal(t, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "spark-role", Operator: metav1.LabelSelectorOpIn, Values: []string{"driver"}}}}, spark.Binding.Spec.MatchResources.ObjectSelector)
	vars := map[string]string{}
	for _, v := range spark.Policy.Spec.Variables {
		vars[v.Name] = v.Expression
	}
	require.Contains(t, vars["p0"], `variables.clusterName.matches("^(?:prod-[^/]*)$")`)
	require.Contains(t, vars["p0"], `!variables.skipped`)
	// The shared variables, stated once before the policies' selections that read them.
	require.Contains(t, vars["skipped"], `"podpatch.io/skip" in object.metadata.labels`)
	require.Contains(t, vars["clusterName"], `object.metadata.labels["spark-app-name"]`)
	at := map[string]int{}
	for i, v := range spark.Policy.Spec.Variables {
		at[v.Name] = i
	}
	require.Less(t, at["skipped"], at["p0"])
	require.Less(t, at["clusterName"], at["p0"])
	require.Contains(t, vars["p1"], `request.namespace == "team-a"`)
	// Spark comes after Dask, Dask Gateway and Ray in recognition order: its MAP leaves their Pods out.
	require.Equal(t, "first-profile", spark.Policy.Spec.MatchConditions[0].Name)
	require.Contains(t, spark.Policy.Spec.MatchConditions[0].Expression, `"dask.org/component"`)
	// The provenance lists the selected policies in layer order (namespace default before platform merge).
	last := spark.Policy.Spec.Mutations[len(spark.Policy.Spec.Mutations)-1].JSONPatch.Expression
	require.Contains(t, last, `(variables.p1 ? ["team-a/p/mine"] : []) + (variables.p0 ? ["podpatch-system/p/drivers"] : [])`)
	flink := out.Groups[1]
	p0 := flink.Policy.Spec.Variables[slices.IndexFunc(flink.Policy.Spec.Variables, func(v admissionregistrationv1.Variable) bool { return v.Name == "p0" })]
	require.Contains(t, p0.Expression, "!variables.kueueMarked")
	require.Contains(t, p0.Expression, "!has(object.spec.runtimeClassName)")
	require.Equal(t, []string{guardKueue, guardRuntimeClass}, out.Compiled[1].Guards)
}

// TestPrecedence: each map key's chain puts the enforce layer first, then merges (namespace over
// platform), then the object, then the defaults in the webhook's fill order (namespace first,
// the last in application order first).
func TestPrecedence(t *testing.T) {
	out := compile(t, []string{
		doc("pd1", `{mode: default, priority: 1, template: {metadata: {labels: {k: pd1}}}}`),
		doc("pd0", `{mode: default, template: {metadata: {labels: {k: pd0}}}}`),
		doc("pm", `{mode: merge, template: {metadata: {labels: {k: pm}}}}`),
		doc("pe", `{mode: enforce, template: {metadata: {labels: {k: null}}}}`),
	}, []string{
		doc("nd", `{mode: default, template: {metadata: {labels: {k: nd}}}}`),
		doc("nm", `{mode: merge, template: {metadata: {labels: {k: nm}}}}`),
	})
	require.Empty(t, out.Left)
	g := out.Groups[0]
	vars := map[string]string{}
	for _, v := range g.Policy.Spec.Variables {
		vars[v.Name] = v.Expression
	}
	name := map[string]string{}
	for i, r := range g.Refs {
		name[r[strings.LastIndex(r, "/")+1:]] = "variables.p" + strconv.Itoa(i)
	}
	labels := g.Policy.Spec.Mutations[0].JSONPatch.Expression
	order := []string{name["pe"] + " ? (", name["nm"] + " ? [", name["pm"] + " ? [",
		`"k" in object.metadata.labels) ? [] :`, name["nd"] + " ? [", name["pd1"] + " ? [", name["pd0"] + " ? ["}
	at := 0
	for _, o := range order {
		i := strings.Index(labels[at:], o)
		require.GreaterOrEqual(t, i, 0, "%q after position %d in %s", o, at, labels)
		at += i + len(o)
	}
	require.Contains(t, labels, `[JSONPatch{op: "remove", path: "/metadata/labels/k"}]`)
}

// TestHostile: every string a policy holds reaches CEL quoted, and what exceeds a bound is
// left to the webhook, never generated.
func TestHostile(t *testing.T) {
	v := `a" + object.metadata.name + "\n` + "\u2028"
	out := compile(t, []string{doc("q", `{template: {metadata: {annotations: {example.com/a: `+strconv.Quote(v)+`}}}}`)}, nil)
	require.Empty(t, out.Left)
	e := out.Groups[0].Policy.Spec.Mutations[0].JSONPatch.Expression
	require.Contains(t, e, `path: "/metadata/annotations/example.com~1a", value: `+strconv.Quote(v))
	require.NotContains(t, e, `"a" + object.metadata.name`)

	s := set(t, []string{doc("long", `{template: {metadata: {annotations: {a: "`+strings.Repeat("x", 4000)+`"}}}}`)}, nil)
	small := Compile(s, policies.DefaultPlatformNamespace, Options{MaxExpression: 1000})
	require.Empty(t, small.Groups)
	require.Len(t, small.Left, 1)
	require.Contains(t, small.Left[0].Reason, "more than 1000 bytes of CEL")
	whole := Compile(s, policies.DefaultPlatformNamespace, Options{MaxPolicy: 2000})
	require.Empty(t, whole.Groups)
	require.Contains(t, whole.Left[0].Reason, "would take more than 2000 bytes of CEL")
}

// TestExamples: of manifests/examples, the pod parts of the families that compile compile, and
// every other part is listed with its reason.
func TestExamples(t *testing.T) {
	cms, err := policyfiles.ReadConfigMaps([]string{filepath.Join("..", "manifests", "examples")}, "default", nil)
	require.NoError(t, err)
	s, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(t, probs)
	out := Compile(s, policies.DefaultPlatformNamespace, Options{})
	var compiled []string
	for _, c := range out.Compiled {
		compiled = append(compiled, c.Ref)
	}
	require.Equal(t, []string{"podpatch-system/spark-spot/spot-executors", "podpatch-system/cost-center/cost-center"}, compiled)
	for _, l := range out.Left {
		require.NotEmpty(t, l.Reason, "%s %s", l.Ref, l.Field)
	}
	y, err := out.YAML(V1beta1)
	require.NoError(t, err)
	docs := strings.Split(string(y), "\n---\n")
	var p admissionregistrationv1beta1.MutatingAdmissionPolicy
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &p))
	require.Equal(t, "admissionregistration.k8s.io/v1beta1", p.APIVersion)
	require.Equal(t, "podpatch.dask.scheduler.pod", p.Name)
	require.True(t, strings.Contains(string(y), "# podpatch-system/gpu-workers/gpu-workers (Pod): left to the webhook: spec.containers[@main].resources: "),
		"gpu-workers' resources listed")
	_, err = out.YAML("v2")
	require.Error(t, err)
}

// TestAffinity: required node affinity compiles as the webhook ANDs it: into every term the Pod
// has, or as the Pod's one term; a default's requirement yields to a key the term constrains.
func TestAffinity(t *testing.T) {
	out := compile(t, []string{
		doc("d", `{mode: default, template: {spec: {affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [x]}]}]}}}}}}`),
		doc("m", `{mode: merge, template: {spec: {affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: NotIn, values: [n]}]}]}}}}}}`),
	}, nil)
	require.Empty(t, out.Left)
	require.Equal(t, []string{guardKueue}, out.Compiled[0].Guards)
	var affinity []string
	for _, m := range out.Groups[0].Policy.Spec.Mutations {
		if strings.Contains(m.JSONPatch.Expression, "nodeSelectorTerms") {
			affinity = append(affinity, m.JSONPatch.Expression)
		}
	}
	e := strings.Join(affinity, "\n")
	require.Contains(t, e, `.nodeSelectorTerms.transformList(ti, term, `)
	// the default's requirement is added to a term only where the term has no requirement on pool
	require.Contains(t, e, `(variables.affinityFill0 == 0 && !(has(term.matchExpressions) && term.matchExpressions.exists(x, x.key == "pool")))`)
	require.Contains(t, e, `path: "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution", value: {"nodeSelectorTerms": [{"matchExpressions": [`)
	require.Contains(t, e, `"matchFields": [`)
	var fill string
	for _, v := range out.Groups[0].Policy.Spec.Variables {
		if v.Name == "affinityFill0" {
			fill = v.Expression
		}
	}
	require.Equal(t, "variables.p0 ? 0 : -1", fill)
}

// TestEnv: env variables by container name, "@main" and "*": a merge's value takes the place of
// the container's source, "@main" is the manager's main container by its conventional names.
func TestEnv(t *testing.T) {
	out := compile(t, []string{
		doc("e", `{match: {managers: [spark]}, template: {spec: {containers: [{name: "@main", env: [{name: A, value: "1"}]}, {name: "*", env: [{name: B, value: "2"}]}]}}}`),
	}, nil)
	require.Empty(t, out.Left)
	g := out.Groups[0]
	require.Equal(t, "mainName", g.Policy.Spec.Variables[0].Name)
	require.Contains(t, g.Policy.Spec.Variables[0].Expression, `c.name in ["spark-kubernetes-driver", "spark-kubernetes-executor"]`)
	var e string
	for _, m := range g.Policy.Spec.Mutations {
		if strings.Contains(m.JSONPatch.Expression, "/env") {
			e = m.JSONPatch.Expression
		}
	}
	require.Contains(t, e, `object.spec.containers.transformList(ci, c, `)
	require.Contains(t, e, `c.name == variables.mainName`)
	require.Contains(t, e, `[JSONPatch{op: "remove", path: "/spec/containers/" + string(ci) + "/env" + "/" + string((has(c.env) ? c.env.map(e, e.name).indexOf("A") : -1)) + "/valueFrom"}]`)
	require.Contains(t, e, `"name": dyn("B")`)
	require.Contains(t, e, `.sortBy(x, int(x.at))`)
}

// TestScale: three hundred policies selecting Dask workers, each in a namespace of its own and
// writing the same label and env variable, give one MAP within the bounds.
func TestScale(t *testing.T) {
	var docs []string
	for i := range 300 {
		docs = append(docs, doc(fmt.Sprintf("p%d", i), fmt.Sprintf(`{mode: merge, match: {managers: [dask], roles: [worker], namespaces: [team-%d]},
  template: {metadata: {labels: {team-policy: p%d}}, spec: {containers: [{name: "*", env: [{name: TEAM, value: p%d}]}]}}}`, i, i, i)))
	}
	var cms []policies.SourcedConfigMap
	for i := 0; i < len(docs); i += 16 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: fmt.Sprintf("p%03d", i),
			Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": strings.Join(docs[i:min(i+16, len(docs))], "---\n")}}
		cms = append(cms, policies.SourcedConfigMap{File: cm.Name, ConfigMap: cm})
	}
	s, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(t, probs)
	out := Compile(s, policies.DefaultPlatformNamespace, Options{})
	// Every policy compiles or is listed; those that share a field beyond the expression bound
	// are listed with it.
	require.Len(t, out.Groups, 1)
	require.Equal(t, 300, len(out.Compiled)+len(out.Left))
	require.Greater(t, len(out.Compiled), 50)
	for _, l := range out.Left {
		require.Contains(t, l.Reason, "takes more than 65536 bytes of CEL")
	}
	total := 0
	for _, m := range out.Groups[0].Policy.Spec.Mutations {
		require.LessOrEqual(t, len(m.JSONPatch.Expression), DefaultMaxExpression)
		total += len(m.JSONPatch.Expression)
	}
	require.LessOrEqual(t, total, DefaultMaxPolicy)
	t.Logf("300 policies: %d compiled into %d mutations, %d bytes of CEL", len(out.Compiled), len(out.Groups[0].Policy.Spec.Mutations), total)
}

// TestLabelKeysGuard: a policy that sets a label skips the Pods whose pod (anti-)affinity terms
// or topology spread constraints name it in matchLabelKeys or mismatchLabelKeys: the API server
// merges the Pod's label into their selectors, which may then conflict (TestNativeValidityOracle
// found such Pods refused). One that only removes labels keeps them.
func TestLabelKeysGuard(t *testing.T) {
	out := compile(t, []string{
		doc("sets", `{mode: merge, template: {metadata: {labels: {team: a, tier: b, gone: null}}}}`),
		doc("removes", `{mode: merge, template: {metadata: {labels: {old: null}}}}`),
	}, nil)
	require.Empty(t, out.Left)
	require.Contains(t, out.Compiled[0].Guards, guardLabelKeys)
	require.NotContains(t, out.Compiled[1].Guards, guardLabelKeys)
	for _, g := range out.Groups {
		names := map[string]int{}
		vars := map[string]string{}
		for i, v := range g.Policy.Spec.Variables {
			names[v.Name], vars[v.Name] = i, v.Expression
		}
		require.Less(t, names[labelKeysNamed], names["p0"], "%s: defined before it is read", g.Policy.Name)
		require.Contains(t, vars["p0"], `!variables.labelKeysNamed.exists(l, l.exists(k, k in ["team", "tier"]))`)
		require.NotContains(t, vars[labelKeysNamed], "flatten", "1.34's MAPs have no list library")
		require.NotContains(t, vars["p1"], labelKeysNamed)
		for _, read := range []string{
			"object.spec.topologySpreadConstraints.map(c, has(c.matchLabelKeys) ? c.matchLabelKeys : [])",
			"object.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.map(t, (has(t.matchLabelKeys)",
			"(has(t.mismatchLabelKeys) ? t.mismatchLabelKeys : [])",
			"object.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.map(w, (has(w.podAffinityTerm.matchLabelKeys)",
		} {
			require.Contains(t, vars[labelKeysNamed], read)
		}
	}
}

// TestAnnotationsRoom: a group that may add annotations skips the Pods whose own leave no room
// for them within the API server's 256 KiB, and all Pods, those without annotations too, when
// its policies' alone exceed it (TestNativeValidityOracle found such Pods refused).
func TestAnnotationsRoom(t *testing.T) {
	big := strings.Repeat("x", 30000)
	var docs []string
	for i := range 9 {
		docs = append(docs, doc(fmt.Sprintf("big-%d", i), fmt.Sprintf(`{match: {managers: [dask], roles: [worker]}, template: {metadata: {annotations: {example.com/big-%d: %s}}}}`, i, big)))
	}
	for _, c := range []struct {
		name string
		docs []string
		room bool // a Pod without annotations has room
	}{{"within the bound", docs[:8], true}, {"beyond the bound", docs, false}} {
		t.Run(c.name, func(t *testing.T) {
			out := compile(t, c.docs, nil)
			require.Empty(t, out.Left)
			require.Len(t, out.Groups, 1)
			var cond string
			for _, mc := range out.Groups[0].Policy.Spec.MatchConditions {
				if mc.Name == "annotations-room" {
					cond = mc.Expression
				}
			}
			prefix := "(has(object.metadata.annotations) ? object.metadata.annotations.map(k, size(bytes(k)) + size(bytes(object.metadata.annotations[k]))).sum() : 0) <= "
			require.True(t, strings.HasPrefix(cond, prefix), cond)
			bound, err := strconv.Atoi(strings.TrimPrefix(cond, prefix))
			require.NoError(t, err)
			require.Equal(t, c.room, bound >= 0, "room left: %d", bound)
		})
	}
}

// TestListLibrary: for Kubernetes 1.34, whose new CEL expressions have no list library, the
// families whose appends need it (tolerations, required node affinity, env variables) are left
// to the webhook with the reason, and the string maps still compile; from 1.35 all compile.
func TestListLibrary(t *testing.T) {
	s := set(t, []string{
		doc("maps", `{match: {managers: [dask]}, template: {metadata: {labels: {a: b}}, spec: {nodeSelector: {pool: x}}}}`),
		doc("tol", `{match: {managers: [dask]}, template: {spec: {tolerations: [{key: k, operator: Exists}]}}}`),
		doc("aff", `{match: {managers: [ray]}, template: {spec: {affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [x]}]}]}}}}}}`),
		doc("env", `{match: {managers: [spark]}, template: {spec: {containers: [{name: "*", env: [{name: A, value: b}]}]}}}`),
	}, nil)
	for _, minor := range []int{34, 35, 0} {
		out := Compile(s, policies.DefaultPlatformNamespace, Options{Minor: minor})
		var left []string
		for _, l := range out.Left {
			require.Equal(t, reasonLists, l.Reason)
			left = append(left, l.Ref+" "+l.Field)
		}
		if minor == 34 {
			require.ElementsMatch(t, []string{"podpatch-system/p/tol spec.tolerations",
				"podpatch-system/p/aff spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
				"podpatch-system/p/env spec.containers[*].env"}, left)
			require.Len(t, out.Compiled, 1)
			for _, g := range out.Groups {
				y, err := Output{Groups: []Group{g}}.YAML(V1beta1)
				require.NoError(t, err)
				require.NotContains(t, string(y), "flatten")
				require.NotContains(t, string(y), "sortBy")
			}
			continue
		}
		require.Empty(t, left, "1.%d", minor)
		require.Len(t, out.Compiled, 4)
	}
}

// TestHybridConflicts: a compiled policy that contends with a policy left to the webhook (both
// append to a list, or both fill a map key as defaults), on Pods both may select, is left to the
// webhook too (the MAPs run first: the webhook would find it written and order the appends or
// fill the default otherwise), and so on down the chain; policies that cannot select the same
// Pods (other literal clusters, other managers), write other keys or set a key as a merge stay
// compiled.
func TestHybridConflicts(t *testing.T) {
	out := compile(t, []string{
		// left to the webhook for its securityContext; writes the tolerations and label a
		doc("w", `{mode: default, match: {managers: [dask], clusters: [c1]}, template: {metadata: {labels: {a: x}}, spec: {securityContext: {fsGroup: 1}, tolerations: [{key: k, operator: Exists}]}}}`),
		doc("tol", `{match: {managers: [dask]}, template: {spec: {tolerations: [{key: j, operator: Exists}]}}}`),
		doc("chained", `{match: {managers: [dask]}, template: {spec: {tolerations: [{key: i, operator: Exists}]}}}`),
		doc("label", `{mode: default, match: {managers: [dask], clusters: [c1, c3]}, template: {metadata: {labels: {a: y, other: z}}}}`),
		doc("label-b", `{match: {managers: [dask]}, template: {metadata: {labels: {b: y}}}}`),
		// a merge's value stands whether the webhook finds it written or writes it: no contention
		doc("label-merge", `{mode: merge, match: {managers: [dask]}, template: {metadata: {labels: {a: m}}}}`),
		doc("other-cluster", `{match: {managers: [dask], clusters: [c2]}, template: {metadata: {labels: {a: z}}}}`),
		doc("other-manager", `{match: {managers: [ray]}, template: {metadata: {labels: {a: z}}}}`),
		doc("sidecar", `{match: {managers: [spark]}, template: {spec: {containers: [{name: side, image: busybox, env: [{name: X, value: y}]}]}}}`),
		doc("env", `{match: {managers: [spark]}, template: {spec: {containers: [{name: "*", env: [{name: A, value: b}]}]}}}`),
	}, nil)
	left := map[string]string{}
	for _, l := range out.Left {
		if strings.Contains(l.Reason, "left to the webhook, writes it too") {
			left[l.Ref] = l.Field
			require.Contains(t, l.Reason, "podpatch-system/p/")
		}
	}
	require.Equal(t, map[string]string{
		"podpatch-system/p/tol":     "spec.tolerations",
		"podpatch-system/p/chained": "spec.tolerations",
		"podpatch-system/p/label":   "metadata.labels.a",
		"podpatch-system/p/env":     "spec.containers[*].env",
	}, left)
	var compiled []string
	for _, c := range out.Compiled {
		compiled = append(compiled, c.Ref)
	}
	require.ElementsMatch(t, []string{"podpatch-system/p/label-b", "podpatch-system/p/label-merge", "podpatch-system/p/other-cluster", "podpatch-system/p/other-manager"}, compiled)
}

// TestAppliedRoom: every group writes podpatch.io/applied, so every MAP skips the Pods whose
// annotations leave no room for it, those of a group that writes no annotation too
// (TestNativeValidityOracle found a Pod 1 byte below the bound refused).
func TestAppliedRoom(t *testing.T) {
	out := compile(t, []string{doc("l", `{match: {managers: [dask], roles: [worker]}, template: {metadata: {labels: {a: b}}}}`)}, nil)
	require.Len(t, out.Groups, 1)
	var room string
	for _, c := range out.Groups[0].Policy.Spec.MatchConditions {
		if c.Name == "annotations-room" {
			room = c.Expression
		}
	}
	require.True(t, strings.HasSuffix(room, fmt.Sprintf(" <= %d", maxAnnotations-len(policies.AppliedAnnotation)-len("podpatch-system/p/l")-1)), room)
}

// TestLiteralGlobs: a match list without wildcards is a list the name is in (cheaper for the API
// server than a regular expression), the names that can never match left out; one with a
// wildcard stays a regular expression.
func TestLiteralGlobs(t *testing.T) {
	out := compile(t, []string{
		doc("lit", `{match: {managers: [dask], roles: [worker], namespaces: [team-1, team-2, team-1]}, template: {metadata: {labels: {a: b}}}}`),
		doc("glob", `{match: {managers: [dask], roles: [worker], clusters: ["gpu-*"]}, template: {metadata: {labels: {c: d}}}}`),
	}, nil)
	require.Len(t, out.Groups, 1)
	vars := map[string]string{}
	for _, v := range out.Groups[0].Policy.Spec.Variables {
		vars[v.Name] = v.Expression
	}
	require.Contains(t, vars["p0"], `(request.namespace in ["team-1", "team-2"])`)
	require.NotContains(t, vars["p0"], "matches(")
	require.Contains(t, vars["p1"], `.matches("^(?:gpu-[^/]*)$")`)
}
