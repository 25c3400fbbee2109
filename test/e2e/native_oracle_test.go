package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/native"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/kueue"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/test/cluster"
)

// The namespaces of TestNativeValidityOracle: its objects', and its probe's (where only the
// probe policy selects Pods).
const (
	nativeOracleNamespace = "native-oracle"
	nativeOracleProbe     = "native-oracle-probe"
	// nativeOracleProbeLabel is the probe policy's label: its value names the round.
	nativeOracleProbeLabel = "native-oracle-round"
	// maxAnnotationBytes is the API server's bound on an object's annotations, keys and values
	// (reference §8, annotations-too-long).
	maxAnnotationBytes = 256 << 10
)

// nativeOracleLabelKeys are the label keys drawn policies set and drawn objects name in
// matchLabelKeys.
var nativeOracleLabelKeys = []string{"app", "team", "tier"}

// TestNativeValidityOracle: the MAPs alone never get an object refused that the API server
// admits without admission (reference §8: podpatch never breaks the workload; the webhook leaves a
// policy out where it would, docs/native.md says a MAP is not compiled or skipped by a guard
// there). In rounds, a random lint-valid set of policies of the compiling families, with values
// that can make an object invalid (labels an object names in matchLabelKeys, annotations that
// take it beyond 256 KiB, nodeSelector keys a RuntimeClass sets, tolerations and env variables the
// object holds), is compiled with native.Compile and only its MAPs are installed; each drawn
// object (a manager's Pod with edits that meet those values) is created (server dry-run) with
// nothing installed (the control), then through the MAPs: of those the control admits, none is
// refused.
func TestNativeValidityOracle(t *testing.T) {
	ctx := contextBackground()
	seed := propertySeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x4f))
	ensureNamespace(t, nativeOracleNamespace)
	ensureNamespace(t, nativeOracleProbe)
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: oracleRuntime}, Handler: "runsc",
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "yes"}}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(ctx, rc)))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), rc) })

	var tried, admitted, patched int
	var refused []string
	for round := range 3 {
		cms := drawPolicyConfigMaps(t, rng, fmt.Sprintf("oracle%d", round), []policyScope{{policies.DefaultPlatformNamespace, 20}}, drawOraclePolicy)
		cms = append(cms, policyConfigMap(policies.DefaultPlatformNamespace, fmt.Sprintf("oracle%d-probe", round), map[string]string{
			"probe.yaml": fmt.Sprintf(`{"apiVersion": %q, "kind": %q, "metadata": {"name": "probe"}, "spec": {"mode": "merge", `+
				`"match": {"namespaces": [%q]}, "template": {"metadata": {"labels": {%q: "%d"}}}}}`,
				policies.APIVersion, policies.DocumentKind, nativeOracleProbe, nativeOracleProbeLabel, round)}))
		set := storePolicyConfigMaps(t, cms)
		out := native.Compile(set, policies.DefaultPlatformNamespace, native.Options{
			ExcludedNamespaces: []string{"kube-system", "kube-node-lease", policies.DefaultPlatformNamespace}})
		require.Greater(t, len(out.Compiled), 1, "the probe and some drawn policies compile")

		// The control: nothing installed, the MAPs of an earlier round or test no longer in effect.
		probes := oracleProbePods(t)
		storedOnceApplied(t, probes, make([]string, len(probes)), "nothing installed")
		objs, edits := make([]*unstructured.Unstructured, 48), make([]string, 48)
		control := make([]error, len(objs))
		for i := range objs {
			objs[i], edits[i] = drawOracleObject(t, rng, fmt.Sprintf("oracle-%d-%d", round, i))
			control[i] = dryRunCreateObject(t, objs[i])
		}
		installed := installNativeGroups(t, out.Groups)
		waitForOracleRound(t, round, out.Groups)
		for i, obj := range objs {
			tried++
			if control[i] != nil {
				continue
			}
			admitted++
			got := obj.DeepCopy()
			err := k8s.Create(ctx, got, client.DryRunAll)
			switch {
			case err == nil:
				if got.GetAnnotations()[policies.AppliedAnnotation] != "" {
					patched++
				}
			case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
				refused = append(refused, fmt.Sprintf("round %d, %s (%s): %v", round, obj.GetName(), edits[i], err))
			default:
				require.NoError(t, err, "dry-run create failed for another reason than the object")
			}
		}
		if len(refused) > 0 {
			logPolicyConfigMaps(t, cms)
			break
		}
		for _, o := range installed {
			require.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, o)))
		}
	}
	t.Logf("the MAPs alone: %d objects tried, %d admitted by the control, %d refused with the MAPs (%d patched by them)",
		tried, admitted, len(refused), patched)
	require.Empty(t, refused, "seed %d: the MAPs got objects refused that the API server admits without them:\n%s",
		seed, strings.Join(refused, "\n"))
	require.NotZero(t, patched, "the MAPs patched some object")
}

