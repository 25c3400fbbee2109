package policies_test

// Fuzz tests for the two parsers of untrusted input: the YAML of a policy ConfigMap's data key
// (written by namespace owners) and the JSON of the objects admission receives. Seeds come from
// the manager fixtures and the example policies; more interesting inputs are checked in under
// testdata/fuzz/<FuzzName>/. Run one with, for example,
//
//	go test ./policies -run '^$' -fuzz '^FuzzApply$' -fuzztime 1m

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policyfiles"
)

// everyRulePolicies is a platform ConfigMap whose policies exercise every merge rule of reference §3
// in each mode: maps (with null removals), tolerations, containers by name with "*" and a
// sidecar, env, volumeMounts, ports, resources, volumes, topology spread, image pull secrets,
// node affinity ANDed into terms, unioned preferred and pod anti-affinity terms, strategic
// merge of other objects and lists, and Service metadata, ports and type.
const everyRulePolicies = `apiVersion: v1
kind: ConfigMap
metadata:
  name: every-rule
  namespace: podpatch-system
  labels: {podpatch.io/policy: "true"}
data:
  merge.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: merge-all}
    spec:
      mode: merge
      template:
        metadata:
          labels: {fuzz.example.com/merged: "yes", pod-template-hash: null}
          annotations: {fuzz.example.com/note: merged, fuzz.example.com/drop: null}
        spec:
          nodeSelector: {kubernetes.io/arch: amd64, disktype: null}
          priorityClassName: batch-high
          securityContext: {runAsNonRoot: true, fsGroup: 1000}
          tolerations:
            - {key: dedicated, operator: Equal, value: dask, effect: NoSchedule}
            - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 60}
          containers:
            - name: "*"
              resources:
                requests: {cpu: 250m, ephemeral-storage: 1Gi}
                limits: {memory: 8Gi, nvidia.com/gpu: null}
              env:
                - {name: FUZZ_ENV, value: "1"}
              volumeMounts:
                - {name: scratch, mountPath: /scratch}
              ports:
                - {name: metrics, containerPort: 9090}
            - name: worker
              env:
                - {name: WORKER_ONLY, value: "yes"}
            - name: log-shipper
              image: fluent/fluent-bit:3.1
              resources:
                limits: {cpu: 100m, memory: 64Mi}
          initContainers:
            - name: warmup
              image: busybox:1.36
              command: [sh, -c, "true"]
          volumes:
            - name: scratch
              emptyDir: {sizeLimit: 10Gi}
          imagePullSecrets:
            - name: registry-credentials
          topologySpreadConstraints:
            - maxSkew: 1
              topologyKey: topology.kubernetes.io/zone
              whenUnsatisfiable: ScheduleAnyway
              labelSelector:
                matchLabels: {fuzz.example.com/merged: "yes"}
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                  - matchExpressions:
                      - {key: kubernetes.io/os, operator: In, values: [linux]}
              preferredDuringSchedulingIgnoredDuringExecution:
                - weight: 10
                  preference:
                    matchExpressions:
                      - {key: cloud.google.com/gke-spot, operator: In, values: ["true"]}
            podAntiAffinity:
              preferredDuringSchedulingIgnoredDuringExecution:
                - weight: 50
                  podAffinityTerm:
                    topologyKey: kubernetes.io/hostname
                    labelSelector:
                      matchLabels: {fuzz.example.com/merged: "yes"}
      service:
        metadata:
          labels: {fuzz.example.com/merged: "yes"}
          annotations: {service.beta.kubernetes.io/aws-load-balancer-internal: "true", fuzz.example.com/drop: null}
        spec:
          type: LoadBalancer
          ports:
            - {name: metrics, port: 9090, targetPort: 9090}
  default.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: default-all}
    spec:
      mode: default
      priority: -5
      template:
        metadata:
          labels: {fuzz.example.com/merged: "no", fuzz.example.com/defaulted: "yes"}
        spec:
          nodeSelector: {kubernetes.io/arch: arm64}
          terminationGracePeriodSeconds: 60
          tolerations:
            - {key: dedicated, operator: Equal, value: dask, effect: NoSchedule}
          containers:
            - name: "*"
              imagePullPolicy: IfNotPresent
              resources:
                requests: {cpu: "2", memory: 2Gi}
              env:
                - {name: FUZZ_ENV, value: "0"}
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                  - matchExpressions:
                      - {key: kubernetes.io/os, operator: In, values: [windows]}
      service:
        spec:
          sessionAffinity: ClientIP
  enforce.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: enforce-all}
    spec:
      mode: enforce
      priority: 10
      template:
        metadata:
          labels: {fuzz.example.com/enforced: "yes"}
        spec:
          tolerations:
            - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 30}
          containers:
            - name: "*"
              securityContext: {allowPrivilegeEscalation: false}
      service:
        metadata:
          labels: {fuzz.example.com/enforced: "yes"}
`

