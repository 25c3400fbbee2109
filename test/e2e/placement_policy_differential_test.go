package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/lint"
	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/versions"
	renderpkg "github.com/podpatch/podpatch/render"
	"github.com/podpatch/podpatch/test/cluster"
)

// policyDiffNamespace is where TestPlacementPolicyDifferential's Pods and namespace policies live.
const policyDiffNamespace = "policy-differential"

// policyDiffCaseLabel labels a case's Pod with its number; each drawn policy selects one case by
// it (match.selector, reference §3).
const policyDiffCaseLabel = "differential-case"

// policyDiffFixtures are the manager Pods the cases create, as each manager writes them
// (relative to cluster.FixtureDir); the classic Dask worker brings tolerations and a preferred
// node affinity of its own.
var policyDiffFixtures = []string{
	"dask-operator/scheduler-pod.yaml", "dask-operator/worker-pod.yaml", "dask-classic/worker-pod.yaml",
	"kuberay/head-pod.yaml", "kuberay/worker-pod.yaml", "spark/driver-pod.yaml", "spark/executor-pod.yaml",
	"flink/jobmanager-pod.yaml", "flink/taskmanager-pod.yaml",
}

// TestPlacementPolicyDifferential is TestPlacementDifferential through the policy path:
// random placement policies (nodeSelector, required node affinity with In, NotIn, Exists and
// DoesNotExist, tolerations Equal and Exists of the pools' taints, some with another value or no
// effect, now and then a topology spread constraint; every mode and both scopes; one or two a
// case), kept when `podpatch lint` accepts them, served by the
// real webhook to the managers' Pods over the lab's pools and three random ones. For every case,
// the Pod the API server stores holds the placement fields `render` predicts; and package
// placement's verdict on it is kube-scheduler's: bound to a Node placement says fits, or
// unschedulable exactly when none does, for the same reasons Node by Node. Where the Pod has
// constraints placement does not model (placement.Unmodelled), only the refusals are compared.
// Requests are not drawn: the fixtures' own stay below every Node's allocatable, and each case's
// Pod is deleted before the next is created.
func TestPlacementPolicyDifferential(t *testing.T) {
	began := time.Now()
	ctx := contextBackground()
	seed := propertySeed(t)
	// A stream of its own: the same seed draws other pools than TestPlacementDifferential's.
	rng := rand.New(rand.NewPCG(seed, 0x35b))

	startLab(t)
	pools := randomPools(rng, 3)
	created, err := cluster.CreatePools(ctx, k8s, pools)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, n := range created {
			_ = k8s.Delete(ctx, n)
		}
	})
	for _, p := range pools {
		t.Logf("random pool %s: labels %v, taints %v", p.Name, p.Labels, p.Taints)
	}
	nodes := &corev1.NodeList{}
	require.NoError(t, k8s.List(ctx, nodes))
	snap := &placement.Snapshot{Nodes: nodeRefs(nodes)}

	// The policies, a case's one or two, each linted alone as `podpatch lint` would; a draw
	// made invalid on purpose must be refused, a valid one accepted, and a refused one is drawn
	// again.
	const cases = 100
	draw := newPolicyDraw(rng, nodes)
	type policyCase struct {
		fixture  string
		policies []drawnPolicy
	}
	all := make([]policyCase, cases)
	var kept []drawnPolicy
	refused, namespaced := 0, 0
	for i := range all {
		all[i].fixture = policyDiffFixtures[rng.IntN(len(policyDiffFixtures))]
		n := 1
		if rng.IntN(4) == 0 {
			n = 2
		}
		for j := range n {
			for {
				// reference §3: at most 32 namespace policies per namespace; keep room.
				p := draw.policy(i, j, namespaced < 30)
				problems := lintText(t, []*corev1.ConfigMap{policyDiffConfigMap(p.platform, "lint", []drawnPolicy{p})})
				require.Equal(t, p.defect != "", problems != "", "lint of %s (drawn defect %q):\n%s\nlint: %s", p.name, p.defect, p.doc, problems)
				if problems != "" {
					refused++
					continue
				}
				if !p.platform {
					namespaced++
				}
				all[i].policies = append(all[i].policies, p)
				kept = append(kept, p)
				break
			}
		}
	}
	var cms []*corev1.ConfigMap
	refs := map[string]string{} // policy name → its provenance entry (reference §3, Provenance)
	for _, platform := range []bool{true, false} {
		var scope []drawnPolicy
		for _, p := range kept {
			if p.platform == platform {
				scope = append(scope, p)
			}
		}
		for k := 0; k < len(scope); k += 16 { // reference §3: at most 16 policies a ConfigMap
			cm := policyDiffConfigMap(platform, fmt.Sprintf("policy-differential-%02d", k/16), scope[k:min(k+16, len(scope))])
			for _, p := range scope[k:min(k+16, len(scope))] {
				refs[p.name] = cm.Namespace + "/" + cm.Name + "/" + p.name
			}
			cms = append(cms, cm)
		}
	}
	require.Empty(t, lintText(t, cms), "lint of the whole set")
	set := compileConfigMaps(t, cms)
	t.Logf("%d policies (%d namespace, %d platform) in %d ConfigMaps; lint refused %d draws", len(kept), namespaced, len(kept)-namespaced, len(cms), refused)

	// The real webhook serves them: all are there before podpatch starts, so they load at once.
	ensureNamespace(t, policyDiffNamespace)
	for _, cm := range cms {
		require.NoError(t, k8s.Create(ctx, cm.DeepCopy()))
		t.Cleanup(func() { _ = k8s.Delete(ctx, cm.DeepCopy()) })
	}
	servePodpatch(t)

	// The managers' Pods as podpatch receives them, and render's prediction for each.
	pods := make([]*corev1.Pod, cases)
	leftOut := 0 // policies render (and so the webhook) does not apply: left out to keep the Pod valid (reference §8)
	want := make([]*corev1.Pod, cases)
	for i, c := range all {
		pods[i] = labPod(t, c.fixture, fmt.Sprintf("policy-diff-%d", i), map[string]string{policyDiffCaseLabel: strconv.Itoa(i)})
		pods[i].Namespace = policyDiffNamespace
		withDefaultTolerations(pods[i])
		want[i] = renderPod(t, set, pods[i])
		for _, p := range c.policies {
			if !slices.Contains(strings.Split(want[i].Annotations[policies.AppliedAnnotation], ","), refs[p.name]) {
				leftOut++
			}
		}
	}
	// Loaded: a dry-run create of every case's Pod names the policies render names.
	pending := map[int]bool{}
	for i := range pods {
		pending[i] = true
	}
	require.Eventually(t, func() bool {
		for i := range pending {
			got := dryRunCreate(t, pods[i]).Annotations[policies.AppliedAnnotation]
			if withoutVersions(t, got) == want[i].Annotations[policies.AppliedAnnotation] {
				delete(pending, i)
			}
		}
		return len(pending) == 0
	}, 60*time.Second, 200*time.Millisecond, "podpatch never served the drawn policies as render applies them")

	var unschedulable, notModelled, disagreements int
	for i, c := range all {
		var names []string
		for _, p := range c.policies {
			names = append(names, p.name)
		}
		disagree := func(spec *corev1.PodSpec, format string, args ...any) {
			t.Helper()
			disagreements++
			t.Errorf("seed %d, case %d (%s, policies %s): %s\nplacement fields: %s", seed, i, c.fixture, strings.Join(names, ", "),
				fmt.Sprintf(format, args...), placementFields(t, spec))
		}
		pod := pods[i].DeepCopy()
		require.NoError(t, k8s.Create(ctx, pod))
		t.Cleanup(func() { _ = k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)) }) // when a case fails half-way
		stored := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored))

		// a. render's prediction is what the webhook made of it.
		if got, w := withoutVersions(t, stored.Annotations[policies.AppliedAnnotation]), want[i].Annotations[policies.AppliedAnnotation]; got != w {
			disagree(&stored.Spec, "the webhook applied %q, render %q", got, w)
		}
		if got, w := placementFields(t, &stored.Spec), placementFields(t, &want[i].Spec); got != w {
			disagree(&stored.Spec, "stored placement differs from render's:\nstored %s\nrender %s", got, w)
		}

		// b. placement's verdict on the stored spec, against the scheduler's.
		spec := &stored.Spec
		fits, _ := placement.Fits(spec, snap)
		verdict := placement.Check(spec, snap)
		if verdict.Schedulable != (len(fits) > 0) {
			disagree(spec, "Check says schedulable %v, Fits %v", verdict.Schedulable, fits)
		}
		if !verdict.Schedulable && verdict.Reason == "" {
			disagree(spec, "unschedulable without a reason")
		}
		unmodelled := placement.Unmodelled(spec)
		pl, err := cluster.WaitPlaced(ctx, k8s, pod.Namespace, pod.Name, 60*time.Second)
		require.NoError(t, err)
		require.NoError(t, k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)))
		// Gone before the next case's Pod, so that the scheduler never counts it against a Node.
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
		}, 30*time.Second, 20*time.Millisecond, "case %d: Pod never deleted", i)

		if len(unmodelled) > 0 {
			// c. Constraints placement does not model can refuse more, never less: a Node
			// placement refuses is refused.
			notModelled++
			switch {
			case len(fits) == 0 && pl.Unschedulable == "":
				disagree(spec, "placement says no Node fits (%s), the scheduler bound it to %s (not modelled: %v)", verdict.Reason, pl.Node, unmodelled)
			case pl.Node != "" && !slices.Contains(fits, pl.Node):
				disagree(spec, "bound to %s, which placement refuses (fits: %v; not modelled: %v)", pl.Node, fits, unmodelled)
			case pl.Unschedulable != "":
				unschedulable++
			}
			continue
		}
		if len(fits) == 0 {
			unschedulable++
			if pl.Unschedulable == "" {
				disagree(spec, "placement says no Node fits (%s), the scheduler bound it to %s", verdict.Reason, pl.Node)
				continue
			}
			// The reasons, Node by Node, in the scheduler's order (placement's too): a Node
			// failing both taints and affinity counts as a taint.
			if ours, theirs := refusals(spec, snap.Nodes), schedulerRefusals(pl.Unschedulable); !maps.Equal(ours, theirs) {
				disagree(spec, "placement's refusals %v, the scheduler's %v (%q)", ours, theirs, pl.Unschedulable)
			}
			continue
		}
		if pl.Unschedulable != "" {
			disagree(spec, "placement says %v fit, the scheduler: %s", fits, pl.Unschedulable)
			continue
		}
		if !slices.Contains(fits, pl.Node) || !pl.Running {
			disagree(spec, "bound to %s (running %v), placement says %v fit", pl.Node, pl.Running, fits)
		}
	}
	t.Logf("%d cases over %d Nodes (%d of random pools), %d policies (%d not applied), lint refused %d draws, %d unschedulable, %d not modelled, %d disagreements, %s",
		cases, len(nodes.Items), len(created), len(kept), leftOut, refused, unschedulable, notModelled, disagreements, time.Since(began).Round(time.Second))
}