// waitForOracleRound waits until the MAPs of a round are in effect: every fixture, created in the
// probe namespace without annotations, gets the round's probe label, but those of a group that
// may add annotations beyond the API server's bound, which applies to no Pod.
func waitForOracleRound(t *testing.T, round int, groups []native.Group) {
	t.Helper()
	want := fmt.Sprint(round)
	dead := map[string]bool{}
	for _, g := range groups {
		for _, c := range g.Policy.Spec.MatchConditions {
			_, bound, _ := strings.Cut(c.Expression, " <= ")
			if n, err := strconv.Atoi(bound); c.Name == "annotations-room" && err == nil && n < 0 {
				dead[g.Policy.Name] = true
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var late []string
		for _, pod := range oracleProbePods(t) {
			if id, ok := profiles.Recognise(profiles.KindPod, pod.Labels, nil); ok && dead[native.Name(id.Manager, id.Role, profiles.KindPod)] {
				continue
			}
			if got := dryRunCreate(t, pod); got.Labels[nativeOracleProbeLabel] != want {
				late = append(late, pod.Name)
			}
		}
		if len(late) == 0 {
			return
		}
		require.False(t, time.Now().After(deadline), "round %d: the MAPs never applied to %v", round, late)
		<-tick.C
	}
}

// oracleProbePods are the fixtures in the probe namespace, without annotations: a MAP that may
// add more than the API server's bound skips the Pods that have some (guardAnnotations).
func oracleProbePods(t *testing.T) []*corev1.Pod {
	t.Helper()
	var out []*corev1.Pod
	for i, f := range nativeFixtures {
		pod := labPod(t, f, fmt.Sprintf("probe-%d", i), nil)
		pod.Namespace, pod.Annotations = nativeOracleProbe, nil
		out = append(out, pod)
	}
	return out
}

// drawOraclePolicy draws a policy of the families package native compiles, selecting Pods of the
// oracle's namespace, with values drawOracleObject's edits meet.
func drawOraclePolicy(rng *rand.Rand, name string, platform bool) string {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	chance := func(n int) bool { return rng.IntN(100) < n }
	mode := pick("default", "merge")
	if platform && chance(30) {
		mode = "enforce"
	}
	match := map[string]any{"namespaces": []string{nativeOracleNamespace}}
	if chance(30) {
		match["managers"] = []string{pick("dask", "spark", "ray", "flink")}
	}
	value := func(v string) any {
		if mode != "default" && chance(15) {
			return nil // removes the key (reference §3)
		}
		return v
	}
	meta, spec := map[string]any{}, map[string]any{}
	if chance(40) {
		meta["labels"] = map[string]any{pick(nativeOracleLabelKeys...): value(pick("a", "b"))}
	}
	if chance(60) {
		// Values of 30,000 bytes: nine of them take a Pod beyond the API server's bound.
		meta["annotations"] = map[string]any{fmt.Sprintf("example.com/big-%d", rng.IntN(24)): value(strings.Repeat("x", 30000))}
		if chance(20) {
			meta["annotations"] = map[string]any{"note": value(pick("x", "y"))}
		}
	}
	if chance(30) {
		spec["nodeSelector"] = map[string]any{pick("sandbox", "pool"): value(pick("yes", "no", "x"))}
	}
	if chance(30) {
		spec["tolerations"] = []any{oracleTolerations[rng.IntN(len(oracleTolerations))]}
	}
	if chance(25) {
		req := pick("pool", "sandbox")
		term := map[string]any{"matchExpressions": []any{map[string]any{"key": req, "operator": pick("In", "NotIn"), "values": []any{pick("x", "yes")}}}}
		if chance(30) {
			term = map[string]any{"matchFields": []any{map[string]any{"key": "metadata.name", "operator": pick("In", "NotIn"), "values": []any{"node-1"}}}}
		}
		spec["affinity"] = map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{term}}}}
	}
	if chance(30) {
		spec["containers"] = []any{map[string]any{"name": pick("*", "@main", "worker", "spark-kubernetes-executor"),
			"env": []any{map[string]any{"name": pick("NATIVE_A", "SPARK_EXECUTOR_POD_IP", "RAY_CLUSTER_NAME"), "value": pick("1", "$(NATIVE_B)")}}}}
	}
	if len(meta)+len(spec) == 0 {
		meta["labels"] = map[string]any{pick(nativeOracleLabelKeys...): pick("a", "b")}
	}
	tmpl := map[string]any{}
	if len(meta) > 0 {
		tmpl["metadata"] = meta
	}
	if len(spec) > 0 {
		tmpl["spec"] = spec
	}
	b, err := json.Marshal(map[string]any{"apiVersion": policies.APIVersion, "kind": policies.DocumentKind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"mode": mode, "priority": rng.IntN(3), "match": match, "template": tmpl}})
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return string(b) + "\n"
}

