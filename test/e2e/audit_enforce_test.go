package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/policies"
)

// removeWebhooks deletes the base's webhook configurations and waits until the API server no
// longer calls podpatch: a Dask worker's dry-run create comes back without provenance.
func removeWebhooks(t *testing.T, namespace string) {
	t.Helper()
	ctx := contextBackground()
	for _, o := range kustomizeBuild(t, "manifests/base") {
		var obj client.Object
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			obj = &admissionregistrationv1.MutatingWebhookConfiguration{}
		case "ValidatingWebhookConfiguration":
			obj = &admissionregistrationv1.ValidatingWebhookConfiguration{}
		default:
			continue
		}
		obj.SetName(o.GetName())
		if err := k8s.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
	}
	require.Eventually(t, func() bool {
		return dryRunCreate(t, daskWorker(namespace, "probe")).Annotations[policies.AppliedAnnotation] == ""
	}, 30*time.Second, 200*time.Millisecond, "the API server still calls podpatch")
}

// enforcedChanges are an audit finding's broken fields by path, from its enforce policies.
func enforcedChanges(f audit.Record) map[string]audit.FieldChange {
	out := map[string]audit.FieldChange{}
	for _, p := range f.Policies {
		for _, c := range p.ChangedBy {
			out[c.Field] = c
		}
	}
	return out
}

// requireWrittenBy checks that the audit names a field's writer as managedFields say, at a time
// between before and now (managedFields keep seconds).
func requireWrittenBy(t *testing.T, c audit.FieldChange, manager, operation string, before time.Time) {
	t.Helper()
	require.Equal(t, manager, c.Manager, "%+v", c)
	require.Equal(t, operation, c.Operation, "%+v", c)
	require.Empty(t, c.Unknown)
	at, err := time.Parse(time.RFC3339, c.Time)
	require.NoError(t, err, "%+v", c)
	require.False(t, at.Before(before.Truncate(time.Second)), "%s before the change at %s", at, before)
	require.False(t, at.After(time.Now().Add(time.Second)), "%s in the future", at)
}