// drawnPolicy is one random placement policy: its name, scope, mode and document, and, when it
// was drawn invalid on purpose, what lint must refuse in it.
type drawnPolicy struct {
	name, mode, doc, defect string
	platform                bool
}

// policyDraw draws placement policies over the label keys and values and the taints of a
// cluster's Nodes.
type policyDraw struct {
	rng    *rand.Rand
	keys   []string
	values map[string][]string
	taints []corev1.Taint
}

func newPolicyDraw(rng *rand.Rand, nodes *corev1.NodeList) *policyDraw {
	d := &policyDraw{rng: rng, values: map[string][]string{"no.such/label": {"x"}}}
	seen := map[string]bool{}
	for _, n := range nodes.Items {
		for k, v := range n.Labels {
			if !slices.Contains(d.values[k], v) {
				d.values[k] = append(d.values[k], v)
			}
		}
		for _, tn := range n.Spec.Taints {
			if s := tn.ToString(); !seen[s] {
				seen[s] = true
				d.taints = append(d.taints, tn)
			}
		}
	}
	for k := range d.values {
		d.keys = append(d.keys, k)
		sort.Strings(d.values[k])
	}
	sort.Strings(d.keys)
	sort.Slice(d.taints, func(i, j int) bool { return d.taints[i].ToString() < d.taints[j].ToString() })
	return d
}

