package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/test/cluster"
)

// auditRun is one `podpatch audit` run of the built binary.
type auditRun struct {
	stdout, stderr string
	code           int
}

// runAudit runs `podpatch audit` against the test control plane (with the admin kubeconfig
// unless args name another).
func runAudit(t *testing.T, args ...string) auditRun {
	t.Helper()
	return runCommand(t, append([]string{"audit", "--kubeconfig", kubeconfig}, args...)...)
}

// runCommand runs the podpatch binary with args and returns its output and exit status.
func runCommand(t *testing.T, args ...string) auditRun {
	t.Helper()
	cmd := exec.Command(podpatchBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	run := auditRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		run.code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return run
}

// auditReport runs `podpatch audit -o json` on a namespace and decodes the report.
func auditReport(t *testing.T, wantCode int, namespace string) *audit.Report {
	t.Helper()
	run := runAudit(t, "-n", namespace, "-o", "json")
	require.Equal(t, wantCode, run.code, "exit status; stderr:\n%s\nstdout:\n%s", run.stderr, run.stdout)
	rep := &audit.Report{}
	require.NoError(t, json.Unmarshal([]byte(run.stdout), rep), run.stdout)
	return rep
}

// ensureNamespace creates a namespace unless it exists (namespaces are not deleted: the test
// control plane runs no namespace controller to finish the deletion).
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(contextBackground(), ns)))
	for _, sa := range []string{"spark", "flink"} {
		obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: sa}}
		require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(contextBackground(), obj)))
	}
}

// createFixtures creates every manager's Pods and Services (cluster.ManagerFixtures) in a
// namespace, and returns them as stored, by "Kind/name".
func createFixtures(t *testing.T, namespace string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, f := range cluster.ManagerFixtures {
		obj := readObject(t, cluster.FixtureDir+f)
		obj.SetNamespace(namespace)
		require.NoError(t, k8s.Create(contextBackground(), obj), f)
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), obj) })
		out[obj.GetKind()+"/"+obj.GetName()] = obj
	}
	return out
}

// findings indexes a report's objects by "Kind/name".
func findings(rep *audit.Report) map[string]audit.Record {
	out := map[string]audit.Record{}
	for _, f := range rep.Objects {
		out[string(f.Kind)+"/"+f.Name] = f
	}
	return out
}

