package policies

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/kueue"
	"github.com/podpatch/podpatch/policies/profiles"
)

// kueueCluster is a Cluster that knows Kueue's flavors (or not, with unknown).
type kueueCluster struct {
	fakeCluster
	keys         kueue.Keys
	flavorsKnown bool
}

func (k *kueueCluster) KueuePlacementKeys() (kueue.Keys, bool) { return k.keys, k.flavorsKnown }

// flavorCluster is a cluster whose flavors are known: their keys are read off the flavors, as
// internal/references does.
func flavorCluster(flavors ...kueue.Flavor) *kueueCluster {
	k := &kueueCluster{flavorsKnown: true, keys: kueue.Keys{NodeLabels: map[string]bool{}, Tolerations: map[string]bool{}, Flavors: flavors}}
	for _, f := range flavors {
		for l := range f.NodeLabels {
			k.keys.NodeLabels[l] = true
		}
		for _, t := range f.Tolerations {
			k.keys.Tolerations[t.Key] = true
		}
	}
	return k
}

// noKueue is what internal/references answers on a cluster that serves no ResourceFlavor API.
func noKueue() *kueueCluster {
	return &kueueCluster{flavorsKnown: true, keys: kueue.Keys{Absent: true}}
}

// The pools generated placement draws from.
var (
	kueueNodeKeys = []string{"pool", "zone", "cloud.google.com/gke-accelerator", "team", "tier"}
	kueueTolKeys  = []string{"dedicated", "nvidia.com/gpu", "spot", "pool"}
	kueueValues   = []string{"a", "b"}
)

// kueueCase is a manager Pod, with a random mark of Kueue (or none), random placement of its
// own (sometimes a flavor's whole placement, as Kueue's admission writes it), random flavors
// (known, unknown, or no Kueue at all) and a random policy.
type kueueCase struct {
	fixture string
	mark    string // "" (not managed), a label, "gate" or "topology-gate"
	in      []byte
	policy  string
	mode    string
	cluster *kueueCluster
	// what the policy sets
	selector map[string]string
	tols     []map[string]any
	affKey   string
}

