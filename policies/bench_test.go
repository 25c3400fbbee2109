package policies_test

// Benchmarks of the request path (Apply) and of what happens when policies change (ParseConfigMap,
// NewSet). Speed is measured here, never asserted in unit tests:
//
//	go test ./policies -run '^$' -bench . -benchmem -count 3
//
// The 1,000 unrelated policies are generated as ConfigMaps and go through ParseConfigMap, like
// the ones the webhook reads.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
)

// layeredPolicies match the Dask operator worker Pod of cluster "simple" in namespace default,
// one per layer of SPEC §3: platform default, namespace default, platform merge, namespace merge
// and platform enforce. The "*" entries touch every container.
var layeredPolicies = []struct{ namespace, name, doc string }{
	{"podpatch-system", "platform-defaults", `
metadata: {name: worker-requests}
spec:
  mode: default
  match: {roles: [worker]}
  template:
    spec:
      containers:
        - name: "*"
          resources:
            requests: {cpu: 500m, memory: 1Gi}
`},
	{"default", "team-defaults", `
metadata: {name: team-scheduling}
spec:
  mode: default
  match: {managers: [dask]}
  template:
    metadata:
      labels: {team: analytics}
    spec:
      priorityClassName: batch
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
`},
	{"podpatch-system", "dask-pools", `
metadata: {name: dask-workers}
spec:
  match: {managers: [dask], roles: [worker], clusters: ["simple*", "prod-*"]}
  template:
    spec:
      nodeSelector: {cloud.google.com/gke-nodepool: dask-pool}
      tolerations:
        - {key: dedicated, operator: Equal, value: dask, effect: NoSchedule}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      containers:
        - name: "*"
          volumeMounts:
            - {name: scratch, mountPath: /scratch}
      volumes:
        - name: scratch
          emptyDir: {}
`},
	{"default", "team-overrides", `
metadata: {name: big-workers}
spec:
  match: {managers: [dask], roles: [worker], selector: {matchLabels: {dask.org/cluster-name: simple}}}
  template:
    spec:
      containers:
        - name: "*"
          resources:
            requests: {memory: 4Gi}
            limits: {memory: 4Gi}
          env:
            - {name: MALLOC_TRIM_THRESHOLD_, value: "65536"}
`},
	{"podpatch-system", "cost-center", `
metadata: {name: cost-center}
spec:
  mode: enforce
  template:
    metadata:
      labels: {cost-center: data-platform}
`},
}

// policyConfigMap wraps PodTemplatePatch documents (without apiVersion and kind) into a policy
// ConfigMap, one data key per document.
func policyConfigMap(namespace, name string, docs ...string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data:       map[string]string{},
	}
	for i, d := range docs {
		cm.Data[fmt.Sprintf("p%03d.yaml", i)] = "apiVersion: " + policies.APIVersion + "\nkind: " + policies.DocumentKind + "\n" + strings.TrimPrefix(d, "\n")
	}
	return cm
}

func mustParse(b *testing.B, cm *corev1.ConfigMap) []*policies.Policy {
	b.Helper()
	ps, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
	if len(probs) > 0 {
		b.Fatalf("%s/%s: %v", cm.Namespace, cm.Name, probs)
	}
	return ps
}

func layered(b *testing.B) []*policies.Policy {
	b.Helper()
	var out []*policies.Policy
	for _, p := range layeredPolicies {
		out = append(out, mustParse(b, policyConfigMap(p.namespace, p.name, p.doc))...)
	}
	return out
}

