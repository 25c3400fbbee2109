package lint

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// selPolicy is a PodTemplatePatch in JSON: a mode, a selector (matchExpressions) and labels it
// writes (nil removes).
func selPolicy(t testing.TB, name string, mode policies.Mode, exprs []map[string]any, writes map[string]any) string {
	t.Helper()
	spec := map[string]any{"mode": string(mode), "template": map[string]any{"metadata": map[string]any{"labels": writes}}}
	if len(exprs) > 0 {
		spec["match"] = map[string]any{"selector": map[string]any{"matchExpressions": exprs}}
	}
	b, err := json.Marshal(map[string]any{"apiVersion": policies.APIVersion, "kind": policies.DocumentKind, "metadata": map[string]any{"name": name}, "spec": spec})
	require.NoError(t, err)
	return string(b)
}

func expr(key, op string, values ...string) map[string]any {
	e := map[string]any{"key": key, "operator": op}
	if len(values) > 0 {
		e["values"] = values
	}
	return e
}

// compileSelection parses ConfigMaps (namespace -> data key -> document) into a Set.
func compileSelection(t testing.TB, cms map[string]map[string]string) (*policies.Set, []policies.SourcedConfigMap) {
	t.Helper()
	var sourced []policies.SourcedConfigMap
	for ns, data := range cms {
		cm := hostileConfigMap(ns, data)
		sourced = append(sourced, policies.SourcedConfigMap{File: ns + ".yaml", ConfigMap: cm})
	}
	set, probs := policies.Compile(sourced, policies.DefaultOptions())
	require.Empty(t, probs, "%s", policies.ProblemLines(probs))
	return set, sourced
}

