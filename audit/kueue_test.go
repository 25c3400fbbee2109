package audit

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/kueue"
	"github.com/podpatch/podpatch/policies/profiles"
)

// kueueLookups is a cluster whose caches know Kueue's flavors (or know that none are served).
type kueueLookups struct {
	noClasses
	keys  kueue.Keys
	known bool
}

func (k kueueLookups) KueuePlacementKeys() (kueue.Keys, bool) { return k.keys, k.known }

// TestAuditKueueLabelIsNoExcuse: the audit reads a live Pod by admission's rule (reference §8,
// kueue-placement-conflict). A Pod labelled as Kueue's that runs without the enforced
// pool — admitted before the rule, while Kueue showed no hand in it — is drift, on a cluster
// without Kueue, with the flavors unknown, and with flavors none of which it carries; a Pod
// Kueue admitted (a flavor's whole placement) as the webhook stored it, and one labelled as
// Kueue's stored with the enforced pool, are not.
func TestAuditKueueLabelIsNoExcuse(t *testing.T) {
	set := setOf(t, `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: pool}
spec:
  mode: enforce
  match: {roles: [worker]}
  template: {spec: {nodeSelector: {pool: cpu}}}
`)
	pod := func(pool string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team","labels":{"dask.org/component":"worker","dask.org/cluster-name":"c",` +
			`"kueue.x-k8s.io/managed":"true","kueue.x-k8s.io/queue-name":"q"}},"spec":{"nodeSelector":{"pool":"` + pool + `"},"containers":[{"name":"worker","image":"dask"}]}}`)
	}
	spot := kueueLookups{known: true, keys: kueue.Keys{NodeLabels: map[string]bool{"pool": true}, Flavors: []kueue.Flavor{{NodeLabels: map[string]string{"pool": "spot"}}}}}
	noKueue := kueueLookups{known: true, keys: kueue.Keys{Absent: true}}
	unknown := kueueLookups{}
	// stored is the Pod as the webhook stored it with these lookups.
	stored := func(js []byte, l kueueLookups) []byte {
		res, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: js, Namespace: "team", Lookups: l})
		require.NoError(t, err)
		return res.Object
	}
	// escaped is a Pod admitted with the enforced pool's provenance but the user's own pool: what
	// the old rule stored for a Pod labelled as Kueue's.
	escaped := func() []byte {
		var obj map[string]any
		require.NoError(t, json.Unmarshal(stored(pod("gpu"), noKueue), &obj))
		obj["spec"].(map[string]any)["nodeSelector"] = map[string]any{"pool": "gpu"}
		return mustJSON(t, obj)
	}()
	for name, l := range map[string]kueueLookups{"no Kueue": noKueue, "flavors unknown": unknown, "flavors known, none carried": spot} {
		f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: escaped, Lookups: l})
		require.NoError(t, err, name)
		require.True(t, ok, name)
		require.True(t, f.Drift, "%s: a label is no excuse", name)
		require.True(t, slices.ContainsFunc(f.Fields, func(p string) bool { return strings.Contains(p, "nodeSelector") }), "%s: %v", name, f.Fields)
	}
	for name, js := range map[string][]byte{
		"Kueue's admission (a flavor's whole placement)": stored(pod("spot"), spot),
		"labelled, stored with the enforced pool":        stored(pod("gpu"), spot),
	} {
		require.Contains(t, string(js), `"pool":"`, name)
		f, _, err := Check(set, Object{Kind: profiles.KindPod, JSON: js, Lookups: spot})
		require.NoError(t, err, name)
		require.False(t, f.Drift, "%s: %v", name, f.Fields)
	}
	require.Contains(t, string(stored(pod("spot"), spot)), `"pool":"spot"`, "Kueue's flavor stays")
}