func genKueueCase(tb testing.TB, r *rand.Rand) kueueCase {
	pick := func(l []string) string { return l[r.Intn(len(l))] }
	c := kueueCase{fixture: pick([]string{"dask-operator/worker-pod.yaml", "kuberay/worker-pod.yaml", "kuberay/head-pod.yaml", "spark/executor-pod.yaml"})}
	c.mark = pick([]string{"", kueue.QueueLabel, kueue.ManagedLabel, kueue.PodSetLabel, kueue.PodGroupLabel, "gate", "topology-gate"})
	var flavors []kueue.Flavor
	for range r.Intn(4) {
		f := kueue.Flavor{NodeLabels: map[string]string{}}
		for _, k := range kueueNodeKeys {
			if r.Intn(3) == 0 {
				f.NodeLabels[k] = pick(kueueValues)
			}
		}
		if r.Intn(2) == 0 {
			f.Tolerations = []kueue.Toleration{{Key: pick(kueueTolKeys), Operator: pick([]string{"", "Equal"}), Value: pick(kueueValues), Effect: "NoSchedule"}}
		}
		flavors = append(flavors, f)
	}
	switch r.Intn(5) {
	case 0:
		c.cluster = &kueueCluster{} // unknown
	case 1:
		c.cluster = noKueue()
	default:
		c.cluster = flavorCluster(flavors...)
		for _, k := range kueueTolKeys { // a flavor's node taints: keys without a toleration
			if r.Intn(4) == 0 {
				c.cluster.keys.Tolerations[k] = true
			}
		}
	}
	c.in = fixtureJSON(tb, c.fixture, func(obj map[string]any) {
		meta := obj["metadata"].(map[string]any)
		spec := obj["spec"].(map[string]any)
		labels, _ := meta["labels"].(map[string]any)
		switch c.mark {
		case "":
		case "gate":
			spec["schedulingGates"] = []any{map[string]any{"name": kueue.AdmissionGate}}
		case "topology-gate":
			spec["schedulingGates"] = []any{map[string]any{"name": kueue.TopologyGate}}
		default:
			labels[c.mark] = "q"
		}
		if r.Intn(2) == 0 { // the Pod's own placement (its template's)
			sel := map[string]any{}
			for _, k := range kueueNodeKeys {
				if r.Intn(3) == 0 {
					sel[k] = pick(kueueValues)
				}
			}
			spec["nodeSelector"] = sel
		}
		if r.Intn(2) == 0 {
			spec["tolerations"] = []any{map[string]any{"key": pick(kueueTolKeys), "operator": "Exists", "effect": "NoSchedule"}}
		}
		if len(flavors) > 0 && r.Intn(2) == 0 { // a flavor's placement, as Kueue's admission writes it
			f := flavors[r.Intn(len(flavors))]
			sel, _ := spec["nodeSelector"].(map[string]any)
			if sel == nil {
				sel = map[string]any{}
				spec["nodeSelector"] = sel
			}
			for k, v := range f.NodeLabels {
				sel[k] = v
			}
			tols, _ := spec["tolerations"].([]any)
			for _, t := range f.Tolerations {
				if r.Intn(5) > 0 { // now and then one is missing: not the flavor's whole placement
					tols = append(tols, map[string]any{"key": t.Key, "operator": t.Operator, "value": t.Value, "effect": t.Effect})
				}
			}
			spec["tolerations"] = tols
		}
	})
	c.mode = pick([]string{"default", "merge", "enforce", "enforce"})
	var tmpl strings.Builder
	tmpl.WriteString("mode: " + c.mode + "\ntemplate:\n  metadata: {labels: {kueue-test: shaped}}\n  spec:\n")
	c.selector = map[string]string{}
	for _, k := range kueueNodeKeys {
		if r.Intn(3) == 0 {
			c.selector[k] = pick(kueueValues)
		}
	}
	if len(c.selector) > 0 {
		b, _ := json.Marshal(c.selector)
		tmpl.WriteString("    nodeSelector: " + string(b) + "\n")
	}
	for range r.Intn(3) {
		c.tols = append(c.tols, map[string]any{"key": pick(kueueTolKeys), "operator": "Equal", "value": pick(kueueValues), "effect": "NoSchedule"})
	}
	if len(c.tols) > 0 {
		b, _ := json.Marshal(c.tols)
		tmpl.WriteString("    tolerations: " + string(b) + "\n")
	}
	if r.Intn(3) == 0 {
		c.affKey = pick(kueueNodeKeys)
		fmt.Fprintf(&tmpl, "    affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: %q, operator: In, values: [a]}]}]}}}\n", c.affKey)
	}
	tmpl.WriteString("    containers: [{name: '@main', env: [{name: KUEUE_TEST, value: shaped}]}]\n")
	c.policy = tmpl.String()
	return c
}

// kueueShows is the test's own reading of the rule (reference §8, kueue-placement-conflict):
// whether Kueue shows its hand in the Pod as given: its admission gate, or one flavor's whole
// placement (every node label with its value, every toleration; a flavor writing nothing
// proves nothing).
func kueueShows(t *testing.T, in []byte, gated bool, flavors []kueue.Flavor) bool {
	if gated {
		return true
	}
	sel, _ := podField(t, in, "spec", "nodeSelector").(map[string]any)
	tols, _ := podField(t, in, "spec", "tolerations").([]any)
	for _, f := range flavors {
		if len(f.NodeLabels)+len(f.Tolerations) == 0 {
			continue
		}
		all := true
		for k, v := range f.NodeLabels {
			all = all && sel[k] == v
		}
		for _, ft := range f.Tolerations {
			op := cmp.Or(ft.Operator, "Equal")
			all = all && slices.ContainsFunc(tols, func(item any) bool {
				m, _ := item.(map[string]any)
				mop, _ := m["operator"].(string)
				return m["key"] == ft.Key && cmp.Or(mop, "Equal") == op && m["value"] == ft.Value && m["effect"] == ft.Effect
			})
		}
		if all {
			return true
		}
	}
	return false
}

