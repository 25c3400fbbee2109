package policies

// The adversarial suite of reference §3 "Limits": every class of hostile input, in several shapes,
// must end in a clear error naming the limit or in bounded work — asserted through the limits
// and work counters, never through wall-clock time.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/internal/hostiletest"
	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
)

// policyConfigMap wraps data keys into a policy ConfigMap of a namespace.
func policyConfigMap(ns string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: ns, Labels: map[string]string{PolicyLabel: "true"}},
		Data:       data,
	}
}

// problemText parses one data key in a namespace and returns every problem, one per line.
func problemText(t *testing.T, ns, text string) string {
	t.Helper()
	ps, probs := ParseConfigMap(policyConfigMap(ns, map[string]string{"p.yaml": text}), DefaultOptions())
	require.NotEmpty(t, probs, "want problems, got %d policies", len(ps))
	require.Nil(t, ps)
	return probs.Error()
}

const docHead = "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p}\n"

// aliasBomb builds a YAML billion-laughs document: a string, then levels of lists (or maps) of
// `fanout` aliases of the level below, padded with plain nodes so that go-yaml's alias/node
// ratio check would not stop it.
func aliasBomb(levels, fanout, padding int, inMaps bool) string {
	var b strings.Builder
	b.WriteString(docHead + "spec:\n  template:\n    metadata:\n      annotations:\n")
	fmt.Fprintf(&b, "        l0: &l0 %q\n", strings.Repeat("x", 1024))
	for l := 1; l <= levels; l++ {
		items := make([]string, fanout)
		for i := range items {
			if inMaps {
				items[i] = fmt.Sprintf("k%d: *l%d", i, l-1)
			} else {
				items[i] = fmt.Sprintf("*l%d", l-1)
			}
		}
		if inMaps {
			fmt.Fprintf(&b, "        l%d: &l%d {%s}\n", l, l, strings.Join(items, ", "))
		} else {
			fmt.Fprintf(&b, "        l%d: &l%d [%s]\n", l, l, strings.Join(items, ", "))
		}
	}
	for i := range padding {
		fmt.Fprintf(&b, "        pad%d: x\n", i)
	}
	return b.String()
}

func TestAliasBombsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		text    string
		padding int
	}{
		{name: "sequences", text: aliasBomb(4, 20, 0, false)},
		{name: "sequences padded", text: aliasBomb(4, 20, 4000, false)},
		{name: "mappings", text: aliasBomb(4, 20, 0, true)},
		{name: "mappings padded", text: aliasBomb(4, 20, 4000, true)},
		{name: "a single alias", text: docHead + "spec:\n  template:\n    metadata:\n      labels: &l {a: b}\n      annotations: *l\n"},
		{name: "an anchor alone", text: docHead + "spec:\n  template:\n    metadata:\n      labels: &l {a: b}\n"},
		{name: "merge key", text: docHead + "spec:\n  template:\n    metadata:\n      labels: &l {a: b}\n      annotations: {<<: *l}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problemText(t, "team-a", tc.text)
			require.Contains(t, got, "anchors and aliases are not accepted")
			require.Contains(t, got, "p.yaml")
		})
	}
	// The same bomb in the file around the ConfigMap, and in an object given to render.
	file := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: &l {podpatch.io/policy: \"true\"}, annotations: *l}\ndata: {}\n"
	_, err := SplitDocuments(strings.NewReader(file))
	require.ErrorContains(t, err, "anchors and aliases are not accepted")
}

func TestNestingIsBounded(t *testing.T) {
	deepFlow := docHead + "spec:\n  template:\n    metadata:\n      annotations: {a: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "}\n"
	require.Contains(t, problemText(t, "team-a", deepFlow), "nested deeper than 64 levels")

	var block strings.Builder
	block.WriteString(docHead + "spec:\n")
	for i := range 100 {
		fmt.Fprintf(&block, "%s  k%d:\n", strings.Repeat("  ", i), i)
	}
	require.Contains(t, problemText(t, "team-a", block.String()), "nested deeper than 64 levels")

	deepJSON := `{"a":` + strings.Repeat(`[`, 100000) + strings.Repeat(`]`, 100000) + `}`
	_, err := SplitDocuments(strings.NewReader(deepJSON))
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, "nested deeper than 64 levels")
}