// fixtureObjects reads every manager fixture (and the golden input) as JSON documents.
func fixtureObjects(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fixtures", "*", "*.yaml"))
	require.NoError(tb, err)
	more, err := filepath.Glob(filepath.Join("testdata", "apply", "*", "in.yaml"))
	require.NoError(tb, err)
	files = append(files, more...)
	sort.Strings(files)
	require.NotEmpty(tb, files)
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(tb, err)
		docs, err := policies.SplitDocuments(bytes.NewReader(b))
		require.NoError(tb, err, f)
		for _, d := range docs {
			out = append(out, d.JSON)
		}
	}
	return out
}

// readFixture reads one fixture file, which holds one object, as JSON.
func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", name))
	require.NoError(tb, err)
	js, err := yaml.YAMLToJSON(b)
	require.NoError(tb, err)
	return js
}

// exampleConfigMaps reads the example policies of manifests/examples.
func exampleConfigMaps(tb testing.TB) []policies.SourcedConfigMap {
	tb.Helper()
	cms, err := policyfiles.ReadConfigMaps([]string{filepath.Join("..", "manifests", "examples")}, "default", nil)
	require.NoError(tb, err)
	require.NotEmpty(tb, cms)
	return cms
}

// parseConfigMapYAML decodes one ConfigMap written in YAML.
func parseConfigMapYAML(tb testing.TB, text string) *corev1.ConfigMap {
	tb.Helper()
	cm := &corev1.ConfigMap{}
	require.NoError(tb, yaml.UnmarshalStrict([]byte(text), cm))
	return cm
}

// fuzzSet is the fixed Set FuzzApply applies: the examples plus everyRulePolicies.
func fuzzSet(tb testing.TB) *policies.Set {
	tb.Helper()
	cms := append(exampleConfigMaps(tb), policies.SourcedConfigMap{File: "every-rule", ConfigMap: parseConfigMapYAML(tb, everyRulePolicies)})
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(tb, probs, "%s", policies.ProblemLines(probs))
	require.Equal(tb, 10, set.Count(policies.ScopePlatform))
	return set
}

// decodeTop decodes a JSON object's top level, keeping numbers as written.
func decodeTop(b []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return nil, false
	}
	return m, true
}