func podField(t *testing.T, js []byte, path ...string) any {
	t.Helper()
	var v any = objectOf(t, js)
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

func canon(v any) string { b, _ := json.Marshal(v); return string(b) }

// tolerationsOf returns the canonical tolerations of a Pod whose key decided says is Kueue's.
func tolerationsOf(t *testing.T, js []byte, decided func(string) bool) []string {
	l, _ := podField(t, js, "spec", "tolerations").([]any)
	var out []string
	for _, item := range l {
		m, _ := item.(map[string]any)
		k, _ := m["key"].(string)
		if decided(k) {
			out = append(out, canon(m))
		}
	}
	slices.Sort(out)
	return out
}

// TestKueuePlacementProperty: random policy placement × random flavors (known, unknown, no
// Kueue) × random Kueue marks (labels, gates) × the Pod's own placement (sometimes a flavor's
// whole placement, as Kueue's admission writes it). On a Pod Kueue shows its hand in, with the
// flavors known, podpatch never sets, changes or removes a key they decide — but for the
// enforced keys when the hand is only the admission gate; with the flavors unknown, it leaves
// all placement but the enforced as the Pod came; otherwise — labels alone, no Kueue — every
// policy's placement applies: the enforced keys are present unless so deferred. Idempotent either way,
// and every key a policy wanted and did not get is a finding.
func TestKueuePlacementProperty(t *testing.T) {
	runSeeds(t, "TestKueuePlacementProperty", 33, kueuePlacementProperty)
}

// kueuePlacementProperty is one seed case of TestKueuePlacementProperty.
func kueuePlacementProperty(t *testing.T, sc seedCase) {
	r := rand.New(rand.NewSource(int64(sc.seed)))
	var deferredSeen, escapedNot, unknownSeen, restored int
	for i := range 600 {
		if sc.draw >= 0 && i > sc.draw {
			return
		}
		c := genKueueCase(t, r)
		if sc.draw >= 0 && i != sc.draw {
			continue // the numbers of a draw before a regression seed's, drawn
		}
		set := platformSet(t, c.policy)
		out, err := set.Apply(Input{Kind: profiles.KindPod, Object: c.in, Namespace: "default", Lookups: c.cluster})
		require.NoError(t, err, "case %d", i)
		require.True(t, out.Changed, "case %d", i)
		why := fmt.Sprintf("case %d (%s): fixture %s, mark %q, flavors known %v %+v, policy:\n%s", i, sc.reproduce("TestKueuePlacementProperty", i), c.fixture, c.mark, c.cluster.flavorsKnown, c.cluster.keys, c.policy)

		// The rest always applies.
		require.Equal(t, "shaped", podField(t, out.Object, "metadata", "labels").(map[string]any)["kueue-test"], why)
		require.Contains(t, string(out.Object), `"KUEUE_TEST"`, why)

		// The rule, read independently.
		marked, gated := c.mark != "", c.mark == "gate"
		known := c.cluster.flavorsKnown && !(c.cluster.keys.Absent && gated)
		admitted := known && kueueShows(t, c.in, false, c.cluster.keys.Flavors)
		shows := admitted || known && gated
		keepEnforced := c.mode == "enforce" && !admitted // unknown, or only the gate
		polTol := func(k string) bool {
			return slices.ContainsFunc(c.tols, func(m map[string]any) bool { return m["key"] == k })
		}
		nodeKey := func(k string) bool { // left as the Pod came
			_, polHas := c.selector[k]
			return marked && (!known || shows && c.cluster.keys.NodeLabels[k]) && !(keepEnforced && polHas)
		}
		tolKey := func(k string) bool {
			return marked && (!known || shows && (k == "" || c.cluster.keys.Tolerations[k])) && !(keepEnforced && polTol(k))
		}
		affKept := marked && (!known || shows && c.cluster.keys.NodeLabels[c.affKey]) && !keepEnforced
		switch {
		case marked && known && shows:
			deferredSeen++
		case marked && known && c.mode == "enforce" && len(c.selector) > 0:
			escapedNot++
		case marked && !known:
			unknownSeen++
		}

		inSel, _ := podField(t, c.in, "spec", "nodeSelector").(map[string]any)
		outSel, _ := podField(t, out.Object, "spec", "nodeSelector").(map[string]any)
		for _, k := range kueueNodeKeys {
			iv, inHas := inSel[k]
			ov, outHas := outSel[k]
			pv, polHas := c.selector[k]
			switch {
			case nodeKey(k):
				require.Equal(t, inHas, outHas, "%s\nkey %s", why, k)
				require.Equal(t, iv, ov, "%s\nkey %s", why, k)
			case polHas && (c.mode != "default" || !inHas):
				require.Equal(t, pv, ov, "%s\nkey %s applies", why, k)
			}
		}
		all := func(string) bool { return true }
		require.Equal(t, tolerationsOf(t, c.in, func(k string) bool { return tolKey(k) }), tolerationsOf(t, out.Object, tolKey), why)
		for _, tol := range c.tols { // the others apply (a default policy's fill only what is unset)
			if k := tol["key"].(string); !tolKey(k) && c.mode != "default" {
				require.Contains(t, tolerationsOf(t, out.Object, all), canon(tol), why)
			}
		}
		if c.affKey != "" {
			aff := podField(t, out.Object, "spec", "affinity")
			if affKept {
				require.Nil(t, aff, why) // no fixture has affinity of its own
			} else {
				require.NotNil(t, aff, why)
			}
		}
		if !marked || known && !shows {
			require.Empty(t, out.Findings, why)
		}
		for _, f := range out.Findings {
			require.Equal(t, checks.KueuePlacement, f.Check, why)
			require.Equal(t, checks.SeverityWarning, f.Severity, why)
		}
		if len(out.Findings) > 0 {
			restored++
		}
		// Something a policy wanted on a deferred key and did not get is always said.
		for k, pv := range c.selector {
			if nodeKey(k) && inSel[k] != pv && (c.mode != "default" || inSel[k] == nil) {
				require.True(t, slices.ContainsFunc(out.Findings, func(f checks.Finding) bool { return f.Field == "spec.nodeSelector."+k }), "%s\nno finding for %s", why, k)
			}
		}

		// Idempotent: a second admission of the result changes nothing.
		again, err := set.Apply(Input{Kind: profiles.KindPod, Object: out.Object, Namespace: "default", Lookups: c.cluster})
		require.NoError(t, err)
		require.JSONEq(t, string(out.Object), string(again.Object), why)
		// The webhook's path gives the same patch.
		p, err := set.Patch(Input{Kind: profiles.KindPod, Object: c.in, Namespace: "default", Lookups: c.cluster})
		require.NoError(t, err)
		require.Equal(t, string(out.Patch), string(p.Patch), why)
	}
	if sc.draw >= 0 {
		return
	}
	t.Logf("deferred to Kueue %d, marked without Kueue's hand under an enforce nodeSelector %d, unknown %d, with findings %d", deferredSeen, escapedNot, unknownSeen, restored)
	require.Greater(t, deferredSeen, 60)
	require.Greater(t, escapedNot, 40)
	require.Greater(t, unknownSeen, 40)
	require.Greater(t, restored, 40)
}

// TestKueuePlacementExplain: render --explain names what was left out, and the policy's
// change lists only what the Pod keeps.
func TestKueuePlacementExplain(t *testing.T) {
	set := platformSet(t, "mode: merge\ntemplate: {metadata: {labels: {shaped: x}}, spec: {nodeSelector: {pool: cpu, disk: ssd}, tolerations: [{key: pool, operator: Equal, value: cpu, effect: NoSchedule}]}}")
	in := fixtureJSON(t, "kuberay/worker-pod.yaml", func(obj map[string]any) {
		obj["metadata"].(map[string]any)["labels"].(map[string]any)[kueue.PodSetLabel] = "workergroup"
		obj["spec"].(map[string]any)["nodeSelector"] = map[string]any{"pool": "gpu"}
	})
	cluster := flavorCluster(kueue.Flavor{NodeLabels: map[string]string{"pool": "gpu"}}, kueue.Flavor{Tolerations: []kueue.Toleration{{Key: "pool", Value: "spot", Effect: "NoSchedule"}}})
	out, err := set.Apply(Input{Kind: profiles.KindPod, Object: in, Namespace: "default", Lookups: cluster, Explain: true})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"pool": "gpu", "disk": "ssd"}, podField(t, out.Object, "spec", "nodeSelector"))
	require.Equal(t, podField(t, in, "spec", "tolerations"), podField(t, out.Object, "spec", "tolerations"))
	var fields []string
	for _, f := range out.Findings {
		require.Equal(t, "p1", f.Policy[strings.LastIndex(f.Policy, "/")+1:], f.String())
		fields = append(fields, f.Field)
	}
	require.Equal(t, []string{"spec.nodeSelector.pool", "spec.tolerations[key=pool]"}, fields)
	require.Len(t, out.Changes, 1)
	require.Equal(t, []string{"metadata.labels.shaped", "spec.nodeSelector.disk"}, out.Changes[0].Fields)

	// Unknown flavors: no placement at all, the label still.
	out, err = set.Apply(Input{Kind: profiles.KindPod, Object: in, Namespace: "default", Lookups: &kueueCluster{}, Explain: true})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"pool": "gpu"}, podField(t, out.Object, "spec", "nodeSelector"))
	require.Equal(t, []string{"metadata.labels.shaped"}, out.Changes[0].Fields)
	require.Len(t, out.Findings, 3)
	require.Contains(t, out.Findings[0].Message, "unknown")
}