func TestSizesAreBounded(t *testing.T) {
	big := docHead + "spec:\n  template:\n    metadata:\n      annotations: {a: " + strings.Repeat("x", MaxConfigMapBytes) + "}\n"
	_, probs := ParseConfigMap(policyConfigMap("team-a", map[string]string{"p.yaml": big}), DefaultOptions())
	require.Len(t, probs, 1)
	require.Contains(t, probs.Error(), "data: Too long: may not be more than 1048576 bytes")

	policy := docHead + "spec:\n  template:\n    metadata:\n      annotations: {a: " + strings.Repeat("x", maxPolicyBytes) + "}\n"
	require.Contains(t, problemText(t, DefaultPlatformNamespace, policy), fmt.Sprintf("p.yaml: #1: -: Too long: may not be more than %d bytes", maxPolicyBytes))

	var docs strings.Builder
	for i := range maxDocuments + 1 {
		fmt.Fprintf(&docs, "---\napiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p%d}\nspec: {template: {metadata: {labels: {a: b}}}}\n", i)
	}
	require.Contains(t, problemText(t, "team-a", docs.String()), fmt.Sprintf("data: Too many: %d: must have at most %d items", maxDocuments+1, maxDocuments))
}

// listPolicy is a namespace policy setting n items of one list.
func listPolicy(n int, item func(i int) string, at string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = item(i)
	}
	return docHead + "spec:\n  template:\n    spec:\n      " + strings.ReplaceAll(at, "LIST", "["+strings.Join(items, ", ")+"]") + "\n"
}

func TestPolicyListsAndStringsAreBounded(t *testing.T) {
	n := MaxListItems + 1
	for _, tc := range []struct {
		name, at string
		item     func(i int) string
	}{
		{"tolerations", "tolerations: LIST", func(i int) string { return fmt.Sprintf("{key: k%d, operator: Exists}", i) }},
		{"env", "containers: [{name: '*', env: LIST}]", func(i int) string { return fmt.Sprintf("{name: E%d, value: v}", i) }},
		{"containers", "containers: LIST", func(i int) string { return fmt.Sprintf("{name: c%d, image: x}", i) }},
		{"volumes", "volumes: LIST", func(i int) string { return fmt.Sprintf("{name: v%d, emptyDir: {}}", i) }},
		{"volumeMounts", "containers: [{name: '*', volumeMounts: LIST}]", func(i int) string { return fmt.Sprintf("{name: v, mountPath: /m%d}", i) }},
		{"ports", "containers: [{name: '*', ports: LIST}]", func(i int) string { return fmt.Sprintf("{containerPort: %d}", i+1) }},
		{"topologySpreadConstraints", "topologySpreadConstraints: LIST", func(i int) string {
			return fmt.Sprintf("{topologyKey: k%d, whenUnsatisfiable: DoNotSchedule, maxSkew: 1}", i)
		}},
		{"node requirements", "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: LIST}]}}}",
			func(i int) string { return fmt.Sprintf("{key: k%d, operator: Exists}", i) }},
		{"preferred terms", "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: LIST}}",
			func(i int) string {
				return fmt.Sprintf("{weight: 1, preference: {matchExpressions: [{key: k%d, operator: Exists}]}}", i)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problemText(t, DefaultPlatformNamespace, listPolicy(n, tc.item, tc.at))
			require.Contains(t, got, fmt.Sprintf("Too many: %d: must have at most %d items", MaxListItems+1, MaxListItems))
			ps, probs := ParseConfigMap(policyConfigMap(DefaultPlatformNamespace,
				map[string]string{"p.yaml": listPolicy(MaxListItems, tc.item, tc.at)}), DefaultOptions())
			require.Empty(t, probs, "the limit itself is accepted")
			require.Len(t, ps, 1)
		})
	}
	long := docHead + "spec:\n  template:\n    spec:\n      nodeSelector: {a: " + strings.Repeat("x", maxStringBytes+1) + "}\n"
	require.Contains(t, problemText(t, DefaultPlatformNamespace, long), "spec.template.spec.nodeSelector.a: Too long: may not be more than 4096 bytes")
}

