package policies

import (
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

// kueueCluster is a Cluster that knows Kueue's flavor keys (or not, with unknown).
type kueueCluster struct {
	fakeCluster
	keys         kueue.Keys
	flavorsKnown bool
}

func (k *kueueCluster) KueuePlacementKeys() (kueue.Keys, bool) { return k.keys, k.flavorsKnown }

// The pools generated placement draws from.
var (
	kueueNodeKeys = []string{"pool", "zone", "cloud.google.com/gke-accelerator", "team", "tier"}
	kueueTolKeys  = []string{"dedicated", "nvidia.com/gpu", "spot", "pool"}
	kueueValues   = []string{"a", "b"}
)

// genKueueFixture is a manager Pod, with a random mark of Kueue (or none), random placement of
// its own and random flavor keys.
type kueueCase struct {
	fixture string
	mark    string // "" (not managed), a label, or "gate"
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
	c.cluster = &kueueCluster{keys: kueue.Keys{NodeLabels: map[string]bool{}, Tolerations: map[string]bool{}}, flavorsKnown: r.Intn(4) > 0}
	for _, k := range kueueNodeKeys {
		if r.Intn(2) == 0 {
			c.cluster.keys.NodeLabels[k] = true
		}
	}
	for _, k := range kueueTolKeys {
		if r.Intn(2) == 0 {
			c.cluster.keys.Tolerations[k] = true
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
		if r.Intn(2) == 0 { // the Pod's own placement (Kueue's, or its template's)
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
	})
	c.mode = pick([]string{"default", "merge", "enforce"})
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

// TestKueuePlacementProperty: random policy placement × random flavor keys × random Kueue marks.
// On a Pod Kueue manages, podpatch never sets, changes or removes a key Kueue's flavors decide
// (all placement when they are unknown) and always applies the rest; on other Pods, placement
// applies as the policy says. Idempotent either way.
func TestKueuePlacementProperty(t *testing.T) {
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewSource(seed))
	managedSeen, restored := 0, 0
	for i := range 400 {
		c := genKueueCase(t, r)
		set := platformSet(t, c.policy)
		out, err := set.Apply(Input{Kind: profiles.KindPod, Object: c.in, Namespace: "default", Lookups: c.cluster})
		require.NoError(t, err, "case %d", i)
		require.True(t, out.Changed, "case %d", i)
		why := fmt.Sprintf("case %d: fixture %s, mark %q, flavors known %v %v, policy:\n%s", i, c.fixture, c.mark, c.cluster.flavorsKnown, c.cluster.keys, c.policy)

		// The rest always applies.
		require.Equal(t, "shaped", podField(t, out.Object, "metadata", "labels").(map[string]any)["kueue-test"], why)
		require.Contains(t, string(out.Object), `"KUEUE_TEST"`, why)

		inSel, _ := podField(t, c.in, "spec", "nodeSelector").(map[string]any)
		outSel, _ := podField(t, out.Object, "spec", "nodeSelector").(map[string]any)
		managed := c.mark != ""
		nodeKey := func(k string) bool { return !c.cluster.flavorsKnown || c.cluster.keys.NodeLabels[k] }
		tolKey := func(k string) bool { return !c.cluster.flavorsKnown || k == "" || c.cluster.keys.Tolerations[k] }
		for _, k := range kueueNodeKeys {
			iv, inHas := inSel[k]
			ov, outHas := outSel[k]
			pv, polHas := c.selector[k]
			switch {
			case managed && nodeKey(k):
				require.Equal(t, inHas, outHas, "%s\nkey %s", why, k)
				require.Equal(t, iv, ov, "%s\nkey %s", why, k)
			case polHas && (c.mode != "default" || !inHas):
				require.Equal(t, pv, ov, "%s\nkey %s applies", why, k)
			}
		}
		if managed {
			managedSeen++
			require.Equal(t, tolerationsOf(t, c.in, tolKey), tolerationsOf(t, out.Object, tolKey), why)
			for _, tol := range c.tols { // the others apply
				if k := tol["key"].(string); !tolKey(k) {
					require.Contains(t, tolerationsOf(t, out.Object, func(string) bool { return true }), canon(tol), why)
				}
			}
			if c.affKey != "" {
				req := podField(t, out.Object, "spec", "affinity")
				if nodeKey(c.affKey) {
					require.Nil(t, req, why) // no fixture has affinity of its own
				} else {
					require.NotNil(t, req, why)
				}
			}
			if len(out.Findings) > 0 {
				restored++
				for _, f := range out.Findings {
					require.Equal(t, checks.KueuePlacement, f.Check)
					require.Equal(t, checks.SeverityWarning, f.Severity)
				}
			}
		} else {
			require.Empty(t, out.Findings, why)
			if c.affKey != "" {
				require.NotNil(t, podField(t, out.Object, "spec", "affinity"), why)
			}
		}
		// Something a policy wanted on a Kueue key and did not get is always said.
		if managed {
			for k, pv := range c.selector {
				if nodeKey(k) && inSel[k] != pv && (c.mode != "default" || inSel[k] == nil) {
					require.True(t, slices.ContainsFunc(out.Findings, func(f checks.Finding) bool { return f.Field == "spec.nodeSelector."+k }), "%s\nno finding for %s", why, k)
				}
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
	require.Greater(t, managedSeen, 100)
	require.Greater(t, restored, 20)
}

// TestKueuePlacementExplain: render --explain names what was left out, and the policy's
// change lists only what the Pod keeps.
func TestKueuePlacementExplain(t *testing.T) {
	set := platformSet(t, "mode: merge\ntemplate: {metadata: {labels: {shaped: x}}, spec: {nodeSelector: {pool: cpu, disk: ssd}, tolerations: [{key: pool, operator: Equal, value: cpu, effect: NoSchedule}]}}")
	in := fixtureJSON(t, "kuberay/worker-pod.yaml", func(obj map[string]any) {
		obj["metadata"].(map[string]any)["labels"].(map[string]any)[kueue.PodSetLabel] = "workergroup"
		obj["spec"].(map[string]any)["nodeSelector"] = map[string]any{"pool": "gpu"}
	})
	cluster := &kueueCluster{keys: kueue.Keys{NodeLabels: map[string]bool{"pool": true}, Tolerations: map[string]bool{"pool": true}}, flavorsKnown: true}
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
	cluster := &kueueCluster{keys: kueue.Keys{NodeLabels: map[string]bool{"pool": true}}, flavorsKnown: true}
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