// TestKueuePlacementRemoval: a policy removing a flavor key (null), a Kueue toleration or the
// required node affinity does not remove Kueue's on a Pod Kueue manages; on another Pod it does.
func TestKueuePlacementRemoval(t *testing.T) {
	set := platformSet(t, "mode: enforce\ntemplate: {spec: {nodeSelector: {pool: null, zone: null}, affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: null}}}}")
	cluster := flavorCluster(kueue.Flavor{NodeLabels: map[string]string{"pool": "spot"}})
	aff := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"spot"}}}}}}}}
	for _, managed := range []bool{true, false} {
		in := fixtureJSON(t, "kuberay/worker-pod.yaml", func(obj map[string]any) {
			if managed {
				obj["metadata"].(map[string]any)["labels"].(map[string]any)[kueue.PodSetLabel] = "workers"
			}
			obj["spec"].(map[string]any)["nodeSelector"] = map[string]any{"pool": "spot", "zone": "a"}
			obj["spec"].(map[string]any)["affinity"] = aff
		})
		out, err := set.Apply(Input{Kind: profiles.KindPod, Object: in, Namespace: "default", Lookups: cluster})
		require.NoError(t, err)
		sel, _ := podField(t, out.Object, "spec", "nodeSelector").(map[string]any)
		if managed {
			require.Equal(t, map[string]any{"pool": "spot"}, sel, "zone is not a flavor key: removed")
			require.Equal(t, canon(aff), canon(podField(t, out.Object, "spec", "affinity")))
			require.Len(t, out.Findings, 2)
		} else {
			require.Empty(t, sel)
			na, _ := podField(t, out.Object, "spec", "affinity").(map[string]any)["nodeAffinity"].(map[string]any)
			require.NotContains(t, na, "requiredDuringSchedulingIgnoredDuringExecution")
			require.Empty(t, out.Findings)
		}
	}
}

