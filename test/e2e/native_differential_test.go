package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/native"
	"github.com/podpatch/podpatch/policies"
	renderpkg "github.com/podpatch/podpatch/render"
)

// nativeBucketLabel puts a case's Pod in one of two buckets that drawn selectors read.
const nativeBucketLabel = "native-bucket"

// nativeNamespaces are the differential's namespaces and their labels (for namespaceSelector).
var nativeNamespaces = map[string]string{"native-diff-a": "gold", "native-diff-b": "silver"}

// nativeFixtures are the manager Pods the cases create, as each manager writes them; a third
// of the cases gets required node affinity terms of its own, a sixth the skip label.
var nativeFixtures = []string{
	"dask-operator/scheduler-pod.yaml", "dask-operator/worker-pod.yaml", "dask-operator/job-runner-pod.yaml",
	"dask-classic/worker-pod.yaml", "dask-gateway/worker-pod.yaml", "kuberay/head-pod.yaml", "kuberay/worker-pod.yaml",
	"spark/driver-pod.yaml", "spark/executor-pod.yaml", "spark-operator/executor-pod.yaml",
	"flink/jobmanager-pod.yaml", "flink/taskmanager-pod.yaml",
}

// TestNativeDifferential: random lint-valid policy sets of the families package native
// compiles (labels, annotations, nodeSelector, tolerations, required node affinity, env variables
// of containers by name, "@main" and "*"; every mode, both scopes, selections
// by manager, role, cluster, group, label selector, namespace and namespaceSelector) against
// the managers' Pods in two namespaces. Each Pod is created (server dry-run) once through the
// webhook alone and once through the compiled MutatingAdmissionPolicies alone: the objects the
// API server would store are equal, podpatch.io/applied (with the ConfigMaps' resourceVersions)
// included.
func TestNativeDifferential(t *testing.T) {
	ctx := contextBackground()
	seed := propertySeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x55))
	// Before 1.35 the MAPs cannot use CEL's list library: only the string maps compile.
	v, _ := testKubeVersion(t)
	draw := drawNativePolicy
	if v.Minor < 35 {
		draw = func(rng *rand.Rand, name string, platform bool) string {
			return withoutListFamilies(drawNativePolicy(rng, name, platform))
		}
	}
	tierNativeNamespaces(t)

	// The policies, each linted alone as `podpatch lint` would; the set as the webhook compiles
	// it, with the ConfigMaps' resourceVersions.
	cms := drawPolicyConfigMaps(t, rng, "native", []policyScope{
		{policies.DefaultPlatformNamespace, 24}, {"native-diff-a", 8}, {"native-diff-b", 8}}, draw)
	set := storePolicyConfigMaps(t, cms)
	out := native.Compile(set, policies.DefaultPlatformNamespace, native.Options{Minor: v.Minor,
		ExcludedNamespaces: []string{"kube-system", "kube-node-lease", policies.DefaultPlatformNamespace}})
	require.Empty(t, out.Left, "every drawn policy is of a family that compiles")
	drawn := set.Count(policies.ScopePlatform) + set.Count(policies.ScopeNamespace)
	require.Len(t, out.Compiled, drawn)

	pods := nativeCases(t, rng)

	// 1. The webhook alone, once it serves the drawn policies (as render applies them).
	certDir, ca := servingCerts(t)
	p := startPodpatch(t, certDir)
	mwc, vwc := webhookConfigurations(t, kustomizeBuild(t, "manifests/base"), p.url(), ca)
	installWebhooks(t, mwc, vwc)
	want := make([]string, len(pods))
	applied := 0
	for i, pod := range pods {
		withDefaultTolerations(pod)
		if want[i] = renderNative(t, set, pod).Annotations[policies.AppliedAnnotation]; want[i] != "" {
			applied++
		}
	}
	webhook := storedOnceApplied(t, pods, want, "the webhook alone")
	for _, o := range []client.Object{mwc, vwc} {
		require.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, o)))
	}
	p.stop(t) // and a webhook call the API server still makes fails open, changing nothing

	// 2. The MAPs alone, in the version the API server serves (v1 from 1.36, v1beta1 on 1.34
	// or 1.35 with its gate on): equal once the API server has loaded them.
	t.Logf("MutatingAdmissionPolicies in admissionregistration.k8s.io/%s", map[bool]string{true: native.V1, false: native.V1beta1}[servesV1MAP(t)])
	installNativeGroups(t, out.Groups)
	var differ []string
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		differ = nil
		for i, pod := range pods {
			got := pod.DeepCopy()
			if err := k8s.Create(ctx, got, client.DryRunAll); err != nil {
				differ = append(differ, fmt.Sprintf("case %d (%s/%s): the MAPs' create failed: %v", i, pod.Namespace, pod.Name, err))
				continue
			}
			if m := storedFields(t, got); !reflect.DeepEqual(m, webhook[i]) {
				differ = append(differ, fmt.Sprintf("case %d (%s/%s, bucket %q), applied %s:\n%s", i, pod.Namespace, pod.Name,
					pod.Labels[nativeBucketLabel], got.Annotations[policies.AppliedAnnotation], fieldDiff(t, webhook[i], m)))
			}
		}
		if len(differ) == 0 || time.Now().After(deadline) {
			break
		}
		<-tick.C
	}
	if len(differ) > 0 {
		logPolicyConfigMaps(t, cms)
	}
	require.Empty(t, differ, "seed %d: the MAPs' object differs from the webhook's in %d of %d cases:\n%s",
		seed, len(differ), len(pods), strings.Join(differ, "\n"))
	t.Logf("%d policies in %d ConfigMaps compiled into %d MAPs; %d cases, %d patched, equal through the MAPs and the webhook",
		drawn, len(cms), len(out.Groups), len(pods), applied)
}

