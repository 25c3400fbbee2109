package managers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policyfiles"
)

// wantFinding is a manager-aware check expected on the objects of a shape, fired by a policy.
type wantFinding struct {
	check, policy string
}

// checkFindings proves the manager-aware checks (reference §8) on what a real manager produced:
// each control copy (the manager's object, stored unpatched in the control namespace, as
// podpatch receives it in the CREATE request) is patched with the policies the suite installs by
// policies.Set.Patch, the webhook's code path, and must give the finding wanted for its shape;
// and podpatch, which admitted the served copies, must have counted that check in
// podpatch_check_findings_total on its /metrics. Without the checks (checkFindings returning
// none) both assertions fail: no finding is computed and the metric has no sample; this was run
// once so, with every check disabled, and failed.
func (h *harness) checkFindings(t *testing.T, control []generated, ns string, want map[shape]wantFinding) {
	t.Helper()
	cms, err := policyfiles.ReadConfigMaps(h.policyPaths(), "default", nil)
	require.NoError(t, err)
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(t, probs)
	for s, w := range want {
		found := false
		var seen []string // what the objects of the shape gave, for the failure message
		for _, g := range control {
			if !g.shape.matches(s) {
				continue
			}
			in := g.obj.DeepCopy()
			stripServerFields(in)
			stripLaterWrites(in)
			in.SetNamespace(ns)
			js, err := in.MarshalJSON()
			require.NoError(t, err)
			res, err := set.Patch(policies.Input{Kind: g.Kind, Object: js, Namespace: ns, NamespaceFromRequest: true})
			require.NoError(t, err)
			seen = append(seen, fmt.Sprintf("%s %s: applied %d, findings %v, left out %v", g.Kind, g.obj.GetName(), len(res.Applied), res.Findings, res.Skipped))
			for _, f := range res.Findings {
				if f.Check == w.check && f.Policy == w.policy {
					found = true
					t.Logf("%s %s: %s", g.Kind, g.obj.GetName(), f)
				}
			}
		}
		require.True(t, found, "%s: no %s finding naming %s on the manager's objects: %s", s, w.check, w.policy, strings.Join(seen, "; "))
	}
	eventually(t, 30*time.Second, func() error {
		labels, err := h.podpatch.MetricLabels("podpatch_check_findings_total", "check")
		if err != nil {
			return err
		}
		for _, w := range want {
			if !slices.Contains(labels, w.check) {
				return errNoSample(w.check)
			}
		}
		return nil
	}, "podpatch_check_findings_total on podpatch's /metrics")
}

type errNoSample string

func (e errNoSample) Error() string {
	return "no podpatch_check_findings_total sample for " + string(e)
}