// checkApply applies set to obj as kind and checks the invariants of Apply: no panic (the
// fuzzer reports one), idempotency, valid JSON output, and untouched top-level fields other
// than the metadata and spec that policies patch.
func checkApply(t *testing.T, set *policies.Set, kind profiles.Kind, obj []byte) {
	t.Helper()
	in := policies.Input{Kind: kind, Object: obj, Namespace: "default", NamespaceLabels: map[string]string{"env": "prod"}}
	res, err := set.Apply(in)
	if err != nil || !res.Changed {
		return
	}
	require.True(t, res.Recognised, "a changed object must have been recognised")
	require.NotEmpty(t, res.Applied)
	require.True(t, json.Valid(res.Object), "Apply returned invalid JSON: %s", res.Object)
	out, ok := decodeTop(res.Object)
	require.True(t, ok, "Apply must return a JSON object: %s", res.Object)
	orig, ok := decodeTop(obj)
	require.True(t, ok, "Apply changed something that is not a JSON object: %s", obj)
	for k, v := range orig {
		if k == "metadata" || k == "spec" {
			continue
		}
		require.Contains(t, out, k, "top-level field %q was dropped", k)
		require.True(t, reflect.DeepEqual(v, out[k]), "top-level field %q changed: %v -> %v", k, v, out[k])
	}
	meta, _ := out["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	require.NotEmpty(t, ann[policies.AppliedAnnotation], "a patched object carries %s", policies.AppliedAnnotation)
	if kind == profiles.KindPod {
		origSpec, _ := orig["spec"].(map[string]any)
		outSpec, _ := out["spec"].(map[string]any)
		for _, list := range []string{"containers", "initContainers"} {
			if !hasWildcardContainer(origSpec[list]) {
				require.False(t, hasWildcardContainer(outSpec[list]),
					"a policy's \"*\" entry must never become a container named \"*\" in %s\ninput: %s\noutput: %s", list, obj, res.Object)
			}
		}
	}

	// The JSONPatch the webhook returns turns the input into exactly the rendered object.
	patch, err := jsonpatch.DecodePatch(res.Patch)
	require.NoError(t, err, "invalid JSONPatch %s", res.Patch)
	patched, err := patch.Apply(obj)
	require.NoError(t, err, "JSONPatch %s does not apply to %s", res.Patch, obj)
	require.JSONEq(t, string(res.Object), string(patched), "JSONPatch %s", res.Patch)

	in.Object = res.Object
	again, err := set.Apply(in)
	require.NoError(t, err, "applying to Apply's own output must work")
	require.True(t, again.Changed)
	if res.Fallback == policies.FallbackEnforceFirst && string(res.Object) != string(again.Object) {
		// The other layers could not patch the object as it came (a shape they cannot merge
		// into); the enforce policies alone made it one they can: a second admission applies
		// them too, and is the fixed point.
		res = again
		in.Object = res.Object
		if again, err = set.Apply(in); err != nil {
			require.NoError(t, err)
		}
	}
	require.Equal(t, string(res.Object), string(again.Object),
		"applying the same policies twice must give the same object\ninput: %s", obj)
}

// hasWildcardContainer reports whether a containers list holds an entry named "*".
func hasWildcardContainer(v any) bool {
	list, _ := v.([]any)
	for _, it := range list {
		if c, ok := it.(map[string]any); ok && c["name"] == "*" {
			return true
		}
	}
	return false
}

// FuzzApply feeds arbitrary JSON, seeded with the manager fixtures, to Apply as a Pod and as a
// Service.
func FuzzApply(f *testing.F) {
	for _, js := range fixtureObjects(f) {
		f.Add(js)
		// The same object with a field this build does not know, at the top level and inside.
		var m map[string]any
		require.NoError(f, json.Unmarshal(js, &m))
		m["futureField"] = map[string]any{"enabled": true, "ratio": 0.25}
		if spec, ok := m["spec"].(map[string]any); ok {
			spec["futureSpecField"] = []any{"a", 1}
		}
		extended, err := json.Marshal(m)
		require.NoError(f, err)
		f.Add(extended)
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"dask.org/component":"worker","dask.org/cluster-name":"x","podpatch.io/skip":"true"}},"spec":{"containers":[{"name":"worker","image":"dask"}]}}`))
	f.Add([]byte(`{"kind":"Pod","metadata":{"labels":{"spark-role":"executor"}},"spec":{"containers":null,"tolerations":{},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{},{"matchExpressions":[{"key":"kubernetes.io/os","operator":"NotIn","values":["windows"]}]}]}}}}}`))
	f.Add([]byte(`{"kind":"Service","metadata":{"labels":{"ray.io/node-type":"head"},"annotations":"oops"},"spec":{"selector":{"ray.io/node-type":"head"},"ports":[{"port":"9090"}]}}`))
	f.Add([]byte(`{"metadata":{"labels":{"dask.org/component":"worker"}},"spec":[1,2]}`))
	f.Add([]byte(`{"kind":"Pod","metadata":{"labels":{"dask.org/component":"worker"}},"spec":{"containers":[{"name":"*","image":"x"},"not-a-container",{"name":"worker"}]}}`))
	f.Add([]byte(`null`))

	set := fuzzSet(f)
	f.Fuzz(func(t *testing.T, obj []byte) {
		checkApply(t, set, profiles.KindPod, obj)
		checkApply(t, set, profiles.KindService, obj)
	})
}

// FuzzParseConfigMap feeds arbitrary YAML as the data key of a policy ConfigMap, in the
// platform namespace and in a team namespace. A ConfigMap is either wholly valid or wholly
// rejected; valid policies compile into a Set that Apply can use on real objects.
func FuzzParseConfigMap(f *testing.F) {
	add := func(text string) {
		f.Add(text, true)
		f.Add(text, false)
	}
	for _, s := range exampleConfigMaps(f) {
		for _, k := range slices.Sorted(maps.Keys(s.ConfigMap.Data)) {
			add(s.ConfigMap.Data[k])
		}
	}
	every := parseConfigMapYAML(f, everyRulePolicies)
	for _, k := range slices.Sorted(maps.Keys(every.Data)) {
		add(every.Data[k])
	}
	add(every.Data["merge.yaml"] + "---\n" + every.Data["default.yaml"])
	add("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: a}\nspec:\n  match: {selector: {matchExpressions: [{key: team, operator: In, values: [ml]}]}, clusters: ['prod-*'], groups: ['[gpu']}\n  template: {}\n")
	add("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: a}\nspec: {priority: 99999999999, template: {spec: {containers: [{name: '*', resources: {limits: {cpu: -1}}}]}}}\n")
	add("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: a}\nspec: {service: {spec: {ports: [{port: 80}]}}}\n---\napiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: a}\nspec: {service: {}}\n")
	add("# only a comment\n")
	add("- [a, b]\n")
	add("{")

	pod := readFixture(f, "dask-operator/worker-pod.yaml")
	svc := readFixture(f, "dask-operator/scheduler-service.yaml")
	spark := readFixture(f, "spark/executor-pod.yaml")
	opts := policies.DefaultOptions()
	f.Fuzz(func(t *testing.T, text string, platform bool) {
		ns := "team-a"
		if platform {
			ns = opts.PlatformNamespace
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: ns, Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data:       map[string]string{"fuzz.yaml": text},
		}
		ps, probs := policies.ParseConfigMap(cm, opts)
		if len(probs) > 0 {
			require.Nil(t, ps, "a ConfigMap with problems yields no policy")
			for _, p := range probs {
				require.NotNil(t, p.Err)
				require.NotEmpty(t, p.String())
			}
			require.NotEmpty(t, probs.Error())
			return
		}
		require.NotEmpty(t, ps, "a valid ConfigMap holds at least one policy")
		for _, p := range ps {
			require.NotEmpty(t, p.Ref)
			require.True(t, strings.HasPrefix(p.Ref, ns+"/fuzz/"), "ref %q", p.Ref)
			require.Equal(t, "fuzz.yaml", p.Key)
		}
		set := policies.NewSet(ps)
		kinds := map[string]profiles.Kind{"pod": profiles.KindPod, "svc": profiles.KindService, "spark": profiles.KindPod}
		for name, obj := range map[string][]byte{"pod": pod, "svc": svc, "spark": spark} {
			res, err := set.Apply(policies.Input{Kind: kinds[name], Object: obj, Namespace: "team-a"})
			require.NoError(t, err, name)
			if res.Changed {
				require.True(t, json.Valid(res.Object), "%s: invalid JSON: %s", name, res.Object)
			}
		}
	})
}

// FuzzKeyedLists merges long keyed lists: the fuzzer's bytes choose, for every list merged by
// key (tolerations, env, volumeMounts, ports, volumes, topology spread, node requirements), the
// keys of up to 200 object items and up to MaxListItems policy items from a small alphabet, so
// that items collide, repeat and interleave. Apply must keep its invariants (checkApply) on them.
func FuzzKeyedLists(f *testing.F) {
	f.Add([]byte("abcabc"), []byte("cba"), uint8(40), uint8(20))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, []byte{7, 7, 7}, uint8(200), uint8(64))
	f.Add([]byte("x"), []byte(""), uint8(0), uint8(64))
	f.Fuzz(func(t *testing.T, objKeys, patchKeys []byte, objN, patchN uint8) {
		key := func(seed []byte, i int) string {
			if len(seed) == 0 {
				return fmt.Sprintf("k%d", i%7)
			}
			return fmt.Sprintf("k%d", int(seed[i%len(seed)])%13)
		}
		pn := min(int(patchN), policies.MaxListItems)
		// A policy's keys are unique (validation rejects repeats); the object's may repeat.
		list := func(seed []byte, n int, unique bool, item func(k string, i int) string) string {
			var items []string
			seen := map[string]bool{}
			for i := range n {
				k := key(seed, i)
				if unique && seen[k] {
					continue
				}
				seen[k] = true
				items = append(items, item(k, i))
			}
			return "[" + strings.Join(items, ",") + "]"
		}
		lists := func(seed []byte, n int, unique bool) map[string]string {
			list := func(seed []byte, n int, item func(k string, i int) string) string { return list(seed, n, unique, item) }
			q := func(s string) string { return `"` + s + `"` }
			return map[string]string{
				"tolerations": list(seed, n, func(k string, i int) string {
					return fmt.Sprintf(`{"key":%s,"operator":"Equal","value":"%d","effect":"NoSchedule"}`, q(k), i%3)
				}),
				"env":          list(seed, n, func(k string, i int) string { return fmt.Sprintf(`{"name":%s,"value":"%d"}`, q(strings.ToUpper(k)), i) }),
				"volumeMounts": list(seed, n, func(k string, i int) string { return fmt.Sprintf(`{"name":"v","mountPath":"/%s"}`, k) }),
				"ports": list(seed, n, func(k string, i int) string {
					return fmt.Sprintf(`{"containerPort":%d}`, 1000+len(k)*13+int(k[len(k)-1]))
				}),
				"volumes": list(seed, n, func(k string, i int) string { return fmt.Sprintf(`{"name":%s,"emptyDir":{}}`, q(k)) }),
				"spread": list(seed, n, func(k string, i int) string {
					return fmt.Sprintf(`{"topologyKey":%s,"whenUnsatisfiable":"ScheduleAnyway","maxSkew":%d}`, q(k), 1+i%3)
				}),
				"requirements": list(seed, n, func(k string, i int) string { return fmt.Sprintf(`{"key":%s,"operator":"Exists"}`, q(k)) }),
			}
		}
		o := lists(objKeys, int(objN), false)
		pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"default","labels":{"dask.org/component":"worker","dask.org/cluster-name":"c"}},`+
			`"spec":{"tolerations":%s,"volumes":%s,"topologySpreadConstraints":%s,`+
			`"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":%s}]}}},`+
			`"containers":[{"name":"worker","image":"x","env":%s,"volumeMounts":%s,"ports":%s}]}}`,
			o["tolerations"], o["volumes"], o["spread"], o["requirements"], o["env"], o["volumeMounts"], o["ports"])
		p := lists(patchKeys, pn, true)
		doc := fmt.Sprintf(`{"apiVersion":"podpatch.io/v1alpha1","kind":"PodTemplatePatch","metadata":{"name":"long"},"spec":{"template":{"spec":`+
			`{"tolerations":%s,"volumes":%s,"topologySpreadConstraints":%s,`+
			`"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":%s}]}}},`+
			`"containers":[{"name":"*","env":%s,"volumeMounts":%s,"ports":%s}]}}}}`,
			p["tolerations"], p["volumes"], p["spread"], p["requirements"], p["env"], p["volumeMounts"], p["ports"])
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "long", Namespace: policies.DefaultPlatformNamespace, Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data:       map[string]string{"long.yaml": doc},
		}
		ps, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
		if len(probs) > 0 {
			return // duplicate keys inside one policy are rejected: nothing to merge
		}
		checkApply(t, policies.NewSet(ps), profiles.KindPod, []byte(pod))
	})
}