// withoutListFamilies is a drawn policy without the families whose MAPs need CEL's list library
// (tolerations, required node affinity, containers' env variables); lint refuses the draw when
// nothing is left, and it is drawn again.
func withoutListFamilies(doc string) string {
	var d map[string]any
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		panic(err) // drawNativePolicy marshals a map
	}
	tmpl, _ := d["spec"].(map[string]any)["template"].(map[string]any)
	if spec, ok := tmpl["spec"].(map[string]any); ok {
		delete(spec, "tolerations")
		delete(spec, "affinity")
		delete(spec, "containers")
	}
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return string(b) + "\n"
}

// renderNative is `podpatch render` of a case's Pod in its namespace (render, the
// engine the webhook runs).
func renderNative(t *testing.T, set *policies.Set, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	require.NoError(t, err)
	obj["apiVersion"], obj["kind"] = "v1", "Pod"
	res, _, err := renderpkg.Object(set, obj, renderpkg.Options{Namespace: pod.Namespace,
		NamespaceLabels: map[string]string{corev1.LabelMetadataName: pod.Namespace, "native-tier": nativeNamespaces[pod.Namespace]}})
	require.NoError(t, err)
	require.False(t, res.Denied, "%s: render denies it: %s", pod.Name, res.Denial())
	if !res.Changed {
		return pod.DeepCopy()
	}
	out := &corev1.Pod{}
	require.NoError(t, json.Unmarshal(res.Object, out))
	return out
}

// storedFields is a Pod as the API server would store it, without what differs between two
// creates of the same object (uid, timestamps, managed fields).
func storedFields(t *testing.T, pod *corev1.Pod) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	require.NoError(t, err)
	meta, _ := m["metadata"].(map[string]any)
	for _, k := range []string{"uid", "creationTimestamp", "resourceVersion", "generation", "managedFields"} {
		delete(meta, k)
	}
	return m
}

// fieldDiff is a unified diff of two objects as indented JSON.
func fieldDiff(t *testing.T, want, got map[string]any) string {
	t.Helper()
	w, err := json.MarshalIndent(want, "", "  ")
	require.NoError(t, err)
	g, err := json.MarshalIndent(got, "", "  ")
	require.NoError(t, err)
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(w)), B: difflib.SplitLines(string(g)),
		FromFile: "webhook", ToFile: "MAPs", Context: 12})
	require.NoError(t, err)
	return d
}