// TestAudit goes through the life that `podpatch audit` is for: objects created while podpatch
// was down are found (never patched); objects podpatch admitted are clean, read back as the API
// server stored them (defaults, canonical quantities); a policy changes and the objects it
// shaped are reported with the old @resourceVersion; and the exit statuses.
func TestAudit(t *testing.T) {
	ctx := contextBackground()
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	costCenter := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: "podpatch-system", Name: "cost-center"}, costCenter))

	// No webhook configuration is installed: the API server stores the objects as sent.
	ensureNamespace(t, "audit-down")
	down := createFixtures(t, "audit-down")
	for name, obj := range down {
		require.Empty(t, obj.GetAnnotations()[policies.AppliedAnnotation], name)
	}
	rep := auditReport(t, 3, "audit-down")
	require.Equal(t, len(down), rep.Stats.Checked, "every fixture is recognised and matched by the examples")
	require.Equal(t, len(down), rep.Stats.Drifted)
	got := findings(rep)
	for name := range down {
		f, ok := got[name]
		require.True(t, ok, "%s reported", name)
		require.Equal(t, audit.NeverPatched, f.Reason, name)
		require.Empty(t, f.Applied, name)
		require.Contains(t, f.Fields, "metadata.labels.cost-center", name)
		ref := "podpatch-system/cost-center/cost-center@" + costCenter.ResourceVersion
		found := false
		for _, p := range f.Policies {
			if p.Ref == ref {
				found = true
				require.True(t, p.Drift, name)
				require.Contains(t, p.Fields, "metadata.labels.cost-center", name)
			}
		}
		require.True(t, found, "%s: %s among %v", name, ref, f.Policies)
	}
	scheduler := got["Service/simple-scheduler"]
	require.Equal(t, audit.ComputeCluster{Manager: profiles.ManagerDask, Role: profiles.RoleScheduler, Name: "simple",
		Owner: &audit.Owner{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskCluster", Name: "simple", UID: "0f1e2d3c-4b5a-4697-8877-665544332211"}},
		scheduler.Cluster)
	require.Contains(t, scheduler.Fields, "spec.type", "the enforced internal load balancer")
	table := runAudit(t, "-n", "audit-down")
	require.Equal(t, 3, table.code, table.stderr)
	require.Contains(t, table.stdout, "NAMESPACE  ")
	require.Contains(t, table.stdout, fmt.Sprintf("%d of %d audited object(s) drift", len(down), len(down)))
	t.Logf("podpatch audit -n audit-down:\n%s", table.stdout)

	// podpatch up: what it admits is stored patched, and an audit of it finds nothing.
	serveExamples(t, "default")
	ensureNamespace(t, "audit-up")
	up := createFixtures(t, "audit-up")
	for name, obj := range up {
		require.Contains(t, obj.GetAnnotations()[policies.AppliedAnnotation], "@"+costCenter.ResourceVersion, name)
	}
	rep = auditReport(t, 0, "audit-up")
	require.Equal(t, len(up), rep.Stats.Checked)
	require.Empty(t, rep.Objects, "objects podpatch admitted, as the API server stored them, do not drift")
	clean := runAudit(t, "-n", "audit-up")
	require.Equal(t, 0, clean.code, clean.stderr)
	require.Equal(t, fmt.Sprintf("0 of %d audited object(s) drift from their policies (namespace audit-up: %d pod(s) and %d service(s) read; policy generation %s)\n",
		len(up), rep.Stats.Pods, rep.Stats.Services, rep.Generation), clean.stdout)

	// The cost-center policy changes: every object it shaped is reported, with the old version.
	oldRV := costCenter.ResourceVersion
	costCenter.Data["cost-center.yaml"] = strings.Replace(costCenter.Data["cost-center.yaml"], "cost-center: data-platform", "cost-center: finance", -1)
	require.NoError(t, k8s.Update(ctx, costCenter))
	rep = auditReport(t, 3, "audit-up")
	require.Equal(t, len(up), rep.Stats.Drifted)
	for _, f := range rep.Objects {
		require.Equal(t, audit.OlderPolicyVersion, f.Reason, f.Name)
		require.Contains(t, f.Applied, "podpatch-system/cost-center/cost-center@"+oldRV, f.Name)
		require.Equal(t, []string{"metadata.labels.cost-center"}, f.Fields, f.Name)
		for _, pr := range f.Policies {
			require.Equal(t, strings.HasPrefix(pr.Ref, "podpatch-system/cost-center/cost-center@"), pr.Drift, "%s: %s", f.Name, pr.Ref)
			if pr.Drift {
				require.Equal(t, "podpatch-system/cost-center/cost-center@"+costCenter.ResourceVersion, pr.Ref)
			}
		}
	}
	older := runAudit(t, "-n", "audit-up")
	require.Equal(t, 3, older.code, older.stderr)
	t.Logf("podpatch audit -n audit-up, after the cost-center change:\n%s", older.stdout)
	yamlRun := runAudit(t, "-n", "audit-up", "-o", "yaml")
	require.Equal(t, 3, yamlRun.code)
	require.Contains(t, yamlRun.stdout, "reason: older-policy-version")

	// A cluster-wide audit finds both namespaces' objects.
	all := runAudit(t, "-A", "-o", "json")
	require.Equal(t, 3, all.code, all.stderr)
	cw := &audit.Report{}
	require.NoError(t, json.Unmarshal([]byte(all.stdout), cw))
	perNS := map[string]int{}
	for _, f := range cw.Objects {
		perNS[f.Namespace]++
	}
	require.Equal(t, len(down), perNS["audit-down"])
	require.Equal(t, len(up), perNS["audit-up"])

	// Exit statuses: 1 when the audit cannot be done (one line, no stack), 2 for usage errors.
	nobody, err := controlPlane.UserKubeconfig("nobody")
	require.NoError(t, err)
	denied := runAudit(t, "--kubeconfig", nobody, "-n", "audit-up")
	require.Equal(t, 1, denied.code)
	require.Equal(t, 1, strings.Count(denied.stderr, "\n"), denied.stderr)
	require.Contains(t, denied.stderr, "podpatch audit: list configmaps:")
	require.Contains(t, denied.stderr, "forbidden")
	usage := runAudit(t, "-A", "-n", "audit-up")
	require.Equal(t, 2, usage.code, usage.stderr)
	bad := runAudit(t, "-n", "audit-up", "-o", "xml")
	require.Equal(t, 2, bad.code, bad.stderr)
}

// openReportsOverlay builds the base manifests with the openreports component, as docs/audit.md
// shows.
func openReportsOverlay(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	overlay := t.TempDir()
	kustomization := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n",
		relPath(t, overlay, "manifests/base"), relPath(t, overlay, "manifests/components/openreports"))
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644))
	objs, err := cluster.Kustomize(overlay)
	require.NoError(t, err)
	return objs
}