func (d *policyDraw) pick(s []string) string { return s[d.rng.IntN(len(s))] }

// value is one of a key's values on the Nodes, or now and then one no Node has.
func (d *policyDraw) value(k string) string {
	if d.rng.IntN(6) == 0 {
		return "other"
	}
	return d.pick(d.values[k])
}

// The defects a draw may carry, each one lint must refuse (reference §3: field values are
// validated as Kubernetes validates them; a policy's required node affinity is one term;
// enforce is platform-only).
var policyDefects = []string{"In without values", "Exists with values", "several required terms", "toleration Exists with a value",
	"invalid label value", "enforce in a namespace"}

// policy draws case i's j-th policy: scope (namespace only while allowed), mode, placement
// fields, and one time in eight a defect.
func (d *policyDraw) policy(i, j int, namespaceAllowed bool) drawnPolicy {
	p := drawnPolicy{name: fmt.Sprintf("case-%d-%d", i, j), platform: !namespaceAllowed || d.rng.IntN(2) == 0}
	modes := []string{"default", "merge"}
	if p.platform {
		modes = append(modes, "enforce")
	}
	p.mode = d.pick(modes)
	if d.rng.IntN(8) == 0 {
		p.defect = d.pick(policyDefects)
		if p.defect == "enforce in a namespace" {
			p.platform, p.mode = false, "enforce"
		}
	}
	spec := map[string]any{}
	nodeSelector := map[string]string{}
	if d.rng.IntN(2) == 0 {
		for range 1 + d.rng.IntN(2) {
			k := d.pick(d.keys)
			nodeSelector[k] = d.value(k)
		}
	}
	// One required term: a policy's is ANDed into every term of the object (reference §3), and
	// lint refuses several.
	var terms []corev1.NodeSelectorTerm
	if d.rng.IntN(2) == 0 {
		var term corev1.NodeSelectorTerm
		for range 1 + d.rng.IntN(3) {
			term.MatchExpressions = append(term.MatchExpressions, d.requirement())
		}
		terms = append(terms, term)
	}
	var tolerations []corev1.Toleration
	for _, tn := range d.taints {
		switch d.rng.IntN(4) {
		case 0: // now and then another value (no match) or no effect (every effect)
			tol := corev1.Toleration{Key: tn.Key, Operator: corev1.TolerationOpEqual, Value: tn.Value, Effect: tn.Effect}
			if d.rng.IntN(5) == 0 {
				tol.Value = "other"
			}
			if d.rng.IntN(4) == 0 {
				tol.Effect = ""
			}
			tolerations = append(tolerations, tol)
		case 1:
			tol := corev1.Toleration{Key: tn.Key, Operator: corev1.TolerationOpExists}
			if d.rng.IntN(2) == 0 {
				tol.Effect = tn.Effect
			}
			tolerations = append(tolerations, tol)
		}
	}
	if d.rng.IntN(20) == 0 { // tolerates every taint
		tolerations = append(tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
	}
	if len(nodeSelector) == 0 && len(terms) == 0 && len(tolerations) == 0 {
		k := d.pick(d.keys)
		nodeSelector[k] = d.value(k)
	}
	switch p.defect {
	case "In without values", "Exists with values":
		r := corev1.NodeSelectorRequirement{Key: d.pick(d.keys), Operator: corev1.NodeSelectorOpIn}
		if p.defect == "Exists with values" {
			r.Operator, r.Values = corev1.NodeSelectorOpExists, []string{"x"}
		}
		if len(terms) == 0 {
			terms = []corev1.NodeSelectorTerm{{}}
		}
		terms[0].MatchExpressions = append(terms[0].MatchExpressions, r)
	case "several required terms":
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{d.requirement()}})
		if len(terms) == 1 {
			terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{d.requirement()}})
		}
	case "toleration Exists with a value":
		tolerations = append(tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Value: "true"})
	case "invalid label value":
		nodeSelector[d.pick(d.keys)] = "not a label value!"
	}
	if len(nodeSelector) > 0 {
		spec["nodeSelector"] = nodeSelector
	}
	if len(terms) > 0 {
		spec["affinity"] = corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	if len(tolerations) > 0 {
		spec["tolerations"] = tolerations
	}
	if d.rng.IntN(8) == 0 { // a constraint placement does not model
		spec["topologySpreadConstraints"] = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{policyDiffCaseLabel: strconv.Itoa(i)}}}}
	}
	match := map[string]any{"selector": map[string]any{"matchLabels": map[string]string{policyDiffCaseLabel: strconv.Itoa(i)}}}
	if p.platform {
		match["namespaces"] = []string{policyDiffNamespace}
	}
	doc, err := yaml.Marshal(map[string]any{"apiVersion": "podpatch.io/v1alpha1", "kind": "PodTemplatePatch",
		"metadata": map[string]any{"name": p.name},
		"spec":     map[string]any{"mode": p.mode, "match": match, "template": map[string]any{"spec": spec}}})
	if err != nil {
		panic(err) // maps of strings and API types always marshal
	}
	p.doc = string(doc)
	return p
}