// TestSelectionProblems is the table of the oscillation report: what lint must report, and the
// neighbours it must not.
func TestSelectionProblems(t *testing.T) {
	P := policies.DefaultPlatformNamespace
	chain := func(n int) map[string]string {
		data := map[string]string{}
		for i := range n {
			var exprs []map[string]any
			if i > 0 {
				exprs = []map[string]any{expr(fmt.Sprintf("step-%d", i-1), "Exists")}
			}
			data[fmt.Sprintf("c%d.yaml", i)] = selPolicy(t, fmt.Sprintf("c%d", i), policies.ModeMerge, exprs, map[string]any{fmt.Sprintf("step-%d", i): "1"})
		}
		return data
	}
	for _, tc := range []struct {
		name string
		cms  map[string]map[string]string
		want []string // substrings of the report, in order; nil: none
	}{
		{"a policy that unselects itself", map[string]map[string]string{P: {
			"flip.yaml": selPolicy(t, "flip", policies.ModeMerge, []map[string]any{expr("team", "DoesNotExist")}, map[string]any{"team": "default"}),
		}}, []string{"P.yaml: podpatch-system/hostile: flip.yaml: flip: spec.match.selector: Forbidden: the selection of podpatch-system/hostile/flip can oscillate: podpatch-system/hostile/flip sets label team=default on pods, which makes podpatch-system/hostile/flip stop matching"}},
		{"a policy that keeps itself selected", map[string]map[string]string{P: {
			"keep.yaml": selPolicy(t, "keep", policies.ModeMerge, []map[string]any{expr("tier", "In", "gpu", "tpu")}, map[string]any{"tier": "gpu"}),
		}}, nil},
		{"a policy that fills its own label, without a selector", map[string]map[string]string{P: {
			"fill.yaml": selPolicy(t, "fill", policies.ModeDefault, nil, map[string]any{"team": "default"}),
		}}, nil},
		{"two policies, one switching the other off", map[string]map[string]string{P: {
			"a.yaml": selPolicy(t, "a", policies.ModeMerge, []map[string]any{expr("phase-b", "DoesNotExist")}, map[string]any{"phase-a": "1"}),
			"b.yaml": selPolicy(t, "b", policies.ModeMerge, []map[string]any{expr("phase-a", "In", "1")}, map[string]any{"phase-b": "1"}),
		}}, []string{"a.yaml: a: spec.match.selector: Forbidden: the selection of podpatch-system/hostile/a, podpatch-system/hostile/b can oscillate: ",
			"sets label phase-b=1 on pods, which makes podpatch-system/hostile/a stop matching"}},
		{"two policies switching each other off", map[string]map[string]string{P: {
			"a.yaml": selPolicy(t, "a", policies.ModeMerge, []map[string]any{expr("phase-b", "DoesNotExist")}, map[string]any{"phase-a": "1"}),
			"b.yaml": selPolicy(t, "b", policies.ModeMerge, []map[string]any{expr("phase-a", "DoesNotExist")}, map[string]any{"phase-b": "1"}),
		}}, []string{"can oscillate"}},
		{"two policies keeping each other selected", map[string]map[string]string{P: {
			"a.yaml": selPolicy(t, "a", policies.ModeMerge, []map[string]any{expr("phase-b", "Exists")}, map[string]any{"phase-a": "1"}),
			"b.yaml": selPolicy(t, "b", policies.ModeMerge, []map[string]any{expr("phase-a", "Exists")}, map[string]any{"phase-b": "1"}),
		}}, nil},
		{"a label removed that a selector needs", map[string]map[string]string{P: {
			"a.yaml": selPolicy(t, "a", policies.ModeMerge, []map[string]any{expr("spot", "Exists")}, map[string]any{"spot": nil}),
		}}, []string{"removes label spot on pods, which makes podpatch-system/hostile/a stop matching"}},
		{"policies of different managers never meet", map[string]map[string]string{P: {
			"a.yaml": `{"apiVersion": "podpatch.io/v1alpha1", "kind": "PodTemplatePatch", "metadata": {"name": "a"}, "spec": {"match": {"managers": ["spark"], "selector": {"matchExpressions": [{"key": "phase-b", "operator": "DoesNotExist"}]}}, "template": {"metadata": {"labels": {"phase-a": "1"}}}}}`,
			"b.yaml": `{"apiVersion": "podpatch.io/v1alpha1", "kind": "PodTemplatePatch", "metadata": {"name": "b"}, "spec": {"match": {"managers": ["dask"], "selector": {"matchLabels": {"phase-a": "1"}}}, "template": {"metadata": {"labels": {"phase-b": "1"}}}}}`,
		}}, nil},
		{"a chain within the rounds", map[string]map[string]string{P: chain(policies.MaxSelectionRounds)}, nil},
		{"a chain beyond the rounds", map[string]map[string]string{P: chain(policies.MaxSelectionRounds + 1)},
			[]string{"c0.yaml: c0: spec.match.selector: Forbidden: a chain of 5 policies, each selected by a label the one before writes"}},
		{"a namespace policy switching the platform's off", map[string]map[string]string{
			P:        {"a.yaml": selPolicy(t, "a", policies.ModeMerge, []map[string]any{expr("phase-b", "DoesNotExist")}, map[string]any{"phase-a": "1"})},
			"team-a": {"b.yaml": selPolicy(t, "b", policies.ModeMerge, []map[string]any{expr("phase-a", "In", "1")}, map[string]any{"phase-b": "1"})},
			"team-b": {"c.yaml": selPolicy(t, "c", policies.ModeMerge, []map[string]any{expr("other", "In", "1")}, map[string]any{"phase-b": "1"})},
		}, []string{"team-a.yaml: team-a/hostile: b.yaml: b: spec.match.selector: Forbidden: the selection of podpatch-system/hostile/a, team-a/hostile/b can oscillate", "then leaves the namespace's policies out"}},
		{"a positive loop after a negative edge", map[string]map[string]string{P: {
			"a.yaml": selPolicy(t, "a", policies.ModeMerge, []map[string]any{expr("phase-b", "Exists"), expr("off", "DoesNotExist")}, map[string]any{"phase-a": "1"}),
			"b.yaml": selPolicy(t, "b", policies.ModeMerge, []map[string]any{expr("phase-a", "Exists")}, map[string]any{"phase-b": "1"}),
			"c.yaml": selPolicy(t, "c", policies.ModeMerge, nil, map[string]any{"off": "1"}),
		}}, []string{"can oscillate", "a policy before them can switch one of them off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, cms := compileSelection(t, tc.cms)
			got := policies.ProblemLines(SelectionProblems(set, cms))
			if tc.want == nil {
				assert.Empty(t, got)
				return
			}
			require.Len(t, strings.Split(got, "\n"), 1, "one report per set of policies: %s", got)
			at := 0
			for _, w := range tc.want {
				i := strings.Index(got[at:], strings.ReplaceAll(w, "P.yaml", P+".yaml"))
				require.GreaterOrEqual(t, i, 0, "want %q in\n%s", w, got)
				at += i
			}
		})
	}
}

