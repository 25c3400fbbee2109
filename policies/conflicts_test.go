package policies

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/validity"
)

// TestEnforceConflicts: lint finds the namespace policies that admission would leave out for a
// platform enforce policy it is given, with the rule admission names, and none for a namespace
// policy that agrees with the enforce policies or that no enforce policy meets.
func TestEnforceConflicts(t *testing.T) {
	opts := DefaultOptions()
	var err error
	opts.NamespaceAllowed, err = allowlist.ParseFields(nsrouteAllowed)
	require.NoError(t, err)
	var platform []*Policy
	for _, c := range nsrouteEnforce {
		platform = append(platform, enforcePolicy(t, c.name, Mode(c.mode), c.spec))
	}
	for _, c := range []struct {
		spec, enforce, rule string // enforce "": no conflict
	}{
		{"template: {spec: {initContainers: [{name: audit-agent, image: tenant/x}]}}", "audit-sidecar", validity.RuleDuplicateContainer},
		{"template: {spec: {containers: [{name: '*', resources: {requests: {memory: 64Gi}}}]}}", "every-container", validity.RuleRequestAboveLimit},
		{"template: {metadata: {labels: {tier: free}}}", "audited-unless-free", validity.ReasonSelection},
		{"template: {metadata: {labels: {team: other}}}", "team-ml", validity.ReasonSelection},
		{"template: {spec: {containers: [{name: '@main', ports: [{containerPort: 9090, name: tenant, hostPort: 9100}]}, {name: sidecar, image: tenant/x, ports: [{containerPort: 9100, hostPort: 9100}]}]}}", "", ""},
		{"template: {spec: {containers: [{name: '*', env: [{name: TENANT, value: a}], resources: {requests: {memory: 1Gi}}}]}}", "", ""},
		{"service: {metadata: {annotations: {tenant.example.com/a: b}}}", "", ""},
	} {
		n := nsroutePolicy(t, opts, 0, c.spec)
		require.NotNil(t, n, c.spec)
		found := NewSet(append([]*Policy{n}, platform...)).EnforceConflicts("default")
		if c.enforce == "" {
			require.Empty(t, found, c.spec)
			continue
		}
		require.NotEmpty(t, found, c.spec)
		var names []string
		for _, f := range found {
			require.Equal(t, n, f.Policy)
			names = append(names, f.Enforce.Name)
			if f.Enforce.Name == c.enforce {
				require.Equal(t, c.rule, f.Violation.Rule, "%s: %s", c.spec, f.Violation)
			}
		}
		require.Contains(t, names, c.enforce, c.spec)
	}
}

// BenchmarkEnforceConflicts is lint's cost for a namespace at the limit of 32 namespace
// policies (drawn per conflict class) against the catalogue's platform policies.
func BenchmarkEnforceConflicts(b *testing.B) {
	opts := DefaultOptions()
	opts.NamespaceAllowed, _ = allowlist.ParseFields(nsrouteAllowed)
	var ps []*Policy
	for _, c := range nsrouteEnforce {
		ps = append(ps, enforcePolicy(b, c.name, Mode(c.mode), c.spec))
	}
	r := rand.New(rand.NewPCG(38, 32))
	for i := 0; i < 32; {
		if n := nsroutePolicy(b, opts, i, nsrouteClasses[i%len(nsrouteClasses)].draw(r)); n != nil {
			ps = append(ps, n)
			i++
		}
	}
	set := NewSet(ps)
	b.ResetTimer()
	for b.Loop() {
		set.EnforceConflicts("default")
	}
}