// requirement is a node selector requirement with any of In, NotIn, Exists and DoesNotExist.
func (d *policyDraw) requirement() corev1.NodeSelectorRequirement {
	ops := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist}
	r := corev1.NodeSelectorRequirement{Key: d.pick(d.keys), Operator: ops[d.rng.IntN(len(ops))]}
	if r.Operator == corev1.NodeSelectorOpIn || r.Operator == corev1.NodeSelectorOpNotIn {
		r.Values = []string{d.value(r.Key), d.value(r.Key)}
		sort.Strings(r.Values)
		r.Values = slices.Compact(r.Values)
	}
	return r
}

// policyDiffConfigMap holds policies of one scope: in the platform namespace, or in the
// differential's.
func policyDiffConfigMap(platform bool, name string, ps []drawnPolicy) *corev1.ConfigMap {
	ns := policyDiffNamespace
	if platform {
		ns = policies.DefaultPlatformNamespace
	}
	var docs []string
	for _, p := range ps {
		docs = append(docs, p.doc)
	}
	return policyConfigMap(ns, name, map[string]string{"policies.yaml": strings.Join(docs, "---\n")})
}

// lintText is what `podpatch lint` (cmd/podpatch/lint.go) reports on policy ConfigMaps, in
// process and with serve's defaults: compile problems, selections that may not settle, and the
// fields the newest Kubernetes refuses; "" when it accepts them.
func lintText(t *testing.T, cms []*corev1.ConfigMap) string {
	t.Helper()
	src := sourced(cms)
	set, probs := policies.Compile(src, policies.DefaultOptions())
	probs = append(probs, lint.SelectionProblems(set, src)...)
	out := policies.ProblemLines(probs)
	if lines, refusedFields := lint.VersionEffects(set, versions.Newest); refusedFields > 0 {
		out += "\n" + strings.Join(lines, "\n")
	}
	return strings.TrimSpace(out)
}

