package audit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/record"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies/profiles"
)

func reportFindings() []Record {
	owner := &Owner{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskCluster", Name: "simple", UID: "o1"}
	cluster := ComputeCluster{Manager: profiles.ManagerDask, Role: profiles.RoleWorker, Name: "simple", Owner: owner, ownerExists: true}
	return []Record{
		{Kind: profiles.KindPod, Namespace: "ns", Name: "ok", Cluster: cluster,
			Policies: []PolicyResult{{Ref: "podpatch-system/cc/cc@5"}}},
		{Kind: profiles.KindPod, Namespace: "ns", Name: "drifts", Cluster: cluster, Drift: true, Reason: NeverPatched,
			Fields: []string{"metadata.labels.cc"},
			Policies: []PolicyResult{{Ref: "podpatch-system/cc/cc@5", Drift: true, Fields: []string{"metadata.labels.cc"}, AppliedVersion: "none"},
				{Ref: "podpatch-system/other/other@6"}}},
	}
}

// TestBuildReport: one result per object and policy, failures first, summary of all; an
// unchanged audit gives a Report equal to the old one, timestamps included.
func TestBuildReport(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := buildReport("ns", reportFindings(), nil, t0)
	require.Equal(t, 1, r.Summary.Fail)
	require.Equal(t, 2, r.Summary.Pass)
	require.Len(t, r.Results, 3)
	require.Equal(t, resultFail, r.Results[0].Result)
	require.Equal(t, "podpatch-system/cc/cc", r.Results[0].Policy)
	require.Equal(t, "drifts", r.Results[0].Subjects[0].Name)
	require.Equal(t, map[string]string{"manager": "dask", "role": "worker", "cluster": "simple", "owner": "DaskCluster/simple",
		"ownerAPIVersion": "kubernetes.dask.org/v1", "reason": "never-patched", "fields": "metadata.labels.cc",
		"policyVersion": "5", "appliedVersion": "none"}, r.Results[0].Properties)

	again := buildReport("ns", reportFindings(), r, t0.Add(time.Hour))
	require.True(t, sameReport(r, again), "an unchanged audit keeps the Report as it is")
	require.Equal(t, int64(1000), again.Results[0].Timestamp.Seconds)

	changed := reportFindings()[:1]
	next := buildReport("ns", changed, r, t0.Add(time.Hour))
	require.False(t, sameReport(r, next))
	require.Equal(t, int64(1000), next.Results[0].Timestamp.Seconds, "an unchanged result keeps its timestamp")
}

// TestBuildReportIsBounded: a namespace of thousands of objects gives a Report etcd can store.
func TestBuildReportIsBounded(t *testing.T) {
	var many []Record
	for range MaxReportResults {
		many = append(many, reportFindings()...)
	}
	r := buildReport("ns", many, nil, time.Unix(0, 0))
	require.Len(t, r.Results, MaxReportResults)
	require.Equal(t, 3*MaxReportResults, r.Summary.Pass+r.Summary.Fail)
	require.Equal(t, resultFail, r.Results[0].Result)
	require.NotNil(t, r.Configuration)
}

// TestOwnerEvents: an Event when an owner's drifting objects change, none while they do not,
// one when they are gone; built-in owners get none. Objects never patched (podpatch failed
// open) are also said as AdmittedUnpatched, once while they last.
func TestOwnerEvents(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	e := newOwnerEvents(kube.NewRecorder(rec))
	fs := reportFindings()
	e.update(fs)
	require.Len(t, rec.Events, 2)
	require.Contains(t, <-rec.Events, "Warning AdmittedUnpatched 1 object(s) were admitted without their podpatch policies because podpatch failed open")
	require.Contains(t, <-rec.Events, "Warning PolicyDrift 1 object(s) drift from their podpatch policies: Pod drifts (never patched: metadata.labels.cc)")
	e.update(fs)
	require.Empty(t, rec.Events, "nothing new, nothing said")
	fs[1].Cluster.Owner = &Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs"}
	e.update(fs)
	require.Len(t, rec.Events, 1)
	require.Contains(t, <-rec.Events, "Normal PolicyDriftResolved")
	require.Empty(t, e.unpatched, "forgotten with the objects")

	// An object that drifts for another reason is no fail-open.
	fs[1].Cluster.Owner = &Owner{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskCluster", Name: "dc"}
	fs[1].Reason = ChangedSinceAdmission
	e.update(fs)
	require.Len(t, rec.Events, 1)
	require.Contains(t, <-rec.Events, "Warning PolicyDrift")

	// An owner the walk did not read (made up, gone, another object of that name) is told nothing.
	e = newOwnerEvents(kube.NewRecorder(rec))
	fs = reportFindings()
	for i := range fs {
		fs[i].Cluster.ownerExists = false
	}
	e.update(fs)
	require.Empty(t, rec.Events, "no Event on an owner that may not exist")

	// 10,000 objects never patched, with names as long as any: one Event, bounded.
	var many []Record
	for i := range 10000 {
		f := reportFindings()[1]
		f.Name = fmt.Sprintf("%d-%s", i, strings.Repeat("n", 300))
		many = append(many, f)
	}
	e = newOwnerEvents(kube.NewRecorder(rec))
	e.update(many)
	require.Len(t, rec.Events, 2)
	msg := <-rec.Events
	require.Contains(t, msg, "Warning AdmittedUnpatched 10000 object(s)")
	require.LessOrEqual(t, len(msg), kube.MaxEventMessage+len("Warning AdmittedUnpatched "))
	<-rec.Events
}

// TestEnforceBrokenIsSaidEverywhere: an object whose enforced fields were changed after
// admission carries the reason and who changed each field into the table, the OpenReports
// result and the PolicyDrift Event.
func TestEnforceBrokenIsSaidEverywhere(t *testing.T) {
	owner := &Owner{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskCluster", Name: "simple", UID: "o1"}
	f := Record{Kind: profiles.KindService, Namespace: "ns", Name: "simple-scheduler", Drift: true, Reason: EnforceBroken,
		Cluster: ComputeCluster{Manager: profiles.ManagerDask, Role: profiles.RoleScheduler, Name: "simple", Owner: owner, ownerExists: true},
		Fields:  []string{"metadata.annotations.networking.gke.io/load-balancer-type", "spec.type"},
		Applied: []string{"podpatch-system/p/internal-lb@7"},
		Policies: []PolicyResult{{Ref: "podpatch-system/p/internal-lb@7", Scope: "platform", Mode: "enforce", Drift: true, AppliedVersion: "7",
			Fields: []string{"metadata.annotations.networking.gke.io/load-balancer-type", "spec.type"},
			ChangedBy: []FieldChange{
				{Field: "metadata.annotations.networking.gke.io/load-balancer-type", Manager: UnknownManager, Unknown: UnknownRemoved},
				{Field: "spec.type", Manager: "kubectl-patch", Operation: "Update", Time: "2026-12-03T22:41:07Z"}}}}}
	const said = "metadata.annotations.networking.gke.io/load-balancer-type by unknown (field removed: managedFields own only fields that are set); " +
		"spec.type by kubectl-patch (Update, 2026-12-03T22:41:07Z)"

	var b strings.Builder
	require.NoError(t, Write(&b, &Report{Objects: []Record{f}, Stats: Stats{Checked: 1, Drifted: 1}}, "table"))
	require.Contains(t, b.String(), "enforce broken after admission\n")
	require.Contains(t, b.String(), "  podpatch-system/p/internal-lb@7 (platform enforce): broken after admission: "+said+"\n")

	r := result(f, f.Policies[0])
	require.Equal(t, "enforce-broken-after-admission", r.Properties["reason"])
	require.Equal(t, said, r.Properties["changedBy"])
	require.Equal(t, "enforce broken after admission: "+said, r.Description)

	rec := record.NewFakeRecorder(10)
	newOwnerEvents(kube.NewRecorder(rec)).update([]Record{f})
	require.Len(t, rec.Events, 1)
	require.Contains(t, <-rec.Events, "Warning PolicyDrift 1 object(s) drift from their podpatch policies: Service simple-scheduler (enforce broken after admission: metadata.annotations.")
}