// drawNativePolicy draws one policy of the families package native compiles, as a JSON
// document (YAML reads it).
func drawNativePolicy(rng *rand.Rand, name string, platform bool) string {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	chance := func(n int) bool { return rng.IntN(100) < n }
	mode := pick("default", "merge")
	if platform && chance(30) {
		mode = "enforce"
	}
	match := map[string]any{}
	if chance(50) {
		ms := []string{pick("dask", "dask-gateway", "spark", "ray", "flink")}
		if chance(30) {
			ms = append(ms, pick("dask", "spark", "ray"))
		}
		match["managers"] = ms
	}
	if chance(30) {
		match["roles"] = []string{pick("scheduler", "worker", "job", "driver", "executor", "head")}
	}
	if chance(15) {
		match["clusters"] = []string{pick("*", "?*", "zz*", "*-*")}
	}
	if chance(10) {
		match["groups"] = []string{pick("*", "gpu*", "default*")}
	}
	if chance(40) {
		switch rng.IntN(4) {
		case 0:
			match["selector"] = map[string]any{"matchLabels": map[string]any{nativeBucketLabel: pick("a", "b")}}
		case 1:
			match["selector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": nativeBucketLabel, "operator": "NotIn", "values": []any{pick("a", "b")}}}}
		case 2:
			match["selector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": nativeBucketLabel, "operator": "Exists"}}}
		default:
			match["selector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": nativeBucketLabel, "operator": "DoesNotExist"}}}
		}
	}
	if platform && chance(20) {
		match["namespaces"] = []string{pick("native-diff-a", "*-b", "native-*")}
	}
	if platform && chance(20) {
		match["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{"native-tier": pick("gold", "silver")}}
	}
	value := func(vals ...string) any {
		if mode != "default" && chance(15) {
			return nil // removes the key (reference §3)
		}
		return pick(vals...)
	}
	strMap := func(keys []string, vals ...string) map[string]any {
		m := map[string]any{}
		for range 1 + rng.IntN(2) {
			m[pick(keys...)] = value(vals...)
		}
		return m
	}
	meta, spec := map[string]any{}, map[string]any{}
	if chance(50) {
		meta["labels"] = strMap([]string{"team", "cost-center", "native.example.com/tier"}, "a", "b", "c")
	}
	if chance(40) {
		meta["annotations"] = strMap([]string{"example.com/owner", "note", "example.com/quote"}, "x", "y", `he said "hi" \ ${x} ~/`)
	}
	if chance(40) {
		spec["nodeSelector"] = strMap([]string{"pool", "example.com/zone"}, "x", "y")
	}
	if chance(40) {
		pool := []map[string]any{
			{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
			{"key": "spot", "value": "true", "effect": "NoSchedule"},
			{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
			{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
			{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 120},
			{"key": "maint", "operator": "Exists", "effect": "NoExecute"},
			{"key": corev1.TaintNodeNotReady, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
		}
		var tols []any
		seen := map[int]bool{}
		for range 1 + rng.IntN(2) {
			if i := rng.IntN(len(pool)); !seen[i] {
				seen[i] = true
				tols = append(tols, pool[i])
			}
		}
		spec["tolerations"] = tols
	}
	if chance(35) {
		pool := []map[string]any{
			{"key": "pool", "operator": "In", "values": []any{"x"}},
			{"key": "pool", "operator": "In", "values": []any{"x", "y"}},
			{"key": "example.com/zone", "operator": "NotIn", "values": []any{"z"}},
			{"key": "gpu", "operator": "Exists"},
			{"key": "pool", "operator": "DoesNotExist"},
		}
		term := map[string]any{}
		var reqs []any
		seen := map[int]bool{}
		for range 1 + rng.IntN(2) {
			if i := rng.IntN(len(pool)); !seen[i] {
				seen[i] = true
				reqs = append(reqs, pool[i])
			}
		}
		if chance(70) {
			term["matchExpressions"] = reqs
		}
		if len(term) == 0 || chance(20) {
			term["matchFields"] = []any{map[string]any{"key": "metadata.name", "operator": "NotIn", "values": []any{pick("node-1", "node-2")}}}
		}
		spec["affinity"] = map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{term}}}}
	}
	if chance(35) {
		var entries []any
		for range 1 + rng.IntN(2) {
			var env []any
			seen := map[string]bool{}
			for range 1 + rng.IntN(2) {
				// RAY_CLUSTER_NAME is a fixture's own variable with a value, SPARK_EXECUTOR_POD_IP
				// and _POD_IP_ADDRESS their own from a source (which a value may not join).
				n := pick("NATIVE_A", "NATIVE_B", "RAY_CLUSTER_NAME", "SPARK_EXECUTOR_POD_IP", "_POD_IP_ADDRESS")
				if !seen[n] {
					seen[n] = true
					env = append(env, map[string]any{"name": n, "value": pick("1", "2", `a "quoted" \ value`)})
				}
			}
			entries = append(entries, map[string]any{"name": pick("*", "*", "@main", "@main", "worker", "ray-worker", "spark-kubernetes-executor", "no-such"), "env": env})
		}
		names := map[string]bool{}
		var unique []any
		for _, e := range entries {
			if n := e.(map[string]any)["name"].(string); !names[n] {
				names[n] = true
				unique = append(unique, e)
			}
		}
		spec["containers"] = unique
	}
	if len(meta)+len(spec) == 0 {
		meta["labels"] = map[string]any{"team": pick("a", "b")}
	}
	tmpl := map[string]any{}
	if len(meta) > 0 {
		tmpl["metadata"] = meta
	}
	if len(spec) > 0 {
		tmpl["spec"] = spec
	}
	doc := map[string]any{"apiVersion": policies.APIVersion, "kind": policies.DocumentKind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"mode": mode, "priority": rng.IntN(3), "match": match, "template": tmpl}}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return string(b) + "\n"
}