// oracleTolerations are the tolerations policies and objects draw from: some of the same
// identity with other members.
var oracleTolerations = []map[string]any{
	{"key": "spot", "value": "true", "effect": "NoSchedule"},
	{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
	{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int64(60)},
	{"key": "maint", "operator": "Exists", "effect": "NoExecute"},
	{"key": "maint", "operator": "Exists"},
	{"operator": "Exists"},
	{"key": corev1.TaintNodeNotReady, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int64(30)},
}

// drawOracleObject draws a manager's Pod in the oracle's namespace with edits that meet what
// drawOraclePolicy writes, and says which.
func drawOracleObject(t *testing.T, rng *rand.Rand, name string) (*unstructured.Unstructured, string) {
	t.Helper()
	fixture := nativeFixtures[rng.IntN(len(nativeFixtures))]
	u := readObject(t, cluster.FixtureDir+fixture)
	obj := u.Object
	meta := obj["metadata"].(map[string]any)
	delete(meta, "ownerReferences")
	delete(meta, "generateName")
	meta["name"], meta["namespace"] = name, nativeOracleNamespace
	spec := podSpec(obj)
	chance := func(n int) bool { return rng.IntN(100) < n }
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	edits := []string{fixture}
	labels := u.GetLabels()
	if chance(25) {
		k := pick(nativeOracleLabelKeys...)
		labels[k] = "c"
		edits = append(edits, "label "+k)
	}
	if chance(10) {
		labels[kueue.QueueLabel] = "q"
		edits = append(edits, "Kueue queue label")
	}
	if chance(10) {
		labels[policies.SkipLabel] = "true"
		edits = append(edits, "skip label")
	}
	meta["labels"] = toAny(labels)
	if chance(30) {
		spec["runtimeClassName"] = oracleRuntime
		edits = append(edits, "RuntimeClass")
		if chance(50) {
			spec["nodeSelector"] = map[string]any{"sandbox": "yes"}
			edits = append(edits, "its nodeSelector")
		}
	}
	if chance(40) {
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		used := 0
		for k, v := range ann {
			used += len(k) + len(v)
		}
		room := []int{0, 1, 64, 512, 4096, 40000, 100000, 200000}[rng.IntN(8)]
		const key = "example.com/filler"
		ann[key] = strings.Repeat("f", maxAnnotationBytes-used-len(key)-room)
		meta["annotations"] = toAny(ann)
		edits = append(edits, fmt.Sprintf("annotations %d bytes below the bound", room))
	}
	if chance(30) {
		k := pick(nativeOracleLabelKeys...)
		aff, _ := spec["affinity"].(map[string]any)
		if aff == nil {
			aff = map[string]any{}
		}
		aff["podAntiAffinity"] = antiAffinity(k)["podAntiAffinity"]
		spec["affinity"] = aff
		edits = append(edits, "anti-affinity matchLabelKeys "+k)
	}
	if chance(20) {
		k := pick(nativeOracleLabelKeys...)
		spec["topologySpreadConstraints"] = []any{map[string]any{"maxSkew": int64(1), "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
			"labelSelector": map[string]any{}, "matchLabelKeys": []any{k, k}}}
		edits = append(edits, "topology spread matchLabelKeys "+k+" twice")
	}
	if chance(30) {
		tols, _ := spec["tolerations"].([]any)
		for range 1 + rng.IntN(2) {
			tol := map[string]any{}
			for k, v := range oracleTolerations[rng.IntN(len(oracleTolerations))] {
				tol[k] = v
			}
			tols = append(tols, tol)
		}
		spec["tolerations"] = tols
		edits = append(edits, "tolerations")
	}
	if chance(25) {
		c := spec["containers"].([]any)[0].(map[string]any)
		env, _ := c["env"].([]any)
		c["env"] = append(env, map[string]any{"name": pick("NATIVE_A", "NATIVE_B"),
			"valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}})
		edits = append(edits, "env from a source")
	}
	if chance(30) {
		aff, _ := spec["affinity"].(map[string]any)
		if aff == nil {
			aff = map[string]any{}
		}
		aff["nodeAffinity"] = map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
			map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"x"}}}},
			map[string]any{"matchFields": []any{map[string]any{"key": "metadata.name", "operator": "NotIn", "values": []any{"node-1"}}}},
		}}}
		spec["affinity"] = aff
		edits = append(edits, "required node affinity")
	}
	return u, strings.Join(edits, ", ")
}

// toAny is a string map as unstructured holds it.
func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