// diverges reports whether applying the set to the object found no fixed point: an error, or
// the warning of a fallback.
func diverges(t testing.TB, s *policies.Set, obj []byte, ns string) (bool, policies.Result) {
	t.Helper()
	res, err := s.Apply(policies.Input{Kind: profiles.KindPod, Object: obj, Namespace: ns})
	if errors.Is(err, policies.ErrSelectionDiverges) {
		return true, res
	}
	require.NoError(t, err)
	for _, w := range res.Warnings {
		if strings.Contains(w, policies.ErrSelectionDiverges.Error()) {
			return true, res
		}
	}
	return false, res
}

// TestSelectionProblemsGenerated checks the report against the engine on generated policy
// sets: label writes and selectors over three keys and two values, every mode, platform and
// namespace policies. Where lint reports nothing, no object (every combination of the three
// labels) may fail to reach a fixed point, and the result is idempotent: the report is sound.
// Where it reports, it says how often some object really diverges (its precision).
func TestSelectionProblemsGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	keys, values := []string{"ka", "kb", "kc"}, []string{"1", "2"}
	ops := []string{"In", "NotIn", "Exists", "DoesNotExist"}
	randomPolicy := func(name string, namespaced bool) string {
		modes := []policies.Mode{policies.ModeDefault, policies.ModeMerge, policies.ModeEnforce}
		if namespaced {
			modes = modes[:2]
		}
		mode := modes[r.IntN(len(modes))]
		var exprs []map[string]any
		for _, k := range keys {
			if r.IntN(3) == 0 {
				op := ops[r.IntN(len(ops))]
				if op == "In" || op == "NotIn" {
					exprs = append(exprs, expr(k, op, values[r.IntN(2)]))
				} else {
					exprs = append(exprs, expr(k, op))
				}
			}
		}
		writes := map[string]any{}
		for _, k := range keys {
			if r.IntN(3) == 0 {
				if mode != policies.ModeDefault && r.IntN(4) == 0 {
					writes[k] = nil
				} else {
					writes[k] = values[r.IntN(2)]
				}
			}
		}
		if len(writes) == 0 {
			writes[keys[r.IntN(3)]] = values[r.IntN(2)]
		}
		return selPolicy(t, name, mode, exprs, writes)
	}
	var objects [][]byte
	for i := range 27 {
		ls := map[string]any{"dask.org/component": "worker", "dask.org/cluster-name": "c"}
		for j, k := range keys {
			if v := (i / []int{1, 3, 9}[j]) % 3; v > 0 {
				ls[k] = values[v-1]
			}
		}
		b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "w", "namespace": "team-a", "labels": ls},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "worker", "image": "x"}}}})
		require.NoError(t, err)
		objects = append(objects, b)
	}
	reported, reportedDiverging, quiet := 0, 0, 0
	for i := range 400 {
		cms := map[string]map[string]string{policies.DefaultPlatformNamespace: {}}
		for j := range 1 + r.IntN(4) {
			cms[policies.DefaultPlatformNamespace][fmt.Sprintf("p%d.yaml", j)] = randomPolicy(fmt.Sprintf("p%d", j), false)
		}
		if r.IntN(2) == 0 {
			cms["team-a"] = map[string]string{}
			for j := range 1 + r.IntN(2) {
				cms["team-a"][fmt.Sprintf("n%d.yaml", j)] = randomPolicy(fmt.Sprintf("n%d", j), true)
			}
		}
		set, sourced := compileSelection(t, cms)
		report := SelectionProblems(set, sourced)
		anyDiverges := false
		for _, obj := range objects {
			// In the namespace of the namespace policies, and in one without any.
			for _, ns := range []string{"team-a", "team-z"} {
				obj := []byte(strings.Replace(string(obj), `"namespace":"team-a"`, `"namespace":"`+ns+`"`, 1))
				d, res := diverges(t, set, obj, ns)
				anyDiverges = anyDiverges || d
				if len(report) == 0 {
					require.False(t, d, "set %d: lint reported nothing, yet %s diverges; policies:\n%v", i, obj, cms)
					if res.Changed {
						again, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: res.Object, Namespace: ns})
						require.NoError(t, err)
						require.JSONEq(t, string(res.Object), string(again.Object), "set %d: apply twice = apply once; policies:\n%v", i, cms)
					}
				}
			}
		}
		if len(report) > 0 && !anyDiverges && testing.Verbose() && reported-reportedDiverging < 3 {
			t.Logf("reported, never diverges: %v\n%s", cms, policies.ProblemLines(report))
		}
		if len(report) > 0 {
			reported++
			if anyDiverges {
				reportedDiverging++
			}
		} else {
			quiet++
		}
	}
	t.Logf("generated sets: %d without a report (none diverged), %d reported, of which %d diverge on some object", quiet, reported, reportedDiverging)
	require.Positive(t, reported)
	require.Positive(t, quiet)
}