func TestGlobsAreBounded(t *testing.T) {
	globs := make([]string, maxGlobs+1)
	for i := range globs {
		globs[i] = fmt.Sprintf("'c%d-*'", i)
	}
	many := docHead + "spec:\n  match: {clusters: [" + strings.Join(globs, ", ") + "]}\n  template: {metadata: {labels: {a: b}}}\n"
	require.Contains(t, problemText(t, "team-a", many), "spec.match.clusters: Too many: 33: must have at most 32 items")
	long := docHead + "spec:\n  match: {groups: ['" + strings.Repeat("*a", 200) + "']}\n  template: {metadata: {labels: {a: b}}}\n"
	require.Contains(t, problemText(t, "team-a", long), "spec.match.groups[0]: Too long: may not be more than 253 bytes")

	// Label values are not validated before mutating admission: a name beyond what Kubernetes
	// allows is no match, whatever the glob.
	require.True(t, anyGlob([]string{"*a*a*a*a*b"}, strings.Repeat("a", 62)+"b"))
	require.False(t, anyGlob([]string{"*"}, strings.Repeat("a", 100000)))
}

func TestNamespacePoliciesAreBounded(t *testing.T) {
	var cms []SourcedConfigMap
	for c := range 5 { // 5 ConfigMaps of 10 policies: the fourth takes the namespace beyond 32
		var docs strings.Builder
		for i := range 10 {
			fmt.Fprintf(&docs, "---\napiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p%d}\nspec: {template: {metadata: {labels: {a: b}}}}\n", i)
		}
		cm := policyConfigMap("team-a", map[string]string{"p.yaml": docs.String()})
		cm.Name = fmt.Sprintf("cm-%d", c)
		cms = append(cms, SourcedConfigMap{File: cm.Name + ".yaml", ConfigMap: cm})
	}
	set, probs := Compile(cms, DefaultOptions())
	require.Equal(t, 30, set.Count(ScopeNamespace))
	require.Equal(t, []string{"team-a/cm-3", "team-a/cm-4"}, set.Dropped())
	require.Contains(t, ProblemLines(probs), "cm-3.yaml: team-a/cm-3: -: -: data: Forbidden: left out: its namespace already holds 32 policies")
}

func TestLintReportsEveryError(t *testing.T) {
	got := problemText(t, "team-a", docHead+"spec:\n  priority: 99999999999\n  mode: Enforce\n  match: {managers: [5]}\n  template:\n    metadata: {labels: {a: [1]}}\n    spec:\n      tolerations: [{key: a, tolerationSeconds: soon}, {key: b, operator: Sometimes}]\n      containers: [{name: '*', resources: {limits: {cpu: lots}}}, {name: 5}]\n")
	for _, want := range []string{
		"spec.priority: Invalid value: 99999999999: wrong type: want int32",
		"spec.mode: Unsupported value: \"Enforce\"",
		// The engine's own types are named as policies.<Name>, wherever they are declared.
		"spec.match.managers[0]: Invalid value: 5: wrong type: want policies.Manager",
		"spec.template.metadata.labels[a]: Invalid value: a list of 1 item(s): wrong type: want string",
		"spec.template.spec.tolerations[0].tolerationSeconds: Invalid value: \"soon\": wrong type: want int64",
		"spec.template.spec.tolerations[1].operator: Unsupported value: \"Sometimes\"",
		"spec.template.spec.containers[0].resources.limits[cpu]: Invalid value: \"lots\"",
		"spec.template.spec.containers[1].name: Invalid value: 5: wrong type: want string",
	} {
		require.Contains(t, got, want)
	}
}

// hostileObject is a Pod of the Dask operator with n items in each list podpatch merges by key.
func hostileObject(containers, n int) []byte {
	list := func(f func(i int) any) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	cs := make([]any, containers)
	for c := range cs {
		cs[c] = map[string]any{
			"name": fmt.Sprintf("c%d", c), "image": "x",
			"env":          list(func(i int) any { return map[string]any{"name": fmt.Sprintf("E%d", i), "value": "v"} }),
			"volumeMounts": list(func(i int) any { return map[string]any{"name": "v", "mountPath": fmt.Sprintf("/m%d", i)} }),
			"ports":        list(func(i int) any { return map[string]any{"containerPort": i + 1} }),
		}
	}
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "w", "namespace": "team-a", "labels": map[string]any{
			"dask.org/component": "worker", "dask.org/cluster-name": "c", "dask.org/workergroup-name": "g"}},
		"spec": map[string]any{
			"containers":  cs,
			"tolerations": list(func(i int) any { return map[string]any{"key": fmt.Sprintf("k%d", i), "operator": "Exists"} }),
			"volumes":     list(func(i int) any { return map[string]any{"name": fmt.Sprintf("v%d", i), "emptyDir": map[string]any{}} }),
			"topologySpreadConstraints": list(func(i int) any {
				return map[string]any{"topologyKey": fmt.Sprintf("t%d", i), "whenUnsatisfiable": "DoNotSchedule", "maxSkew": 1}
			}),
			"affinity": map[string]any{"nodeAffinity": map[string]any{
				"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
					map[string]any{"matchExpressions": list(func(i int) any { return map[string]any{"key": fmt.Sprintf("k%d", i), "operator": "Exists"} })}}},
				"preferredDuringSchedulingIgnoredDuringExecution": list(func(i int) any {
					return map[string]any{"weight": 1, "preference": map[string]any{"matchExpressions": []any{map[string]any{"key": fmt.Sprintf("p%d", i), "operator": "Exists"}}}}
				}),
			}},
		},
	}
	js, err := json.Marshal(pod)
	if err != nil {
		panic(err)
	}
	return js
}