// compileConfigMaps is the Set of policy ConfigMaps lint accepted.
func compileConfigMaps(t *testing.T, cms []*corev1.ConfigMap) *policies.Set {
	t.Helper()
	set, probs := policies.Compile(sourced(cms), policies.DefaultOptions())
	require.Empty(t, probs, "%s", policies.ProblemLines(probs))
	return set
}

func sourced(cms []*corev1.ConfigMap) []policies.SourcedConfigMap {
	var out []policies.SourcedConfigMap
	for _, cm := range cms {
		out = append(out, policies.SourcedConfigMap{File: cm.Namespace + "-" + cm.Name + ".yaml", ConfigMap: cm})
	}
	return out
}

// withDefaultTolerations adds the tolerations the API server's DefaultTolerationSeconds plugin
// gives a Pod before the webhooks see it (the generated fixtures hold them already), so that
// render patches the Pod podpatch receives.
func withDefaultTolerations(pod *corev1.Pod) {
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(tol corev1.Toleration) bool {
			return (tol.Key == key || tol.Key == "") && (tol.Effect == corev1.TaintEffectNoExecute || tol.Effect == "")
		}) {
			seconds := int64(300)
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds})
		}
	}
}

// renderPod is `podpatch render` of a Pod in the differential's namespace (render, the
// engine the webhook runs): the Pod as admission will store it, its provenance without versions.
func renderPod(t *testing.T, set *policies.Set, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	require.NoError(t, err)
	obj["apiVersion"], obj["kind"] = "v1", "Pod"
	res, _, err := renderpkg.Object(set, obj, renderpkg.Options{Namespace: policyDiffNamespace,
		NamespaceLabels: map[string]string{corev1.LabelMetadataName: policyDiffNamespace}})
	require.NoError(t, err)
	require.False(t, res.Denied, "%s: render denies it: %s", pod.Name, res.Denial())
	if !res.Changed {
		return pod.DeepCopy()
	}
	out := &corev1.Pod{}
	require.NoError(t, json.Unmarshal(res.Object, out))
	return out
}