// TestDivergingSelectionKeepsEnforce: when the platform's own selectors oscillate, admission
// still applies its enforce policies (reference §3, §8: enforce is never dropped silently), with a
// warning, and re-admitting the result changes nothing; when enforce policies oscillate among
// themselves, those selected on the object as it came in are applied once.
func TestDivergingSelectionKeepsEnforce(t *testing.T) {
	pod := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team-a","labels":{"dask.org/component":"worker","dask.org/cluster-name":"c"}},"spec":{"containers":[{"name":"worker","image":"x"}]}}`)
	oscillating := map[string]string{
		"a.yaml": selPolicy(t, "a", policies.ModeMerge, []map[string]any{expr("phase-b", "DoesNotExist")}, map[string]any{"phase-a": "1"}),
		"b.yaml": selPolicy(t, "b", policies.ModeMerge, []map[string]any{expr("phase-a", "In", "1")}, map[string]any{"phase-b": "1"}),
		"c.yaml": selPolicy(t, "c", policies.ModeEnforce, nil, map[string]any{"cost-center": "ml"}),
	}
	t.Run("platform merge policies oscillate", func(t *testing.T) {
		set, _ := compileSelection(t, map[string]map[string]string{policies.DefaultPlatformNamespace: oscillating})
		res, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: pod})
		require.NoError(t, err)
		require.True(t, res.Changed)
		require.Len(t, res.Applied, 1)
		assert.Equal(t, "podpatch-system/hostile/c", res.Applied[0].Ref)
		assert.Contains(t, string(res.Object), `"cost-center":"ml"`)
		assert.NotContains(t, string(res.Object), `phase-`)
		require.Len(t, res.Warnings, 1)
		assert.Contains(t, res.Warnings[0], "only the platform's enforce policies applied")
		again, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: res.Object})
		require.NoError(t, err)
		assert.JSONEq(t, string(res.Object), string(again.Object))

		patched, err := set.Patch(policies.Input{Kind: profiles.KindPod, Object: pod})
		require.NoError(t, err)
		assert.Equal(t, res.Patch, patched.Patch, "the webhook takes the same path")
	})
	t.Run("with namespace policies too", func(t *testing.T) {
		set, _ := compileSelection(t, map[string]map[string]string{policies.DefaultPlatformNamespace: oscillating,
			"team-a": {"n.yaml": selPolicy(t, "n", policies.ModeMerge, nil, map[string]any{"team": "a"})}})
		res, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: pod, Namespace: "team-a"})
		require.NoError(t, err)
		require.Len(t, res.Applied, 1)
		assert.Equal(t, "podpatch-system/hostile/c", res.Applied[0].Ref)
		assert.Contains(t, string(res.Object), `"cost-center":"ml"`)
	})
	t.Run("enforce policies oscillate", func(t *testing.T) {
		set, _ := compileSelection(t, map[string]map[string]string{policies.DefaultPlatformNamespace: {
			"flip.yaml": selPolicy(t, "flip", policies.ModeEnforce, []map[string]any{expr("flip", "DoesNotExist")}, map[string]any{"flip": "on"}),
			"c.yaml":    selPolicy(t, "c", policies.ModeEnforce, nil, map[string]any{"cost-center": "ml"}),
		}})
		res, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: pod})
		require.NoError(t, err)
		require.Len(t, res.Applied, 2)
		assert.Contains(t, string(res.Object), `"cost-center":"ml"`)
		assert.Contains(t, string(res.Object), `"flip":"on"`)
		require.Len(t, res.Warnings, 1)
	})
	t.Run("no enforce policy: not patched", func(t *testing.T) {
		set, _ := compileSelection(t, map[string]map[string]string{policies.DefaultPlatformNamespace: {"a.yaml": oscillating["a.yaml"], "b.yaml": oscillating["b.yaml"]}})
		_, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: pod})
		require.ErrorIs(t, err, policies.ErrSelectionDiverges)
	})
}