// TestAuditEnforceBroken: objects admitted through podpatch with the examples' enforce policies
// (the Dask scheduler Service's internal load balancer, every Pod's cost-center label) are
// changed while the update does not pass podpatch (no webhook configuration): the audit says
// enforce-broken-after-admission, not changed-since-admission, and names for each broken field
// the field manager and operation that changed it (an Update through a merge patch, an Apply
// through server-side apply), or "unknown" for a label an update removed, which managedFields
// cannot own, and once managedFields are stripped; the periodic audit of `podpatch serve` says
// the same in the PolicyDrift Event on the owning DaskCluster and in the OpenReports result.
func TestAuditEnforceBroken(t *testing.T) {
	ctx := contextBackground()
	const ns = "audit-enforce"
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	ensureNamespace(t, ns)
	p := serveExamples(t, ns)
	var svc, worker, scheduler *unstructured.Unstructured
	for name, obj := range createFixtures(t, ns) {
		switch name {
		case "Service/simple-scheduler":
			svc = obj
		case "Pod/" + obj.GetName():
			switch obj.GetLabels()["dask.org/component"] {
			case "worker":
				worker = obj
			case "scheduler":
				scheduler = obj
			}
		}
	}
	require.NotNil(t, svc)
	require.NotNil(t, worker)
	require.NotNil(t, scheduler)
	require.Equal(t, "Internal", svc.GetAnnotations()["networking.gke.io/load-balancer-type"], "admitted with the enforce policy")
	require.Equal(t, "data-platform", worker.GetLabels()["cost-center"])
	require.Contains(t, svc.GetAnnotations()[policies.AppliedAnnotation], "podpatch-system/platform-defaults/scheduler-internal-lb@")
	require.Equal(t, 0, auditReport(t, 0, ns).Stats.Drifted, "as admitted, nothing drifts")

	// podpatch is no longer on the path: the updates below are stored as sent.
	removeWebhooks(t, ns)
	p.stop(t)
	before := time.Now()

	// The annotation by a merge patch (an Update), the type by server-side apply (an Apply).
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"networking.gke.io/load-balancer-type":"External"}}}`))
	require.NoError(t, k8s.Patch(ctx, svc.DeepCopy(), patch, client.FieldOwner("tenant-lb-patch")))
	apply := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": svc.GetName(), "namespace": ns}, "spec": map[string]any{"type": "ClusterIP"}}}
	require.NoError(t, k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(apply), client.FieldOwner("tenant-apply"), client.ForceOwnership))
	// The worker's label removed by an update; the scheduler Pod's changed by another.
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(worker), worker))
	labels := worker.GetLabels()
	delete(labels, "cost-center")
	worker.SetLabels(labels)
	require.NoError(t, k8s.Update(ctx, worker, client.FieldOwner("tenant-relabel")))
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(scheduler), scheduler))
	labels = scheduler.GetLabels()
	labels["cost-center"] = "somebody-else"
	scheduler.SetLabels(labels)
	require.NoError(t, k8s.Update(ctx, scheduler, client.FieldOwner("tenant-relabel")))

	stored := &corev1.Service{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(svc), stored))
	require.Equal(t, corev1.ServiceTypeClusterIP, stored.Spec.Type, "stored as sent: podpatch was not asked")
	require.Equal(t, "External", stored.Annotations["networking.gke.io/load-balancer-type"])

	rep := auditReport(t, 3, ns)
	got := findings(rep)
	f := got["Service/simple-scheduler"]
	require.Equal(t, audit.EnforceBroken, f.Reason, "%+v", f)
	changes := enforcedChanges(f)
	requireWrittenBy(t, changes["metadata.annotations.networking.gke.io/load-balancer-type"], "tenant-lb-patch", "Update", before)
	requireWrittenBy(t, changes["spec.type"], "tenant-apply", "Apply", before)
	for _, pr := range f.Policies {
		if strings.HasPrefix(pr.Ref, "podpatch-system/platform-defaults/scheduler-internal-lb@") {
			require.Equal(t, policies.ModeEnforce, pr.Mode)
			require.ElementsMatch(t, []string{"metadata.annotations.networking.gke.io/load-balancer-type", "spec.type"}, pr.Fields)
		}
	}

	f = got["Pod/"+worker.GetName()]
	require.Equal(t, audit.EnforceBroken, f.Reason, "%+v", f)
	require.Equal(t, audit.FieldChange{Field: "metadata.labels.cost-center", Manager: audit.UnknownManager, Unknown: audit.UnknownRemoved},
		enforcedChanges(f)["metadata.labels.cost-center"], "a removed field has no owner: unknown, not a guess")
	f = got["Pod/"+scheduler.GetName()]
	require.Equal(t, audit.EnforceBroken, f.Reason, "%+v", f)
	requireWrittenBy(t, enforcedChanges(f)["metadata.labels.cost-center"], "tenant-relabel", "Update", before)

	table := runAudit(t, "-n", ns)
	require.Equal(t, 3, table.code, table.stderr)
	require.Contains(t, table.stdout, "enforce broken after admission")
	require.Contains(t, table.stdout, "spec.type by tenant-apply (Apply, ")
	require.Contains(t, table.stdout, "metadata.annotations.networking.gke.io/load-balancer-type by tenant-lb-patch (Update, ")
	require.Contains(t, table.stdout, "metadata.labels.cost-center by unknown (field removed")
	t.Logf("podpatch audit -n %s:\n%s", ns, table.stdout)
	yamlRun := runAudit(t, "-n", ns, "-o", "yaml")
	require.Equal(t, 3, yamlRun.code)
	require.Contains(t, yamlRun.stdout, "reason: enforce-broken-after-admission")
	require.Contains(t, yamlRun.stdout, "manager: tenant-apply")

	// managedFields stripped (any writer of the object may): the writer is unknown, the reason
	// stands.
	strip := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"managedFields":[{}]}}`))
	require.NoError(t, k8s.Patch(ctx, scheduler, strip))
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(scheduler), scheduler))
	require.Empty(t, scheduler.GetManagedFields())
	f = findings(auditReport(t, 3, ns))["Pod/"+scheduler.GetName()]
	require.Equal(t, audit.EnforceBroken, f.Reason)
	require.Equal(t, audit.FieldChange{Field: "metadata.labels.cost-center", Manager: audit.UnknownManager, Unknown: audit.UnknownNotOwned},
		enforcedChanges(f)["metadata.labels.cost-center"])

	// The periodic audit says the same where users look: the PolicyDrift Event on the
	// DaskCluster that owns the Service, and its OpenReports result.
	dask := createCustom(t, ns, installOwnerCRDs(t)["DaskCluster"], "simple")
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(svc), svc))
	svc.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: dask.GetAPIVersion(), Kind: dask.GetKind(), Name: dask.GetName(),
		UID: dask.GetUID(), Controller: new(true)}})
	require.NoError(t, k8s.Update(ctx, svc))
	var reportCRDs []*unstructured.Unstructured
	for _, o := range openReportsOverlay(t) {
		if o.GetKind() == "CustomResourceDefinition" {
			reportCRDs = append(reportCRDs, o)
		}
	}
	applyManifests(t, reportCRDs)
	certDir, _ := servingCerts(t)
	startPodpatch(t, certDir, "--audit-interval", "1s", "--namespace", "podpatch-system")
	const said = "Service simple-scheduler (enforce broken after admission: metadata.annotations.networking.gke.io/load-balancer-type by tenant-lb-patch (Update, "
	require.Eventually(t, func() bool {
		events := &corev1.EventList{}
		require.NoError(t, k8s.List(ctx, events, client.InNamespace(ns)))
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "DaskCluster" && e.InvolvedObject.Name == "simple" && e.Reason == audit.EventDrift &&
				strings.Contains(e.Message, said) && strings.Contains(e.Message, "spec.type by tenant-apply (Apply, ") {
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, "a PolicyDrift Event on the DaskCluster naming who broke the enforced fields")
	require.Eventually(t, func() bool {
		report := &unstructured.Unstructured{}
		report.SetGroupVersionKind(schema.GroupVersionKind{Group: "openreports.io", Version: "v1alpha1", Kind: "Report"})
		if k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: audit.ReportName}, report) != nil {
			return false
		}
		results, _, _ := unstructured.NestedSlice(report.Object, "results")
		for _, r := range results {
			r := r.(map[string]any)
			props, _, _ := unstructured.NestedStringMap(r, "properties")
			if strings.HasPrefix(props["fields"], "metadata.annotations.networking.gke.io/load-balancer-type") &&
				props["reason"] == string(audit.EnforceBroken) && strings.Contains(props["changedBy"], "spec.type by tenant-apply (Apply, ") {
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, "the Report's result for the scheduler Service says who broke its enforced fields")
}