// rbacAndCRDs picks the RBAC objects and the CustomResourceDefinitions out of built manifests.
func rbacAndCRDs(objs []*unstructured.Unstructured) (rbac, crds []*unstructured.Unstructured) {
	for _, o := range objs {
		switch {
		case o.GetAPIVersion() == "rbac.authorization.k8s.io/v1":
			rbac = append(rbac, o)
		case o.GetKind() == "CustomResourceDefinition":
			crds = append(crds, o)
		}
	}
	return rbac, crds
}

// TestAuditReports runs `podpatch serve --audit-interval` as the manifests' ServiceAccount
// with only the RBAC of the base and the openreports component: without the OpenReports CRDs
// it writes metrics and Events and says so once; with the CRDs (the component's), one Report
// per namespace, left alone while nothing changes and updated when something does.
func TestAuditReports(t *testing.T) {
	ctx := contextBackground()
	built := openReportsOverlay(t)
	for _, o := range built {
		if o.GetKind() == "Deployment" {
			args, _, err := unstructured.NestedStringSlice(o.Object, "spec", "template", "spec", "containers", "0", "args")
			if err == nil {
				require.Contains(t, args, "--audit-interval=10m")
			}
		}
	}
	rbac, crds := rbacAndCRDs(built)
	require.Len(t, rbac, 16) // the base (podpatch, the external URL resolver, leader election, owner Events, field probe, second line) and the component: roles and bindings
	require.Len(t, crds, 2)
	applyManifests(t, rbac)
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	ensureNamespace(t, "audit-reports")
	fixtures := createFixtures(t, "audit-reports") // no webhook configuration: never patched
	// The DaskCluster that owns the scheduler Service exists, and the Service's reference names
	// it by its UID: the audit writes Events only on owners it has read (reference §9).
	dask := createCustom(t, "audit-reports", installOwnerCRDs(t)["DaskCluster"], "simple")
	scheduler := fixtures["Service/simple-scheduler"]
	require.NotNil(t, scheduler, "the Dask operator's scheduler Service is a fixture")
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(scheduler), scheduler))
	scheduler.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: dask.GetAPIVersion(), Kind: dask.GetKind(), Name: dask.GetName(),
		UID: dask.GetUID(), Controller: new(true)}})
	require.NoError(t, k8s.Update(ctx, scheduler))

	sa, err := controlPlane.UserKubeconfig(podpatchServiceAccount, "system:serviceaccounts", "system:serviceaccounts:podpatch-system")
	require.NoError(t, err)
	asSA := clientFor(t, sa)
	require.Eventually(t, func() bool {
		return asSA.List(ctx, &corev1.PodList{}, client.InNamespace("audit-reports")) == nil
	}, 10*time.Second, 100*time.Millisecond, "the ServiceAccount may list Pods")
	certDir, _ := servingCerts(t)
	p := startPodpatchAs(t, sa, 0, certDir, "--audit-interval", "1s", "--namespace", "podpatch-system")
	rounds := func() float64 { return p.metricSum(t, "podpatch_audit_rounds_total") }
	require.Eventually(t, func() bool { return p.metricSum(t, "podpatch_drift_objects") >= float64(len(fixtures)) },
		60*time.Second, 200*time.Millisecond, "podpatch_drift_objects counts the never-patched fixtures")
	after := rounds()
	require.Eventually(t, func() bool { return rounds() >= after+2 }, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, 1, strings.Count(p.Output.String(), "OpenReports CRDs are not installed"), "said once:\n%s", p.Output)
	require.Eventually(t, func() bool {
		events := &corev1.EventList{}
		require.NoError(t, k8s.List(ctx, events, client.InNamespace("audit-reports")))
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "DaskCluster" && e.InvolvedObject.Name == "simple" && e.Reason == audit.EventDrift &&
				strings.Contains(e.Message, "Service simple-scheduler (never patched") {
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "a PolicyDrift Event on the DaskCluster that owns the scheduler Service")
	require.Eventually(t, func() bool {
		events := &corev1.EventList{}
		require.NoError(t, k8s.List(ctx, events, client.InNamespace("audit-reports")))
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "DaskCluster" && e.InvolvedObject.Name == "simple" && e.Reason == audit.EventAdmittedUnpatched &&
				e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "Service simple-scheduler") {
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "an AdmittedUnpatched Event on the DaskCluster: its scheduler Service was never patched")

	// A second replica stands by: only the holder of the Lease audits.
	standbyCerts, _ := servingCerts(t)
	standby := startPodpatchAs(t, sa, 0, standbyCerts, "--audit-interval", "1s", "--namespace", "podpatch-system")
	after = rounds()
	require.Eventually(t, func() bool { return rounds() >= after+2 }, 30*time.Second, 100*time.Millisecond)
	require.Zero(t, standby.metricSum(t, "podpatch_audit_rounds_total"), "the standby replica does not audit")
	require.Zero(t, standby.metricSum(t, "podpatch_leader"))
	require.Equal(t, 1.0, p.metricSum(t, "podpatch_leader"))
	require.Zero(t, standby.metricSum(t, "podpatch_drift_objects"))
	standby.stop(t)

	// The CRDs arrive: Reports follow, without a restart.
	applyManifests(t, crds)
	reportKey := client.ObjectKey{Namespace: "audit-reports", Name: audit.ReportName}
	report := &unstructured.Unstructured{}
	report.SetGroupVersionKind(schema.GroupVersionKind{Group: "openreports.io", Version: "v1alpha1", Kind: "Report"})
	var typed openreportsv1alpha1.Report
	require.Eventually(t, func() bool {
		err := k8s.Get(ctx, reportKey, report)
		if err != nil {
			return false
		}
		b, err := report.MarshalJSON()
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &typed))
		return true
	}, 60*time.Second, 200*time.Millisecond, "a Report in audit-reports")
	require.Contains(t, p.Output.String(), "OpenReports CRDs found")
	require.Equal(t, "podpatch", typed.Source)
	require.Positive(t, typed.Summary.Fail)
	require.Equal(t, typed.Summary.Fail+typed.Summary.Pass, len(typed.Results))
	var schedulerFail *openreportsv1alpha1.ReportResult
	for i, r := range typed.Results {
		require.Len(t, r.Subjects, 1)
		if r.Subjects[0].Name == "simple-scheduler" && r.Policy == "podpatch-system/cost-center/cost-center" {
			schedulerFail = &typed.Results[i]
		}
	}
	require.NotNil(t, schedulerFail, "one result per policy and object")
	require.Equal(t, openreportsv1alpha1.Result("fail"), schedulerFail.Result)
	require.Equal(t, map[string]string{"manager": "dask", "role": "scheduler", "cluster": "simple", "owner": "DaskCluster/simple",
		"ownerAPIVersion": "kubernetes.dask.org/v1", "reason": "never-patched", "fields": "metadata.labels.cost-center",
		"policyVersion": schedulerFail.Properties["policyVersion"], "appliedVersion": "none"}, schedulerFail.Properties)
	require.NotEmpty(t, schedulerFail.Properties["policyVersion"])

	// Nothing changes: the Report is left alone round after round.
	rv := report.GetResourceVersion()
	after = rounds()
	require.Eventually(t, func() bool { return rounds() >= after+2 }, 30*time.Second, 100*time.Millisecond)
	require.NoError(t, k8s.Get(ctx, reportKey, report))
	require.Equal(t, rv, report.GetResourceVersion(), "an unchanged audit rewrites no Report")

	// An object goes away: its results leave the Report.
	var gone *unstructured.Unstructured
	for name, obj := range fixtures {
		if strings.HasPrefix(name, "Pod/") {
			gone = obj
			break
		}
	}
	require.NoError(t, k8s.Delete(ctx, gone))
	require.Eventually(t, func() bool {
		require.NoError(t, k8s.Get(ctx, reportKey, report))
		if report.GetResourceVersion() == rv {
			return false
		}
		results, _, _ := unstructured.NestedSlice(report.Object, "results")
		for _, r := range results {
			subjects, _, _ := unstructured.NestedSlice(r.(map[string]any), "resources")
			if len(subjects) > 0 && subjects[0].(map[string]any)["name"] == gone.GetName() {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "the Report drops the deleted Pod's results")
	err = k8s.Get(ctx, client.ObjectKeyFromObject(gone), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod"}})
	require.True(t, apierrors.IsNotFound(err))
}