// TestKueueDeference: reference §8's rule, shape by shape. The platform enforces
// pool: cpu and a dedicated=cpu toleration, and merges zone: a; Kueue's flavor "spot" writes
// pool: spot and a spot toleration. Deferred: on a Pod carrying a flavor's whole placement, the
// flavors' keys; on a Pod carrying only the admission gate, those but the enforced; with the
// flavors unknown, all placement but the enforced; on a Pod with labels only, nothing.
func TestKueueDeference(t *testing.T) {
	set := platformSet(t,
		"mode: enforce\ntemplate: {spec: {nodeSelector: {pool: cpu}, tolerations: [{key: dedicated, operator: Equal, value: cpu, effect: NoSchedule}]}}",
		"mode: merge\ntemplate: {spec: {nodeSelector: {zone: a}}}")
	spot := kueue.Flavor{NodeLabels: map[string]string{"pool": "spot"}, Tolerations: []kueue.Toleration{{Key: "spot", Operator: "Equal", Value: "true", Effect: "NoSchedule"}}}
	spotTol := map[string]any{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
	enforcedTol := map[string]any{"key": "dedicated", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}
	for _, tc := range []struct {
		name    string
		cluster *kueueCluster
		labels  []string
		gate    bool
		sel     map[string]any // the Pod's own
		tols    []any
		want    map[string]any
		wantTol bool     // the enforced toleration is on the Pod
		found   []string // the fields of the findings
	}{
		{name: "no Kueue, Kueue's labels: enforced and merged", cluster: noKueue(), labels: []string{kueue.ManagedLabel, kueue.QueueLabel},
			sel: map[string]any{"pool": "gpu"}, want: map[string]any{"pool": "cpu", "zone": "a"}, wantTol: true},
		{name: "no Kueue, every label of Kueue's", cluster: noKueue(), labels: []string{kueue.ManagedLabel, kueue.QueueLabel, kueue.PodSetLabel, kueue.PodGroupLabel, kueue.LocalQueueLabel, kueue.ClusterQueueLabel},
			sel: map[string]any{"pool": "spot"}, tols: []any{spotTol}, want: map[string]any{"pool": "cpu", "zone": "a"}, wantTol: true},
		{name: "no Kueue, the admission gate: unknown, the enforced stays, the merged is left out", cluster: noKueue(), labels: []string{kueue.ManagedLabel}, gate: true,
			sel: map[string]any{"pool": "gpu"}, want: map[string]any{"pool": "cpu"}, wantTol: true, found: []string{"spec.nodeSelector.zone"}},
		{name: "flavors unknown, a label: the enforced stays, the merged is left out", cluster: &kueueCluster{}, labels: []string{kueue.QueueLabel},
			sel: map[string]any{"pool": "gpu", "zone": "b"}, want: map[string]any{"pool": "cpu", "zone": "b"}, wantTol: true, found: []string{"spec.nodeSelector.zone"}},
		{name: "no lookups at all (render): as unknown", cluster: nil, labels: []string{kueue.PodSetLabel},
			want: map[string]any{"pool": "cpu"}, wantTol: true, found: []string{"spec.nodeSelector.zone"}},
		{name: "flavors known, a label, the Pod's own pool: enforced", cluster: flavorCluster(spot), labels: []string{kueue.PodSetLabel},
			sel: map[string]any{"pool": "gpu"}, want: map[string]any{"pool": "cpu", "zone": "a"}, wantTol: true},
		{name: "flavors known, a label, a flavor's node labels without its toleration: enforced", cluster: flavorCluster(spot), labels: []string{kueue.PodSetLabel},
			sel: map[string]any{"pool": "spot"}, want: map[string]any{"pool": "cpu", "zone": "a"}, wantTol: true},
		{name: "flavors known, a label, a flavor's whole placement: Kueue admitted it", cluster: flavorCluster(spot), labels: []string{kueue.PodSetLabel},
			sel: map[string]any{"pool": "spot"}, tols: []any{spotTol}, want: map[string]any{"pool": "spot", "zone": "a"}, wantTol: true, found: []string{"spec.nodeSelector.pool"}},
		{name: "flavors known, the admission gate: the enforced stays (the owner may lift the gate)", cluster: flavorCluster(spot), gate: true,
			sel: map[string]any{"pool": "spot"}, want: map[string]any{"pool": "cpu", "zone": "a"}, wantTol: true},
		{name: "flavors known, the admission gate: the merged flavor key is Kueue's", cluster: flavorCluster(spot, kueue.Flavor{NodeLabels: map[string]string{"zone": "b"}}), gate: true,
			want: map[string]any{"pool": "cpu"}, wantTol: true, found: []string{"spec.nodeSelector.zone"}},
		{name: "flavors known, the admission gate, the enforced toleration key is a flavor's: enforced", cluster: flavorCluster(kueue.Flavor{Tolerations: []kueue.Toleration{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}}}), gate: true,
			tols: []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "mine", "effect": "NoSchedule"}}, want: map[string]any{"pool": "cpu", "zone": "a"}, wantTol: true},
		{name: "flavors known, a flavor's whole placement: the enforced toleration key of a flavor is Kueue's", cluster: flavorCluster(kueue.Flavor{Tolerations: []kueue.Toleration{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}}}), labels: []string{kueue.PodSetLabel},
			tols: []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}}, want: map[string]any{"pool": "cpu", "zone": "a"}, wantTol: false, found: []string{"spec.tolerations[key=dedicated]"}},
		{name: "a flavor that writes nothing proves nothing", cluster: flavorCluster(kueue.Flavor{}, spot), labels: []string{kueue.QueueLabel},
			want: map[string]any{"pool": "cpu", "zone": "a"}, wantTol: true},
		{name: "no mark: all applies", cluster: flavorCluster(spot), sel: map[string]any{"pool": "spot"}, tols: []any{spotTol},
			want: map[string]any{"pool": "cpu", "zone": "a"}, wantTol: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := fixtureJSON(t, "kuberay/worker-pod.yaml", func(obj map[string]any) {
				for _, l := range tc.labels {
					obj["metadata"].(map[string]any)["labels"].(map[string]any)[l] = "q"
				}
				spec := obj["spec"].(map[string]any)
				if tc.gate {
					spec["schedulingGates"] = []any{map[string]any{"name": kueue.AdmissionGate}}
				}
				if tc.sel != nil {
					spec["nodeSelector"] = tc.sel
				}
				if tc.tols != nil {
					spec["tolerations"] = tc.tols
				}
			})
			input := Input{Kind: profiles.KindPod, Object: in, Namespace: "default"}
			if tc.cluster != nil {
				input.Lookups = tc.cluster
			}
			out, err := set.Apply(input)
			require.NoError(t, err)
			require.Equal(t, tc.want, podField(t, out.Object, "spec", "nodeSelector"))
			tols, _ := podField(t, out.Object, "spec", "tolerations").([]any)
			require.Equal(t, tc.wantTol, slices.ContainsFunc(tols, func(v any) bool { return canon(v) == canon(enforcedTol) }), "tolerations %v", tols)
			var fields []string
			for _, f := range out.Findings {
				require.Equal(t, checks.KueuePlacement, f.Check)
				fields = append(fields, f.Field)
			}
			require.Equal(t, tc.found, fields)
		})
	}
}