// otherPolicies generates n policies, in ConfigMaps of ten, that can never match a Dask worker
// Pod in namespace default: namespace policies of other namespaces, platform policies for the
// other managers, and platform policies for the other Dask roles.
func otherPolicies(b *testing.B, n int) []*policies.Policy {
	b.Helper()
	const perConfigMap = 10
	others := []string{"spark", "ray", "flink", "dask-gateway"}
	var out []*policies.Policy
	for c := 0; len(out) < n; c++ {
		var namespace string
		var docs []string
		for i := 0; i < perConfigMap && len(out)+len(docs) < n; i++ {
			id := c*perConfigMap + i
			switch c % 3 {
			case 0: // another namespace, same manager and role
				namespace = fmt.Sprintf("team-%03d", c)
				docs = append(docs, fmt.Sprintf(`
metadata: {name: ns-%d}
spec:
  match: {managers: [dask], roles: [worker]}
  template:
    metadata: {labels: {policy: ns-%d}}
    spec:
      containers:
        - {name: "*", env: [{name: POLICY, value: ns-%d}]}
`, id, id, id))
			case 1: // another manager
				namespace = policies.DefaultPlatformNamespace
				docs = append(docs, fmt.Sprintf(`
metadata: {name: mgr-%d}
spec:
  match: {managers: [%s], roles: [worker]}
  template:
    spec:
      nodeSelector: {pool: mgr-%d}
`, id, others[id%len(others)], id))
			default: // another role of the same manager
				namespace = policies.DefaultPlatformNamespace
				role := []string{"scheduler", "job"}[id%2]
				docs = append(docs, fmt.Sprintf(`
metadata: {name: role-%d}
spec:
  match: {managers: [dask], roles: [%s]}
  template:
    spec:
      tolerations: [{key: role-%d, operator: Exists}]
  service:
    metadata: {annotations: {policy: role-%d}}
`, id, role, id, id))
			}
		}
		out = append(out, mustParse(b, policyConfigMap(namespace, fmt.Sprintf("generated-%03d", c), docs...))...)
	}
	return out
}

// workerPod is the Dask operator worker Pod fixture with n containers: the worker and n-1
// sidecars shaped like it.
func workerPod(b *testing.B, n int) []byte {
	b.Helper()
	js := readFixture(b, "dask-operator/worker-pod.yaml")
	if n == 1 {
		return js
	}
	var pod map[string]any
	if err := json.Unmarshal(js, &pod); err != nil {
		b.Fatal(err)
	}
	spec := pod["spec"].(map[string]any)
	worker := spec["containers"].([]any)[0].(map[string]any)
	containers := []any{worker}
	for i := 1; i < n; i++ {
		c := map[string]any{}
		for k, v := range worker {
			c[k] = v
		}
		c["name"] = fmt.Sprintf("sidecar-%d", i)
		c["ports"] = []any{map[string]any{"name": fmt.Sprintf("http-%d", i), "containerPort": 9000 + i}}
		containers = append(containers, c)
	}
	spec["containers"] = containers
	out, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func benchApply(b *testing.B, set *policies.Set, obj []byte, wantApplied int) {
	b.Helper()
	in := policies.Input{Kind: policies.KindPod, Object: obj, Namespace: "default"}
	res, err := set.Apply(in)
	if err != nil {
		b.Fatal(err)
	}
	if len(res.Applied) != wantApplied {
		refs := make([]string, len(res.Applied))
		for i, p := range res.Applied {
			refs[i] = p.Ref
		}
		b.Fatalf("%d policies applied, want %d: %v", len(res.Applied), wantApplied, refs)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := set.Apply(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApply(b *testing.B) {
	five := layered(b)
	if len(five) != 5 {
		b.Fatalf("%d layered policies, want 5", len(five))
	}
	pod := workerPod(b, 1)
	b.Run("5-matching", func(b *testing.B) {
		benchApply(b, policies.NewSet(five), pod, 5)
	})
	b.Run("5-matching+1000-other", func(b *testing.B) {
		others := otherPolicies(b, 1000)
		if len(others) != 1000 {
			b.Fatalf("%d other policies, want 1000", len(others))
		}
		benchApply(b, policies.NewSet(append(append([]*policies.Policy{}, five...), others...)), pod, 5)
	})
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("containers-%d", n), func(b *testing.B) {
			benchApply(b, policies.NewSet(five), workerPod(b, n), 5)
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	ps := append(layered(b), otherPolicies(b, 995)...)
	b.Run(fmt.Sprint(len(ps)), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			policies.NewSet(ps)
		}
	})
}

func BenchmarkParseConfigMap(b *testing.B) {
	opts := policies.DefaultOptions()
	cases := []struct {
		name string
		cm   *corev1.ConfigMap
	}{
		{"one-policy", policyConfigMap("podpatch-system", "cost-center", layeredPolicies[4].doc)},
		{"every-rule", parseConfigMapYAML(b, everyRulePolicies)},
		{"10-policies", policyConfigMap("default", "team", func() []string {
			docs := make([]string, 10)
			for i := range docs {
				docs[i] = strings.Replace(layeredPolicies[3].doc, "big-workers", fmt.Sprintf("big-workers-%d", i), 1)
			}
			return docs
		}()...)},
	}
	for _, c := range cases {
		if _, probs := policies.ParseConfigMap(c.cm, opts); len(probs) > 0 {
			b.Fatalf("%s: %v", c.name, probs)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				policies.ParseConfigMap(c.cm, opts)
			}
		})
	}
}