// BenchmarkSelectionProblems measures the report on a large estate: 208 platform policies in
// 13 ConfigMaps and 1000 namespaces of 3 policies, selecting on and writing 50 label keys.
func BenchmarkSelectionProblems(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 9))
	key := func() string { return fmt.Sprintf("k%d", r.IntN(50)) }
	var sourced []policies.SourcedConfigMap
	add := func(ns, name string, data map[string]string) {
		cm := hostileConfigMap(ns, data)
		cm.Name = name
		sourced = append(sourced, policies.SourcedConfigMap{File: name + ".yaml", ConfigMap: cm})
	}
	for c := range 13 {
		data := map[string]string{}
		for i := range 16 {
			data[fmt.Sprintf("p%d.yaml", i)] = selPolicy(b, fmt.Sprintf("p%d", i), policies.ModeMerge,
				[]map[string]any{expr(key(), "In", "1")}, map[string]any{key(): "2"})
		}
		add(policies.DefaultPlatformNamespace, fmt.Sprintf("platform-%d", c), data)
	}
	for n := range 1000 {
		data := map[string]string{}
		for i := range 3 {
			data[fmt.Sprintf("n%d.yaml", i)] = selPolicy(b, fmt.Sprintf("n%d", i), policies.ModeMerge,
				[]map[string]any{expr(key(), "Exists")}, map[string]any{key(): "1"})
		}
		add(fmt.Sprintf("team-%d", n), "team", data)
	}
	set, probs := policies.Compile(sourced, policies.DefaultOptions())
	require.Empty(b, probs)
	b.ResetTimer()
	for b.Loop() {
		_ = SelectionProblems(set, sourced)
	}
}

// hostileConfigMap is a policy ConfigMap named hostile in a namespace (as the engine's tests make them).
func hostileConfigMap(ns string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: ns, Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data:       data,
	}
}