// servesV1MAP says whether the API server serves MutatingAdmissionPolicies in
// admissionregistration.k8s.io/v1 (Kubernetes 1.36 and later).
func servesV1MAP(t testing.TB) bool {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	require.NoError(t, err)
	rs, err := dc.ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	require.NoError(t, err)
	for _, r := range rs.APIResources {
		if r.Name == "mutatingadmissionpolicies" {
			return true
		}
	}
	return false
}

// asServed is a generated v1 object, or its v1beta1 twin (the same fields, decoded strictly).
func asServed(t testing.TB, obj client.Object, beta bool) client.Object {
	t.Helper()
	if !beta {
		return obj.DeepCopyObject().(client.Object)
	}
	var out client.Object = &admissionregistrationv1beta1.MutatingAdmissionPolicy{}
	if _, ok := obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding); ok {
		out = &admissionregistrationv1beta1.MutatingAdmissionPolicyBinding{}
	}
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(out))
	out.GetObjectKind().SetGroupVersionKind(admissionregistrationv1beta1.SchemeGroupVersion.WithKind(obj.GetObjectKind().GroupVersionKind().Kind))
	return out
}

// TestNativeExamples: what `podpatch map --kube-version` (the API server's) prints for
// manifests/examples is accepted by the API server, every MAP and binding (server dry-run), and
// a Spark executor created through those MAPs alone gets the example policies that compile.
func TestNativeExamples(t *testing.T) {
	v, _ := testKubeVersion(t)
	out, err := execOutput(podpatchBin, "map", "--kube-version", fmt.Sprintf("1.%d", v.Minor), "--policies", filepath.Join(repoRoot, "manifests", "examples"))
	require.NoError(t, err)
	ctx := contextBackground()
	var objs []client.Object
	for _, doc := range strings.Split(strings.TrimPrefix(string(out), "---\n"), "\n---\n") {
		u := fromYAML(t, []byte(doc))
		if u.GetKind() == "" {
			continue // comments only
		}
		require.Contains(t, []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}, u.GetKind())
		objs = append(objs, u)
	}
	require.NotEmpty(t, objs)
	for _, o := range objs {
		require.NoError(t, k8s.Create(ctx, o.DeepCopyObject().(client.Object), client.DryRunAll), "%s %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
	}
	// Installed, the executor's MAP applies spot-executors and cost-center, as the webhook would.
	for _, o := range objs {
		if !strings.HasPrefix(o.GetName(), "podpatch.spark.worker.") {
			continue
		}
		require.NoError(t, k8s.Create(ctx, o))
		t.Cleanup(func() { _ = k8s.Delete(ctx, o) })
	}
	ensureNamespace(t, "native-examples")
	pod := labPod(t, "spark/executor-pod.yaml", "native-example", nil)
	pod.Namespace = "native-examples"
	// On 1.34 spot-executors' tolerations need the list library it lacks: the webhook's.
	spot := v.Minor >= 35
	applied := "podpatch-system/cost-center/cost-center"
	if spot {
		applied = "podpatch-system/spark-spot/spot-executors," + applied
	}
	require.Eventually(t, func() bool {
		got := pod.DeepCopy()
		require.NoError(t, k8s.Create(ctx, got, client.DryRunAll))
		return got.Annotations[policies.AppliedAnnotation] == applied && got.Labels["cost-center"] == "data-platform" &&
			slices.ContainsFunc(got.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == "cloud.google.com/gke-spot" }) == spot
	}, 60*time.Second, 200*time.Millisecond, "the examples' MAPs never applied to a Spark executor as %s", applied)
}
