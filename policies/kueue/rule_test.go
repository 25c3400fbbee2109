package kueue

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies/profiles"
)

// TestAdmitted: a Pod shows Kueue's admission only by a flavor's whole placement, each value as
// the flavor sets it (an empty value included), each toleration as the API server reads it.
func TestAdmitted(t *testing.T) {
	spot := Flavor{NodeLabels: map[string]string{"pool": "spot"}, Tolerations: []Toleration{{Key: "spot", Value: "true", Effect: "NoSchedule"}}}
	empty := Flavor{NodeLabels: map[string]string{"edge": ""}}
	tol := func(op string) map[string]any {
		return map[string]any{"key": "spot", "operator": op, "value": "true", "effect": "NoSchedule", "tolerationSeconds": 30.0}
	}
	for _, tc := range []struct {
		name    string
		sel     map[string]any
		tols    []any
		flavors []Flavor
		want    bool
	}{
		{"whole placement, operator Equal for the flavor's empty one", map[string]any{"pool": "spot", "zone": "a"}, []any{tol("Equal")}, []Flavor{spot}, true},
		{"whole placement, both operators empty", map[string]any{"pool": "spot"}, []any{tol("")}, []Flavor{spot}, true},
		{"the toleration missing", map[string]any{"pool": "spot"}, nil, []Flavor{spot}, false},
		{"another operator", map[string]any{"pool": "spot"}, []any{tol("Exists")}, []Flavor{spot}, false},
		{"another value", map[string]any{"pool": "gpu"}, []any{tol("Equal")}, []Flavor{spot}, false},
		{"a number, not the string", map[string]any{"pool": 1.0}, nil, []Flavor{{NodeLabels: map[string]string{"pool": "1"}}}, false},
		{"an empty value, the key absent", nil, nil, []Flavor{empty}, false},
		{"an empty value, the key set empty", map[string]any{"edge": ""}, nil, []Flavor{empty}, true},
		{"a flavor writing nothing", nil, nil, []Flavor{{}}, false},
		{"the second flavor", map[string]any{"edge": ""}, nil, []Flavor{spot, empty}, true},
		{"no flavors", map[string]any{"pool": "spot"}, []any{tol("Equal")}, nil, false},
	} {
		p := Placement{selector: tc.sel, tols: tc.tols}
		require.Equal(t, tc.want, p.admitted(tc.flavors), tc.name)
	}
}

// policy is a checks.Policy of a pod template patch, enforcing or not.
type policy struct {
	spec    map[string]any
	enforce bool
}

func (p policy) Patch(profiles.Kind) map[string]any { return map[string]any{"spec": p.spec} }
func (p policy) Provenance() string                 { return "p" }
func (p policy) Enforced() bool                     { return p.enforce }

// TestEnforcedPlacement: what the enforce policies set, key by key or whole; other modes count
// for nothing.
func TestEnforcedPlacement(t *testing.T) {
	req := map[string]any{"nodeSelectorTerms": []any{}}
	e := enforcedPlacement([]policy{
		{enforce: true, spec: map[string]any{"nodeSelector": map[string]any{"pool": "cpu"}, "tolerations": []any{map[string]any{"key": "dedicated"}, map[string]any{"operator": "Exists"}}}},
		{enforce: false, spec: map[string]any{"nodeSelector": nil, "tolerations": nil, "affinity": nil}},
		{enforce: true, spec: map[string]any{"affinity": map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{}}}}},
	})
	require.Equal(t, enforcedKeys{selector: map[string]bool{"pool": true}, tols: map[string]bool{"dedicated": true, "": true}}, e)

	for _, spec := range []map[string]any{
		{"affinity": nil},
		{"affinity": map[string]any{"nodeAffinity": nil}},
		{"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": req}}},
		{"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": nil}}},
	} {
		require.True(t, enforcedPlacement([]policy{{enforce: true, spec: spec}}).whole[2], "%v", spec)
	}
	require.False(t, enforcedPlacement([]policy{{enforce: true, spec: map[string]any{"affinity": map[string]any{"podAffinity": map[string]any{}}}}}).whole[2])
	e = enforcedPlacement([]policy{{enforce: true, spec: map[string]any{"nodeSelector": nil, "tolerations": nil}}})
	require.True(t, e.whole[0] && e.whole[1], "null removes the whole member")
}
