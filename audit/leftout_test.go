package audit

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// TestEnforceLeftOutIsReported: an enforce policy that podpatch leaves out of an object to keep
// it valid (reference §8) is never silently dropped: the audit reports the object, with the
// rule, in the finding, the table and the Report; a merge policy left out is not drift.
func TestEnforceLeftOutIsReported(t *testing.T) {
	const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team","labels":{"dask.org/component":"worker","dask.org/cluster-name":"c"}},
"spec":{"containers":[{"name":"worker","image":"dask","resources":{"limits":{"cpu":"1"},"requests":{"cpu":"1"}}}]}}`
	for _, tc := range []struct {
		mode      policies.Mode
		reported  bool
		wantDrift bool
	}{
		{policies.ModeEnforce, true, true},
		{policies.ModeMerge, false, false},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			set := setOf(t, `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: big}
spec:
  mode: `+string(tc.mode)+`
  template: {spec: {containers: [{name: "@main", resources: {requests: {cpu: "2"}}}]}}
`)
			f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: []byte(pod)})
			require.NoError(t, err)
			require.Equal(t, tc.reported, ok)
			if !tc.reported {
				return
			}
			require.Equal(t, tc.wantDrift, f.Drift)
			require.Equal(t, EnforceLeftOut, f.Reason)
			require.Len(t, f.Policies, 1)
			p := f.Policies[0]
			require.Equal(t, policies.ModeEnforce, p.Mode)
			require.Contains(t, p.LeftOut, validity.RuleRequestAboveLimit)

			r := result(f, p)
			require.Equal(t, resultFail, r.Result)
			require.Equal(t, string(EnforceLeftOut), r.Properties["reason"])
			require.Contains(t, r.Properties["leftOut"], validity.RuleRequestAboveLimit)

			var out bytes.Buffer
			require.NoError(t, Write(&out, &Report{Objects: []Record{f}}, "table"))
			require.Contains(t, out.String(), "enforce left out")
			require.Contains(t, out.String(), "left out: ")
		})
	}
}

// noClasses is a cluster whose synced caches hold no PriorityClass.
type noClasses struct{}

func (noClasses) PriorityClass(string) (validity.PriorityClassInfo, validity.Presence) {
	return validity.PriorityClassInfo{}, validity.Absent
}
func (noClasses) RuntimeClass(string) (validity.RuntimeClassInfo, validity.Presence) {
	return validity.RuntimeClassInfo{}, validity.Unknown
}
func (noClasses) ServiceAccount(string, string) validity.Presence    { return validity.Unknown }
func (noClasses) LimitRanges(string) ([]corev1.LimitRangeItem, bool) { return nil, false }
func (noClasses) ServiceIPFamilies() ([]corev1.IPFamily, bool)       { return nil, false }

// TestAuditLeavesOutWhatAdmissionLeavesOut: with the cluster's caches, a merge policy naming a
// PriorityClass that does not exist is left out as at admission, so an object admitted
// without it does not drift; without them (unknown) the policy is audited as applied.
func TestAuditLeavesOutWhatAdmissionLeavesOut(t *testing.T) {
	set := setOf(t, `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: class}
spec:
  template: {spec: {priorityClassName: missing}}
`)
	const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team","labels":{"dask.org/component":"worker","dask.org/cluster-name":"c"}},
"spec":{"containers":[{"name":"worker","image":"dask"}]}}`
	_, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: []byte(pod), Lookups: noClasses{}})
	require.NoError(t, err)
	require.False(t, ok, "left out at admission: nothing to audit")

	f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: []byte(pod)})
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, f.Drift)
}

// TestEnforceEffectNotHeldIsReported: the audit judges enforce policies by the predicate
// updates are judged by (policies.Set.Holding): a Pod whose fields hold an enforce policy's
// Pod-level security field but a container of which overrides it, or whose ephemeral container
// lacks what the policy brings it, drifts, with the field — where the comparison of fields
// alone sees nothing.
func TestEnforceEffectNotHeldIsReported(t *testing.T) {
	set := setOf(t, `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: baseline}
spec:
  mode: enforce
  template: {spec: {securityContext: {runAsNonRoot: true}, containers: [{name: "*", securityContext: {allowPrivilegeEscalation: false}}]}}
`)
	const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team","labels":{"dask.org/component":"worker","dask.org/cluster-name":"c"}},
"spec":{"securityContext":{"runAsNonRoot":true},"containers":[{"name":"worker","image":"dask","securityContext":{"allowPrivilegeEscalation":false%s}}]%s}}`
	held := fmt.Sprintf(pod, "", "")
	f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: []byte(held)})
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, f.Drift, "%v", f.Fields)
	for _, c := range []struct{ container, ephemeral, field string }{
		{`,"runAsNonRoot":false`, "", "spec.containers[worker].securityContext.runAsNonRoot"},
		{"", `,"ephemeralContainers":[{"name":"debug","image":"busybox","securityContext":{"allowPrivilegeEscalation":true}}]`, "spec.ephemeralContainers[debug].securityContext.allowPrivilegeEscalation"},
	} {
		f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: []byte(fmt.Sprintf(pod, c.container, c.ephemeral))})
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, f.Drift)
		require.Contains(t, f.Fields, c.field)
		require.Len(t, f.Policies, 1)
		require.True(t, f.Policies[0].Drift)
		require.Equal(t, NeverPatched, f.Reason, "the object carries no provenance")
	}
}
