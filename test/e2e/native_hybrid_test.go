package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/native"
	"github.com/podpatch/podpatch/policies"
)

// minHybridCompiled is how many policies of TestNativeHybrid's set compile at least.
const minHybridCompiled = 5

// TestNativeHybrid: podpatch's webhook next to the MAPs it compiles (docs/native.md, "Keep the
// webhook installed next to the MAPs"). Random lint-valid policy sets mix the families package
// native compiles with policies it leaves to the webhook (a field of theirs does not compile:
// resources, securityContext, preferred node affinity, an annotation in a kubernetes.io
// domain). Every case's Pod is created (server dry-run) three times: through the webhook alone;
// through the MAPs alone, the webhook configured but podpatch stopped (failurePolicy Ignore), when
// it gets exactly the compiled policies; and through both (the API server runs MAPs before
// webhooks), when the webhook finds the compiled part applied (its fixed point) and adds the
// rest: the object the API server would store is the webhook alone's, podpatch.io/applied
// included.
func TestNativeHybrid(t *testing.T) {
	seed := propertySeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x48))
	tierNativeNamespaces(t)

	opts := native.Options{ExcludedNamespaces: []string{"kube-system", "kube-node-lease", policies.DefaultPlatformNamespace}}
	// A set is drawn again until some of it compiles: policies left to the webhook that write
	// what compiled ones write take those with them (package native's hybrid rule), and a
	// set of which nothing compiles proves nothing here.
	var cms []*corev1.ConfigMap
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 20, "seed %d: 20 drawn sets of which fewer than %d policies compile", seed, minHybridCompiled)
		cms = drawPolicyConfigMaps(t, rng, "hybrid", []policyScope{
			{policies.DefaultPlatformNamespace, 24}, {"native-diff-a", 8}, {"native-diff-b", 8}}, drawHybridPolicy)
		s, probs := policies.Compile(sourced(cms), policies.DefaultOptions())
		require.Empty(t, probs, "%s", policies.ProblemLines(probs))
		if o := native.Compile(s, policies.DefaultPlatformNamespace, opts); len(o.Compiled) >= minHybridCompiled && len(o.Left) > 0 {
			break
		}
	}
	set := storePolicyConfigMaps(t, cms)
	out := native.Compile(set, policies.DefaultPlatformNamespace, opts)
	require.GreaterOrEqual(t, len(out.Compiled), minHybridCompiled, "the stored set compiles as drawn")
	require.NotEmpty(t, out.Left, "the draw leaves some policies to the webhook")
	compiled := map[string]bool{}
	for _, c := range out.Compiled {
		compiled[c.Ref] = true
	}

	pods := nativeCases(t, rng)
	want, wantMAPs := make([]string, len(pods)), make([]string, len(pods))
	both := 0
	for i, pod := range pods {
		withDefaultTolerations(pod)
		want[i] = renderNative(t, set, pod).Annotations[policies.AppliedAnnotation]
		var refs []string
		for r := range strings.SplitSeq(want[i], ",") {
			if compiled[r] {
				refs = append(refs, r)
			}
		}
		wantMAPs[i] = strings.Join(refs, ",")
		if wantMAPs[i] != "" && wantMAPs[i] != want[i] {
			both++
		}
	}
	require.NotZero(t, both, "some case gets compiled policies and policies left to the webhook")

	// 0. Nothing installed: the MAPs of an earlier test, deleted, no longer in effect.
	storedOnceApplied(t, pods, make([]string, len(pods)), "nothing installed")

	// 1. The webhook alone, once it serves the drawn policies (as render applies them).
	port := heldPort(t)
	certDir, ca := servingCerts(t)
	p := startPodpatchOnPort(t, port, certDir)
	mwc, vwc := webhookConfigurations(t, kustomizeBuild(t, "manifests/base"), p.url(), ca)
	installWebhooks(t, mwc, vwc)
	webhook := storedOnceApplied(t, pods, want, "the webhook alone")

	// 2. podpatch down, the webhook still configured: the MAPs alone apply the compiled
	// policies, and only those.
	p.stop(t)
	installNativeGroups(t, out.Groups)
	storedOnceApplied(t, pods, wantMAPs, "the MAPs alone, podpatch down")

	// 3. podpatch back on the same port: both.
	startPodpatchOnPort(t, port, certDir)
	hybrid := storedOnceApplied(t, pods, want, "the MAPs and the webhook")
	var differ []string
	for i, pod := range pods {
		if !reflect.DeepEqual(hybrid[i], webhook[i]) {
			differ = append(differ, fmt.Sprintf("case %d (%s/%s, bucket %q), applied %s (the MAPs: %s):\n%s", i, pod.Namespace, pod.Name,
				pod.Labels[nativeBucketLabel], want[i], wantMAPs[i], fieldDiff(t, webhook[i], hybrid[i])))
		}
	}
	if len(differ) > 0 {
		logPolicyConfigMaps(t, cms)
		for _, l := range out.Left {
			t.Logf("left to the webhook: %s %s: %s", l.Ref, l.Field, l.Reason)
		}
	}
	require.Empty(t, differ, "seed %d: the MAPs and the webhook store another object than the webhook alone in %d of %d cases:\n%s",
		seed, len(differ), len(pods), strings.Join(differ, "\n"))
	t.Logf("%d policies: %d compiled into %d MAPs, %d left to the webhook; %d cases, %d with policies of both: "+
		"through the MAPs and the webhook as through the webhook alone, through the MAPs alone the compiled policies only",
		set.Count(policies.ScopePlatform)+set.Count(policies.ScopeNamespace), len(out.Compiled), len(out.Groups),
		len(uniqueRefs(out.Left)), len(pods), both)
}