// placementFields are a spec's fields placement reads, as JSON: what the differential compares
// and reports.
func placementFields(t *testing.T, spec *corev1.PodSpec) string {
	t.Helper()
	b, err := json.Marshal(struct {
		NodeSelector              map[string]string                 `json:"nodeSelector,omitempty"`
		Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
		Tolerations               []corev1.Toleration               `json:"tolerations,omitempty"`
		TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	}{spec.NodeSelector, spec.Affinity, spec.Tolerations, spec.TopologySpreadConstraints})
	require.NoError(t, err)
	return string(b)
}

// noNodeMessage is the scheduler's FailedScheduling message: "0/N nodes are available: K
// reason, M reason." and what preemption said.
var noNodeMessage = regexp.MustCompile(`^0/(\d+) nodes are available: (.+?)\.( |$)`)

// schedulerRefusals reads the Nodes refused per reason from the scheduler's message (a Node
// short of two resources counts in both); a message of another shape is its own class.
func schedulerRefusals(msg string) map[string]int {
	m := noNodeMessage.FindStringSubmatch(msg)
	if m == nil {
		return map[string]int{msg: 1}
	}
	out := map[string]int{}
	for _, part := range strings.Split(m[2], ", ") {
		count, reason, _ := strings.Cut(part, " ")
		n, err := strconv.Atoi(count)
		if err != nil {
			return map[string]int{msg: 1}
		}
		if strings.HasPrefix(reason, "node(s) had untolerated taint") {
			reason = "node(s) had untolerated taint(s)" // 1.33 names the taint ("{key: value}")
		}
		out[reason] += n
	}
	return out
}