// BenchmarkKueuePatch: the webhook's path on a Ray worker under an enforce and a merge policy,
// unmarked, labelled as Kueue's (no hand shown), with Kueue's admission (a flavor's whole
// placement, 16 flavors known), and with the flavors unknown.
func BenchmarkKueuePatch(b *testing.B) {
	set := platformSet(b,
		"mode: enforce\ntemplate: {spec: {nodeSelector: {pool: cpu}, tolerations: [{key: dedicated, operator: Equal, value: cpu, effect: NoSchedule}]}}",
		"mode: merge\ntemplate: {spec: {nodeSelector: {zone: a}}}")
	var flavors []kueue.Flavor
	for i := range 16 {
		flavors = append(flavors, kueue.Flavor{NodeLabels: map[string]string{"pool": fmt.Sprint("p", i)},
			Tolerations: []kueue.Toleration{{Key: "spot", Value: fmt.Sprint(i), Effect: "NoSchedule"}}})
	}
	known := flavorCluster(flavors...)
	pod := func(labelled, admitted bool) []byte {
		return fixtureJSON(b, "kuberay/worker-pod.yaml", func(obj map[string]any) {
			if labelled {
				obj["metadata"].(map[string]any)["labels"].(map[string]any)[kueue.PodSetLabel] = "workers"
			}
			if admitted {
				spec := obj["spec"].(map[string]any)
				spec["nodeSelector"] = map[string]any{"pool": "p15"}
				spec["tolerations"] = []any{map[string]any{"key": "spot", "operator": "Equal", "value": "15", "effect": "NoSchedule"}}
			}
		})
	}
	for _, bc := range []struct {
		name    string
		in      []byte
		cluster *kueueCluster
	}{
		{"unmarked", pod(false, false), known},
		{"labelled", pod(true, false), known},
		{"admitted", pod(true, true), known},
		{"unknown", pod(true, false), &kueueCluster{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := Input{Kind: profiles.KindPod, Object: bc.in, Namespace: "default", Lookups: bc.cluster}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := set.Patch(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