// tierNativeNamespaces creates the namespaces of nativeNamespaces with their native-tier label
// (which drawn namespaceSelectors read).
func tierNativeNamespaces(t *testing.T) {
	t.Helper()
	for ns, tier := range nativeNamespaces {
		ensureNamespace(t, ns)
		n := &corev1.Namespace{}
		require.NoError(t, k8s.Get(contextBackground(), client.ObjectKey{Name: ns}, n))
		n.Labels["native-tier"] = tier
		require.NoError(t, k8s.Update(contextBackground(), n))
	}
}

// policyScope is how many policies a drawn set holds in a namespace (the platform namespace:
// platform policies).
type policyScope struct {
	namespace string
	count     int
}

// drawPolicyConfigMaps draws policies with draw, each linted alone as `podpatch lint` would (a
// refused draw is drawn again), into ConfigMaps of at most 16 policies (reference §3) named
// prefix-<namespace>-<n>; lint accepts the whole set.
func drawPolicyConfigMaps(t *testing.T, rng *rand.Rand, prefix string, scopes []policyScope,
	draw func(rng *rand.Rand, name string, platform bool) string) []*corev1.ConfigMap {
	t.Helper()
	var cms []*corev1.ConfigMap
	drawn := 0
	for _, scope := range scopes {
		var docs []string
		for i := range scope.count {
			name := fmt.Sprintf("%s-%d", prefix, drawn)
			drawn++
			for attempt := 0; ; attempt++ {
				require.Less(t, attempt, 50, "lint refused 50 draws of %s", name)
				doc := draw(rng, name, scope.namespace == policies.DefaultPlatformNamespace)
				cm := policyConfigMap(scope.namespace, "lint", map[string]string{"p.yaml": doc})
				if lintText(t, []*corev1.ConfigMap{cm}) == "" {
					docs = append(docs, doc)
					break
				}
			}
			if len(docs) == 16 || i == scope.count-1 {
				cms = append(cms, policyConfigMap(scope.namespace, fmt.Sprintf("%s-%s-%d", prefix, scope.namespace, len(cms)),
					map[string]string{"policies.yaml": strings.Join(docs, "---\n")}))
				docs = nil
			}
		}
	}
	require.Empty(t, lintText(t, cms), "lint of the whole set")
	return cms
}

// storePolicyConfigMaps creates the ConfigMaps until the test ends and returns their set as the
// webhook compiles it: with their resourceVersions, which podpatch.io/applied names.
func storePolicyConfigMaps(t *testing.T, cms []*corev1.ConfigMap) *policies.Set {
	t.Helper()
	for _, cm := range cms {
		require.NoError(t, k8s.Create(contextBackground(), cm))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), cm) })
	}
	opts := policies.DefaultOptions()
	opts.WithResourceVersion = true
	set, probs := policies.Compile(sourced(cms), opts)
	require.Empty(t, probs, "%s", policies.ProblemLines(probs))
	return set
}

// logPolicyConfigMaps logs the policies of a failed draw.
func logPolicyConfigMaps(t *testing.T, cms []*corev1.ConfigMap) {
	t.Helper()
	for _, cm := range cms {
		t.Logf("%s/%s@%s:\n%s", cm.Namespace, cm.Name, cm.ResourceVersion, cm.Data["policies.yaml"])
	}
}

// nativeCases are the differential's cases: every fixture of nativeFixtures in both namespaces,
// in a random bucket or none, a sixth with the skip label, a third with required node affinity
// terms of its own.
func nativeCases(t *testing.T, rng *rand.Rand) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for _, ns := range []string{"native-diff-a", "native-diff-b"} {
		for _, f := range nativeFixtures {
			lbls := map[string]string{}
			if b := rng.IntN(3); b < 2 {
				lbls[nativeBucketLabel] = string(rune('a' + b))
			}
			if rng.IntN(6) == 0 {
				lbls[policies.SkipLabel] = "true"
			}
			pod := labPod(t, f, fmt.Sprintf("native-%d", len(pods)), lbls)
			pod.Namespace = ns
			if rng.IntN(3) == 0 {
				if pod.Spec.Affinity == nil {
					pod.Spec.Affinity = &corev1.Affinity{}
				}
				if pod.Spec.Affinity.NodeAffinity == nil {
					pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
				}
				pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}}},
					{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-1"}}}},
				}}
			}
			pods = append(pods, pod)
		}
	}
	return pods
}

