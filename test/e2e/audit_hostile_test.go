package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// hostileWorker is the Dask worker fixture with what the API server accepts and a user
// controls: an ownerReference whose kind is 500 KB (the API server checks only that it is not
// empty) with a terminal escape in it, and a provenance annotation of thousands of entries.
func hostileWorker(t *testing.T, namespace string, i int) *unstructured.Unstructured {
	t.Helper()
	obj := readObject(t, cluster.FixtureDir+"dask-operator/worker-pod.yaml")
	obj.SetNamespace(namespace)
	obj.SetName(fmt.Sprintf("hostile-worker-%d", i))
	yes := true
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "kubernetes.dask.org/v1", Kind: "Dask\x1b]0;owned\x07" + strings.Repeat("K", 500_000),
		Name: strings.Repeat("n", 5000), UID: "0b0b0b0b-0000-0000-0000-000000000000", Controller: &yes}})
	var applied []string
	for j := range 5000 {
		applied = append(applied, fmt.Sprintf("ns/cm/p%d@%d", j, j))
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[policies.AppliedAnnotation] = strings.Join(applied, ",")
	obj.SetAnnotations(ann)
	return obj
}

// TestAuditHostileObjects: Pods the API server accepts with a 500 KB owner kind and thousands
// of provenance entries give `podpatch audit` a table of short rows with no control character,
// and the periodic audit a bounded Report; a namespace whose Report the API server refuses (a
// quota of zero Reports) in the middle of a round is logged and counted, and the namespace
// after it still gets its Report.
func TestAuditHostileObjects(t *testing.T) {
	ctx := contextBackground()
	rbac, crds := rbacAndCRDs(openReportsOverlay(t))
	applyManifests(t, rbac)
	applyManifests(t, crds)
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))

	namespaces := []string{"audit-hostile-a", "audit-hostile-b", "audit-hostile-c"}
	for _, ns := range namespaces {
		ensureNamespace(t, ns)
		createFixtures(t, ns) // no webhook configuration: never patched
	}
	for i := range 3 {
		obj := hostileWorker(t, "audit-hostile-b", i)
		require.NoError(t, k8s.Create(ctx, obj), "the API server accepts a 500 KB owner kind")
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), obj) })
	}
	// The namespace in the middle may hold no Report.
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-hostile-b", Name: "no-reports"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/reports.openreports.io": resource.MustParse("0")}}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(ctx, quota)))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), quota) })
	// No quota controller runs here: the status it would write, without which admission
	// enforces nothing.
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(quota), quota))
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard,
		Used: corev1.ResourceList{"count/reports.openreports.io": resource.MustParse("0")}}
	require.NoError(t, k8s.Status().Update(ctx, quota))

	// podpatch audit: short rows, no control character, the owner clipped.
	run := runAudit(t, "-n", "audit-hostile-b")
	require.Equal(t, 3, run.code, "stderr:\n%s", run.stderr)
	t.Logf("podpatch audit -n audit-hostile-b: %d bytes of table", len(run.stdout))
	require.Less(t, len(run.stdout), 64<<10)
	require.NotContains(t, run.stdout, "\x1b")
	for _, line := range strings.Split(run.stdout, "\n") {
		require.LessOrEqual(t, len(line), report.MaxTableLine)
	}
	rep := auditReport(t, 3, "audit-hostile-b")
	hostile := findings(rep)["Pod/hostile-worker-0"]
	require.True(t, hostile.Drift)
	require.NotNil(t, hostile.Cluster.Owner)
	require.LessOrEqual(t, len(hostile.Cluster.Owner.Kind), report.MaxString)
	require.LessOrEqual(t, len(hostile.Applied), audit.MaxRecordList)

	// The periodic audit.
	sa, err := controlPlane.UserKubeconfig(podpatchServiceAccount, "system:serviceaccounts", "system:serviceaccounts:podpatch-system")
	require.NoError(t, err)
	certDir, _ := servingCerts(t)
	p := startPodpatchAs(t, sa, 0, certDir, "--audit-interval", "1s", "--namespace", "podpatch-system")
	report := func(ns string) (*openreportsv1alpha1.Report, int, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "openreports.io", Version: "v1alpha1", Kind: "Report"})
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: audit.ReportName}, u); err != nil {
			return nil, 0, err
		}
		b, err := u.MarshalJSON()
		require.NoError(t, err)
		var r openreportsv1alpha1.Report
		require.NoError(t, json.Unmarshal(b, &r))
		return &r, len(b), nil
	}
	require.Eventually(t, func() bool {
		_, _, errA := report("audit-hostile-a")
		_, _, errC := report("audit-hostile-c")
		return errA == nil && errC == nil && p.metricSum(t, "podpatch_audit_errors_total") > 0
	}, 60*time.Second, 200*time.Millisecond, "the namespaces around the refused one get their Reports, and the refusal is counted")
	_, _, err = report("audit-hostile-b")
	require.Error(t, err, "the quota refuses audit-hostile-b's Report")
	require.Contains(t, p.Output.String(), "Report not written; the other namespaces' are")

	// The quota goes: the hostile namespace's Report is written, bounded.
	require.NoError(t, k8s.Delete(ctx, quota))
	var r *openreportsv1alpha1.Report
	size := 0
	require.Eventually(t, func() bool {
		r, size, err = report("audit-hostile-b")
		return err == nil
	}, 60*time.Second, 200*time.Millisecond, "audit-hostile-b's Report once the quota is gone")
	t.Logf("audit-hostile-b's Report: %d results, %d bytes", len(r.Results), size)
	require.LessOrEqual(t, size, audit.MaxReportBytes)
	for _, res := range r.Results {
		for k, v := range res.Properties {
			require.LessOrEqual(t, len(v), 1024, "property %s", k)
		}
	}
}