// everyListPolicy sets MaxListItems items in every list merged by key, none of them already in
// hostileObject (their names start with z).
func everyListPolicy(name, mode string) string {
	items := func(f func(i int) string) string {
		out := make([]string, MaxListItems)
		for i := range out {
			out[i] = f(i)
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	return fmt.Sprintf("---\napiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: %s}\nspec:\n  mode: %s\n  template:\n    spec:\n"+
		"      tolerations: %s\n      topologySpreadConstraints: %s\n      affinity:\n        nodeAffinity:\n"+
		"          requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: %s}]}\n"+
		"          preferredDuringSchedulingIgnoredDuringExecution: %s\n"+
		"      containers: [{name: '*', env: %s}]\n",
		name, mode,
		items(func(i int) string { return fmt.Sprintf("{key: z%s%d, operator: Exists}", name, i) }),
		items(func(i int) string {
			return fmt.Sprintf("{topologyKey: z%s%d, whenUnsatisfiable: ScheduleAnyway, maxSkew: 1}", name, i)
		}),
		items(func(i int) string { return fmt.Sprintf("{key: z%s%d, operator: Exists}", name, i) }),
		items(func(i int) string {
			return fmt.Sprintf("{weight: 1, preference: {matchExpressions: [{key: z%s%d, operator: Exists}]}}", name, i)
		}),
		items(func(i int) string { return fmt.Sprintf("{name: Z%s%d, value: v}", name, i) }),
	)
}

func TestKeyedMergesAreLinear(t *testing.T) {
	const n, policies = 5000, 32
	var ps []*Policy
	for c := range policies / maxDocuments {
		var docs strings.Builder
		for i := range maxDocuments {
			docs.WriteString(everyListPolicy(fmt.Sprintf("c%dp%d", c, i), "merge"))
		}
		cm := policyConfigMap("team-a", map[string]string{"p.yaml": docs.String()})
		cm.Name = fmt.Sprintf("cm-%d", c)
		cps, probs := ParseConfigMap(cm, DefaultOptions())
		require.Empty(t, probs)
		ps = append(ps, cps...)
	}
	set := NewSet(ps)
	obj := hostileObject(1, n)

	// Apply, then count the list items indexed: every list of the object once, plus what the
	// policies added — not the object's lists once per policy or per patch item.
	in := Input{Kind: profiles.KindPod, Object: obj, Namespace: "team-a"}
	res, err := set.Patch(in)
	require.NoError(t, err)
	require.True(t, res.Changed)
	tr := jsontree.New()
	root := tr.Decode(json.RawMessage(obj)).(map[string]any)
	st := &applyState{t: tr}
	m := newMerger(st, profiles.KindPod, false)
	for _, p := range ps {
		m.mergeMap(root, p.Patch(profiles.KindPod))
	}
	require.NoError(t, st.err)
	objectItems := 6 * n // tolerations, spread, requirements, preferred, env, and the term's requirements again
	added := policies * MaxListItems * 5
	require.LessOrEqual(t, tr.Indexed(), 2*(objectItems+added), "indexed %d items for %d in the object and %d added", tr.Indexed(), objectItems, added)
}

func TestMergeWorkIsBounded(t *testing.T) {
	// A "*" entry applies to every container: with enough containers, the work limit stops it.
	ps, probs := ParseConfigMap(policyConfigMap("team-a", map[string]string{"p.yaml": everyListPolicy("a", "merge")}), DefaultOptions())
	require.Empty(t, probs)
	set := NewSet(ps)
	_, err := set.Apply(Input{Kind: profiles.KindPod, Object: hostileObject(3000, 1), Namespace: "team-a"})
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, fmt.Sprintf("more than %d values", maxMergeWork))

	// The request's budget: a closed Done stops Apply before it writes anything.
	done := make(chan struct{})
	close(done)
	_, err = set.Apply(Input{Kind: profiles.KindPod, Object: hostileObject(1, 1), Namespace: "team-a", Done: done})
	require.True(t, errors.Is(err, ErrStopped), "%v", err)
}

// worstCaseSet is the largest policy set lint accepts for one object: MaxNamespacePolicies
// namespace policies (default and merge) and as many platform policies (default, merge and
// enforce), every one at MaxListItems in every list merged by key.
func worstCaseSet(tb testing.TB) *Set {
	var all []*Policy
	modes := map[string][]string{DefaultPlatformNamespace: {"default", "merge", "enforce"}, "team-a": {"default", "merge"}}
	for ns, ms := range modes {
		for c := 0; c*maxDocuments < MaxNamespacePolicies; c++ {
			var docs strings.Builder
			for i := range maxDocuments {
				docs.WriteString(everyListPolicy(fmt.Sprintf("c%dp%d", c, i), ms[(c*maxDocuments+i)%len(ms)]))
			}
			cm := policyConfigMap(ns, map[string]string{"p.yaml": docs.String()})
			cm.Name = fmt.Sprintf("cm-%d", c)
			ps, probs := ParseConfigMap(cm, DefaultOptions())
			require.Empty(tb, probs)
			all = append(all, ps...)
		}
	}
	set := NewSet(all)
	require.Empty(tb, set.Dropped())
	return set
}

// BenchmarkWorstCase applies the worst set lint accepts to a Pod near the largest the API
// server takes (3 MiB of JSON) with long lists in every field merged by key.
func BenchmarkWorstCase(b *testing.B) {
	set := worstCaseSet(b)
	for _, shape := range []struct{ containers, items int }{{1, 12000}, {10, 1500}, {200, 60}} {
		obj := hostileObject(shape.containers, shape.items)
		b.Run(fmt.Sprintf("containers=%d/items=%d", shape.containers, shape.items), func(b *testing.B) {
			b.ReportAllocs()
			b.ReportMetric(float64(len(obj))/(1<<20), "MiB-object")
			var res Result
			var err error
			for b.Loop() {
				res, err = set.Patch(Input{Kind: profiles.KindPod, Object: obj, Namespace: "team-a"})
			}
			b.ReportMetric(float64(len(res.Applied)), "policies")
			b.ReportMetric(float64(len(res.Patch))/(1<<20), "MiB-patch")
			if err != nil {
				b.Logf("not patched: %v", err)
			}
		})
	}
}

// BenchmarkWorstCaseFloor is the same object with one small policy touching every list: the
// cost of decoding and indexing the object's long lists, without the policies' volume.
func BenchmarkWorstCaseFloor(b *testing.B) {
	doc := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: floor}\nspec:\n  template:\n    spec:\n" +
		"      tolerations: [{key: zz, operator: Exists}]\n      topologySpreadConstraints: [{topologyKey: zz, whenUnsatisfiable: ScheduleAnyway, maxSkew: 1}]\n" +
		"      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zz, operator: Exists}]}]}," +
		" preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: {matchExpressions: [{key: zz, operator: Exists}]}}]}}\n" +
		"      containers: [{name: '*', env: [{name: ZZ, value: v}]}]\n"
	ps, probs := ParseConfigMap(policyConfigMap("team-a", map[string]string{"p.yaml": doc}), DefaultOptions())
	require.Empty(b, probs)
	set := NewSet(ps)
	for _, shape := range []struct{ containers, items int }{{1, 12000}, {10, 1500}} {
		obj := hostileObject(shape.containers, shape.items)
		b.Run(fmt.Sprintf("containers=%d/items=%d", shape.containers, shape.items), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := set.Patch(Input{Kind: profiles.KindPod, Object: obj, Namespace: "team-a"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestNamespacePoliciesCannotSwitchOffThePlatform(t *testing.T) {
	platform := policyConfigMap(DefaultPlatformNamespace, map[string]string{"p.yaml": docHead +
		"spec:\n  mode: enforce\n  template: {metadata: {labels: {cost-center: ml}}}\n"})
	platform.Name = "cost-center"
	obj := hostileObject(3000, 1)
	for _, tc := range []struct{ name, team string }{
		// Work beyond maxMergeWork: a "*" entry on a pod with thousands of containers.
		{"too much work", everyListPolicy("a", "merge")},
		// Selectors that contradict each other: the label one policy sets unselects it.
		{"oscillating selection", docHead + "spec:\n  match: {selector: {matchExpressions: [{key: flip, operator: DoesNotExist}]}}\n  template: {metadata: {labels: {flip: \"on\"}}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			team := policyConfigMap("team-a", map[string]string{"p.yaml": tc.team})
			var all []*Policy
			for _, cm := range []*corev1.ConfigMap{platform, team} {
				ps, probs := ParseConfigMap(cm, DefaultOptions())
				require.Empty(t, probs)
				all = append(all, ps...)
			}
			res, err := NewSet(all).Apply(Input{Kind: profiles.KindPod, Object: obj, Namespace: "team-a"})
			require.NoError(t, err)
			require.True(t, res.Changed)
			require.Len(t, res.Applied, 1, "only the platform's policy")
			require.Equal(t, "podpatch-system/cost-center/p", res.Applied[0].Ref)
			require.Len(t, res.Warnings, 1)
			require.Contains(t, res.Warnings[0], "namespace policies left out")
			require.Contains(t, string(res.Object), `"cost-center":"ml"`)
		})
	}
}

// countdown is a context whose Err turns to DeadlineExceeded after a number of looks, so a
// test can stop a compile part way without depending on the clock.
type countdown struct {
	context.Context
	left int
}

func (c *countdown) Err() error {
	if c.left--; c.left < 0 {
		return context.DeadlineExceeded
	}
	return nil
}

// TestParseConfigMapBudget: a compile stops once its context is done, between documents or
// inside a large one, and refuses the ConfigMap naming the budget.
func TestParseConfigMapBudget(t *testing.T) {
	dense := "a: [" + strings.Repeat("0,", 15000) + "0]\n"
	var docs strings.Builder
	for range 3 {
		docs.WriteString("---\n" + dense)
	}
	cm := policyConfigMap("team-a", map[string]string{"p.yaml": docs.String()})
	for _, looks := range []int{0, 1, 5, 30} {
		ps, probs, err := ParseConfigMapContext(&countdown{Context: context.Background(), left: looks}, cm, DefaultOptions())
		require.ErrorIs(t, err, ErrBudget, "after %d looks", looks)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Nil(t, ps)
		require.Len(t, probs, 1)
		require.Contains(t, probs.Error(), "data: Forbidden: not compiled within its budget")
	}
	_, probs, err := ParseConfigMapContext(context.Background(), cm, DefaultOptions())
	require.NoError(t, err)
	require.NotEmpty(t, probs, "without a budget it is compiled to its (many) problems")
}

// TestDocumentsAreBounded: documents cost the parser kilobytes each, so a stream of empty or
// trivial ones is bounded in count, across every data key of a ConfigMap.
func TestDocumentsAreBounded(t *testing.T) {
	for name, data := range map[string]map[string]string{
		"separators":     {"p.yaml": strings.Repeat("---\n", MaxConfigMapBytes/4-16)},
		"comments":       {"p.yaml": strings.Repeat("---\n# c\n", MaxConfigMapBytes/8-16)},
		"nulls":          {"p.yaml": strings.Repeat("---\n~\n", MaxConfigMapBytes/6-16)},
		"nulls, 20 keys": manyKeys(20, strings.Repeat("---\n~\n", MaxConfigMapBytes/6/20-16)),
	} {
		var probs Problems
		n := hostiletest.Allocated(func() { _, probs = ParseConfigMap(policyConfigMap("team-a", data), DefaultOptions()) })
		require.Contains(t, probs.Error(), fmt.Sprintf("more than %d documents, empty ones included", maxStreamDocuments), name)
		require.Less(t, n, uint64(128<<20), "%s: %d bytes allocated", name, n)
	}
	_, err := SplitDocuments(strings.NewReader(strings.Repeat("---\n~\n", maxStreamDocuments+1)))
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = SplitDocuments(strings.NewReader(strings.Repeat("{}", maxStreamDocuments+1)))
	require.ErrorIs(t, err, ErrTooLarge)
}

func manyKeys(n int, text string) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("p%02d.yaml", i)] = text
	}
	return m
}