// installNativeGroups creates the compiled MAPs and bindings, in the version the API server
// serves, until the test ends, and returns them as created.
func installNativeGroups(t *testing.T, groups []native.Group) []client.Object {
	t.Helper()
	beta := !servesV1MAP(t)
	var objs []client.Object
	for _, g := range groups {
		for _, o := range []client.Object{asServed(t, g.Policy, beta), asServed(t, g.Binding, beta)} {
			require.NoError(t, k8s.Create(contextBackground(), o), "%s", g.Policy.Name)
			objs = append(objs, o)
			t.Cleanup(func() {
				if err := k8s.Delete(contextBackground(), o); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("delete %s: %v", o.GetName(), err)
				}
			})
		}
	}
	return objs
}

// storedOnceApplied creates (server dry-run) every case until each is stored with the
// podpatch.io/applied want gives it (admission reloads its configuration within about a
// second), and returns what the API server would store; after 60 s it fails naming the cases.
func storedOnceApplied(t *testing.T, pods []*corev1.Pod, want []string, through string) []map[string]any {
	t.Helper()
	stored := make([]map[string]any, len(pods))
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var differ []string
		for i, pod := range pods {
			got := pod.DeepCopy()
			if err := k8s.Create(contextBackground(), got, client.DryRunAll); err != nil {
				differ = append(differ, fmt.Sprintf("case %d (%s/%s): create failed: %v", i, pod.Namespace, pod.Name, err))
				continue
			}
			if a := got.Annotations[policies.AppliedAnnotation]; a != want[i] {
				differ = append(differ, fmt.Sprintf("case %d (%s/%s): applied %q, want %q", i, pod.Namespace, pod.Name, a, want[i]))
				continue
			}
			stored[i] = storedFields(t, got)
		}
		if len(differ) == 0 {
			return stored
		}
		if time.Now().After(deadline) {
			require.Empty(t, differ, "through %s, %d of %d cases never got their policies", through, len(differ), len(pods))
		}
		<-tick.C
	}
}

// uniqueRefs are the policies of a list of fields left to the webhook.
func uniqueRefs(left []native.Left) []string {
	var out []string
	for _, l := range left {
		if !slices.Contains(out, l.Ref) {
			out = append(out, l.Ref)
		}
	}
	return out
}

// drawHybridPolicy is drawNativePolicy, or in two draws of five a policy package native leaves
// to the webhook (a field of it does not compile), of the same selection and mode: half of
// these keep the drawn template beside that field, so that they write what compiled policies
// write (package native then leaves those compiled policies to the webhook too: the MAPs, run
// first, would order the appends or fill the defaults otherwise), half write besides only keys
// of maps that no compiled policy writes.
func drawHybridPolicy(rng *rand.Rand, name string, platform bool) string {
	doc := drawNativePolicy(rng, name, platform)
	if rng.IntN(5) >= 2 {
		return doc
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		panic(err) // drawNativePolicy marshals a map
	}
	spec := map[string]any{}
	meta := map[string]any{}
	switch rng.IntN(4) {
	case 0: // resources need the namespace's LimitRanges (reference §8)
		spec["containers"] = []any{map[string]any{"name": []string{"*", "@main"}[rng.IntN(2)],
			"resources": map[string]any{"requests": map[string]any{"memory": []string{"64Mi", "96Mi"}[rng.IntN(2)]}}}}
	case 1:
		spec["securityContext"] = map[string]any{"fsGroup": 1000 + rng.IntN(2)}
	case 2:
		spec["affinity"] = map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{
			map[string]any{"weight": 1 + rng.IntN(2), "preference": map[string]any{
				"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"x"}}}}}}}}
	default:
		meta["annotations"] = map[string]any{"cluster-autoscaler.kubernetes.io/safe-to-evict": []string{"true", "false"}[rng.IntN(2)]}
	}
	if rng.IntN(2) == 0 {
		meta["labels"] = map[string]any{"hybrid-team": []string{"a", "b"}[rng.IntN(2)]}
	}
	if rng.IntN(3) == 0 {
		spec["nodeSelector"] = map[string]any{"hybrid-pool": []string{"x", "y"}[rng.IntN(2)]}
	}
	tmpl := map[string]any{"spec": spec}
	if len(meta) > 0 {
		tmpl["metadata"] = meta
	}
	if rng.IntN(2) == 0 { // beside the drawn template: its own fields win where both write
		drawn, _ := d["spec"].(map[string]any)["template"].(map[string]any)
		for _, part := range []string{"metadata", "spec"} {
			own, _ := drawn[part].(map[string]any)
			added, _ := tmpl[part].(map[string]any)
			for k, v := range added {
				if _, ok := own[k]; !ok {
					if own == nil {
						own = map[string]any{}
						drawn[part] = own
					}
					own[k] = v
				}
			}
		}
		tmpl = drawn
	}
	d["spec"].(map[string]any)["template"] = tmpl
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return string(b) + "\n"
}
