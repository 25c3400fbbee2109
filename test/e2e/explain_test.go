package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/explain"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/test/cluster"
)

const explainNamespace = "explain-e2e"

// explainPolicies are the namespace's policies: team labels every object (default mode), and
// ray-cpu asks 4 CPUs of Ray workers whose limit is 1, so it is left out of them (reference §8).
const explainPolicies = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: team}
spec:
  mode: default
  template:
    metadata:
      labels: {team: ml}
  service:
    metadata:
      labels: {team: ml}
---
apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: ray-cpu}
spec:
  mode: merge
  match: {managers: [ray], roles: [worker]}
  template:
    spec:
      containers:
        - name: "@main"
          resources:
            requests: {cpu: "4"}
`

// ref is a controller owner reference to obj.
func ref(obj client.Object, apiVersion, kind string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: obj.GetName(), UID: obj.GetUID(), Controller: new(true)}
}

// createIn creates obj in its namespace, else the explain namespace, deleted when the test ends.
func createIn(t *testing.T, obj client.Object) client.Object {
	t.Helper()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(explainNamespace)
	}
	require.NoError(t, k8s.Create(contextBackground(), obj), obj.GetName())
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), obj) })
	return obj
}

// fixture creates a manager's fixture named name, with labels (and a Service's selector) set
// to name its cluster, owned by owner, with an annotation (key, value) if given.
func fixture(t *testing.T, path, name string, labels map[string]string, owner metav1.OwnerReference, annotation ...string) *unstructured.Unstructured {
	t.Helper()
	return fixtureIn(t, explainNamespace, path, name, labels, owner, annotation...)
}

// fixtureIn is fixture in a namespace.
func fixtureIn(t *testing.T, namespace, path, name string, labels map[string]string, owner metav1.OwnerReference, annotation ...string) *unstructured.Unstructured {
	t.Helper()
	u := readObject(t, cluster.FixtureDir+path)
	u.SetNamespace(namespace)
	if len(annotation) == 2 {
		u.SetAnnotations(map[string]string{annotation[0]: annotation[1]})
	}
	u.SetName(name)
	u.SetGenerateName("")
	l := u.GetLabels()
	for k, v := range labels {
		l[k] = v
	}
	u.SetLabels(l)
	if sel, ok, _ := unstructured.NestedStringMap(u.Object, "spec", "selector"); ok { // a Service: its selector names the cluster
		for k := range sel {
			if v, ok := labels[k]; ok {
				sel[k] = v
			}
		}
		require.NoError(t, unstructured.SetNestedStringMap(u.Object, sel, "spec", "selector"))
	}
	u.SetOwnerReferences([]metav1.OwnerReference{owner})
	return createIn(t, u).(*unstructured.Unstructured)
}

// builtinOwner creates a Deployment or a ReplicaSet (never reconciled here: no controller
// manager runs) owned by owner.
func builtinOwner(t *testing.T, obj client.Object, name string, owner metav1.OwnerReference) client.Object {
	t.Helper()
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel.MatchLabels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec = appsv1.DeploymentSpec{Selector: sel, Template: tmpl}
	case *appsv1.ReplicaSet:
		o.Spec = appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl}
	}
	obj.SetName(name)
	obj.SetOwnerReferences([]metav1.OwnerReference{owner})
	return createIn(t, obj)
}

// explainRun runs `podpatch explain` against the test control plane.
func explainRun(t *testing.T, args ...string) auditRun {
	t.Helper()
	return runCommand(t, append([]string{"explain", "--kubeconfig", kubeconfig, "-n", explainNamespace}, args...)...)
}

// explainReport runs `podpatch explain -o json TARGET` and decodes the report.
func explainReport(t *testing.T, target string) *explain.Report {
	t.Helper()
	run := explainRun(t, target, "-o", "json")
	require.Equal(t, 0, run.code, "%s: stderr:\n%s", target, run.stderr)
	rep := &explain.Report{}
	require.NoError(t, json.Unmarshal([]byte(run.stdout), rep), run.stdout)
	return rep
}

// TestExplain builds a Dask operator cluster (DaskCluster → scheduler Deployment → ReplicaSet →
// Pod, and Service; DaskCluster → DaskWorkerGroup → Deployment → ReplicaSet → worker Pods) and a
// KubeRay cluster (RayJob → RayCluster → head and worker Pods, head Service) from the managers'
// fixtures, one Ray worker admitted while podpatch was down, and explains them from every
// level: each target yields exactly the objects it is or owns, each as stored (its UID, its
// provenance), with the policies that apply, the one left out and why, and the drift.
func TestExplain(t *testing.T) {
	ctx := contextBackground()
	crd := installCRDs(t,
		ownerCRD{"kubernetes.dask.org", "v1", "DaskCluster", "daskclusters"},
		ownerCRD{"kubernetes.dask.org", "v1", "DaskWorkerGroup", "daskworkergroups"},
		ownerCRD{"ray.io", "v1", "RayCluster", "rayclusters"},
		ownerCRD{"ray.io", "v1", "RayJob", "rayjobs"},
		ownerCRD{"sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkapplications"},
		ownerCRD{"flink.apache.org", "v1beta1", "FlinkDeployment", "flinkdeployments"})
	ensureNamespace(t, explainNamespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "explain-policies", Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data: map[string]string{"policies.yaml": explainPolicies}}
	createIn(t, cm)

	rj := createCustom(t, explainNamespace, crd["RayJob"], "rj")
	t.Cleanup(func() { _ = k8s.Delete(ctx, rj) })
	rc := createCustom(t, explainNamespace, crd["RayCluster"], "rc", ref(rj, "ray.io/v1", "RayJob"))
	t.Cleanup(func() { _ = k8s.Delete(ctx, rc) })
	rcRef := ref(rc, "ray.io/v1", "RayCluster")
	rayLabels := map[string]string{"ray.io/cluster": "rc"}

	// Admitted while podpatch was down: no webhook configuration yet.
	down := fixture(t, "kuberay/worker-pod.yaml", "rc-worker-down", rayLabels, rcRef)

	servePodpatch(t)
	require.Eventually(t, func() bool {
		return dryRunCreate(t, daskWorker(explainNamespace, "probe")).Labels["team"] == "ml"
	}, 30*time.Second, 200*time.Millisecond, "podpatch never applied the namespace's policies")

	dc := createCustom(t, explainNamespace, crd["DaskCluster"], "dc")
	t.Cleanup(func() { _ = k8s.Delete(ctx, dc) })
	dcRef := ref(dc, "kubernetes.dask.org/v1", "DaskCluster")
	wg := createCustom(t, explainNamespace, crd["DaskWorkerGroup"], "dc-default", dcRef)
	t.Cleanup(func() { _ = k8s.Delete(ctx, wg) })
	schedDep := builtinOwner(t, &appsv1.Deployment{}, "dc-scheduler", dcRef)
	schedRS := builtinOwner(t, &appsv1.ReplicaSet{}, "dc-scheduler-5d8f", ref(schedDep, "apps/v1", "Deployment"))
	workDep := builtinOwner(t, &appsv1.Deployment{}, "dc-default-worker", ref(wg, "kubernetes.dask.org/v1", "DaskWorkerGroup"))
	workRS := builtinOwner(t, &appsv1.ReplicaSet{}, "dc-default-worker-7c4b", ref(workDep, "apps/v1", "Deployment"))
	daskLabels := map[string]string{"dask.org/cluster-name": "dc", "dask.org/workergroup-name": "dc-default"}
	sched := fixture(t, "dask-operator/scheduler-pod.yaml", "dc-scheduler-5d8f-x1", map[string]string{"dask.org/cluster-name": "dc"}, ref(schedRS, "apps/v1", "ReplicaSet"))
	w1 := fixture(t, "dask-operator/worker-pod.yaml", "dc-default-worker-7c4b-a", daskLabels, ref(workRS, "apps/v1", "ReplicaSet"))
	w2 := fixture(t, "dask-operator/worker-pod.yaml", "dc-default-worker-7c4b-b", daskLabels, ref(workRS, "apps/v1", "ReplicaSet"))
	svc := fixture(t, "dask-operator/scheduler-service.yaml", "dc-scheduler", map[string]string{"dask.org/cluster-name": "dc"}, dcRef,
		policies.ProvideExternalURLAnnotation, "true")

	head := fixture(t, "kuberay/head-pod.yaml", "rc-head", rayLabels, rcRef)
	worker := fixture(t, "kuberay/worker-pod.yaml", "rc-worker-a", rayLabels, rcRef)
	headSvc := fixture(t, "kuberay/head-service.yaml", "rc-head-svc", rayLabels, rcRef)
	// Not owned by the clusters: never in their explanations.
	fixture(t, "kuberay/worker-pod.yaml", "stray-worker", map[string]string{"ray.io/cluster": "stray"},
		metav1.OwnerReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "stray", UID: "00000000-0000-4000-8000-000000000000", Controller: new(true)})

	// spark-operator: SparkApplication → driver Pod → executor Pods and the driver Service.
	sa := createCustom(t, explainNamespace, crd["SparkApplication"], "pi")
	t.Cleanup(func() { _ = k8s.Delete(ctx, sa) })
	driver := fixture(t, "spark-operator/driver-pod.yaml", "pi-driver", nil, ref(sa, "sparkoperator.k8s.io/v1beta2", "SparkApplication"))
	exec1 := fixture(t, "spark-operator/executor-pod.yaml", "pi-exec-1", nil, ref(driver, "v1", "Pod"))
	driverSvc := fixture(t, "spark-operator/driver-service.yaml", "pi-driver-svc", nil, ref(driver, "v1", "Pod"))
	// Flink's native integration: FlinkDeployment → Deployment → ReplicaSet → JobManager Pod;
	// the Deployment owns the TaskManager Pods and the REST Service.
	fd := createCustom(t, explainNamespace, crd["FlinkDeployment"], "basic")
	t.Cleanup(func() { _ = k8s.Delete(ctx, fd) })
	flinkDep := builtinOwner(t, &appsv1.Deployment{}, "basic", ref(fd, "flink.apache.org/v1beta1", "FlinkDeployment"))
	flinkRS := builtinOwner(t, &appsv1.ReplicaSet{}, "basic-7b9c5d8f6c", ref(flinkDep, "apps/v1", "Deployment"))
	jm := fixture(t, "flink/jobmanager-pod.yaml", "basic-7b9c5d8f6c-g2nlz", nil, ref(flinkRS, "apps/v1", "ReplicaSet"))
	tm := fixture(t, "flink/taskmanager-pod.yaml", "basic-taskmanager-1-1", nil, ref(flinkDep, "apps/v1", "Deployment"))
	rest := fixture(t, "flink/rest-service.yaml", "basic-rest", nil, ref(flinkDep, "apps/v1", "Deployment"))

	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm))
	teamRef := explainNamespace + "/explain-policies/team@" + cm.ResourceVersion
	rayCPURef := explainNamespace + "/explain-policies/ray-cpu@" + cm.ResourceVersion
	stored := map[string]client.Object{}
	for _, o := range []client.Object{down, sched, w1, w2, svc, head, worker, headSvc, driver, exec1, driverSvc, jm, tm, rest} {
		stored[o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName()] = o
	}
	names := func(objs ...client.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName())
		}
		slices.Sort(out)
		return out
	}
	// check asserts that a report explains exactly want, each object as the API server stored
	// it, and returns its objects by Kind/name.
	check := func(t *testing.T, target string, want ...client.Object) map[string]explain.Object {
		t.Helper()
		rep := explainReport(t, target)
		got := map[string]explain.Object{}
		var keys []string
		for _, o := range rep.Objects {
			k := string(o.Kind) + "/" + o.Name
			got[k] = o
			keys = append(keys, k)
			s := stored[k]
			require.NotNil(t, s, "%s: %s is not one of the test's objects", target, k)
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(s.GetObjectKind().GroupVersionKind())
			require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(s), live))
			require.Equal(t, string(live.GetUID()), o.UID, k)
			require.Equal(t, audit.SplitApplied(live.GetAnnotations()[policies.AppliedAnnotation]), o.Applied, "%s carries", k)
		}
		slices.Sort(keys)
		require.Equal(t, names(want...), keys, target)
		require.Equal(t, len(want), rep.Total, target)
		require.Equal(t, explain.Target{APIVersion: rep.Target.APIVersion, Kind: rep.Target.Kind, Namespace: explainNamespace,
			Name: rep.Target.Name, UID: rep.Target.UID}, rep.Target)
		return got
	}

	t.Run("daskcluster", func(t *testing.T) {
		got := check(t, "daskcluster/dc", sched, w1, w2, svc)
		w := got["Pod/"+w1.GetName()]
		require.Equal(t, audit.ComputeCluster{Manager: profiles.ManagerDask, Role: profiles.RoleWorker, Name: "dc", Group: "dc-default",
			Owner: &audit.Owner{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskCluster", Name: "dc", UID: string(dc.GetUID())}}, w.Cluster)
		var chain []string
		for _, o := range w.Owners {
			chain = append(chain, o.String())
		}
		require.Equal(t, []string{"ReplicaSet/" + workRS.GetName(), "Deployment/" + workDep.GetName(), "DaskWorkerGroup/dc-default", "DaskCluster/dc"}, chain)
		require.False(t, w.Drift, "admitted by podpatch")
		require.Equal(t, []string{teamRef}, w.Applied)
		require.Len(t, w.Policies, 1)
		require.Equal(t, audit.PolicyResult{Ref: teamRef, Scope: policies.ScopeNamespace, Mode: policies.ModeDefault, AppliedVersion: cm.ResourceVersion},
			w.Policies[0])
		require.Equal(t, map[string][]string{teamRef: {"metadata.labels.team"}}, w.Sets, "what the policy set at admission")
		s := got["Service/dc-scheduler"]
		require.Equal(t, &explain.ExternalURL{Requested: true}, s.ExternalURL, "requested, not resolved: a ClusterIP Service")
		require.Equal(t, audit.ComputeCluster{Manager: profiles.ManagerDask, Role: profiles.RoleScheduler, Name: "dc", Owner: w.Cluster.Owner}, s.Cluster)
		require.Equal(t, audit.ComputeCluster{Manager: profiles.ManagerDask, Role: profiles.RoleScheduler, Name: "dc", Owner: w.Cluster.Owner},
			got["Pod/"+sched.GetName()].Cluster)
		// The table, grouped by role.
		table := explainRun(t, "daskcluster/dc")
		require.Equal(t, 0, table.code, table.stderr)
		require.Less(t, strings.Index(table.stdout, "== scheduler"), strings.Index(table.stdout, "== worker"))
		require.Equal(t, 4, strings.Count(table.stdout, "\n  cluster:  "), table.stdout)
		t.Logf("podpatch explain -n %s daskcluster/dc:\n%s", explainNamespace, table.stdout)
	})
	t.Run("every way to name a kind", func(t *testing.T) {
		for _, target := range []string{"DaskCluster/dc", "daskclusters/dc", "daskcluster.kubernetes.dask.org/dc", "DaskCluster.v1.kubernetes.dask.org/dc"} {
			check(t, target, sched, w1, w2, svc)
		}
	})
	t.Run("owners below the custom resource", func(t *testing.T) {
		check(t, "daskworkergroup/dc-default", w1, w2)
		check(t, "deployment/dc-default-worker", w1, w2)
		check(t, "deploy/dc-scheduler", sched)
		check(t, "rs/"+workRS.GetName(), w1, w2)
	})
	t.Run("a pod and a service", func(t *testing.T) {
		check(t, "pod/"+w2.GetName(), w2)
		check(t, "svc/dc-scheduler", svc)
		check(t, "service/rc-head-svc", headSvc)
	})
	t.Run("sparkapplication and flinkdeployment", func(t *testing.T) {
		got := check(t, "sparkapplication/pi", driver, exec1, driverSvc)
		var chain []string
		for _, o := range got["Pod/pi-exec-1"].Owners {
			chain = append(chain, o.String())
		}
		require.Equal(t, []string{"Pod/pi-driver", "SparkApplication/pi"}, chain, "an executor through its driver")
		check(t, "pod/pi-driver", driver, exec1, driverSvc)
		check(t, "pod/pi-exec-1", exec1)
		check(t, "flinkdeployment/basic", jm, tm, rest)
		check(t, "deployment/basic", jm, tm, rest)
		check(t, "rs/basic-7b9c5d8f6c", jm)
	})
	t.Run("raycluster and rayjob: never patched and a policy left out", func(t *testing.T) {
		got := check(t, "raycluster/rc", down, head, worker, headSvc)
		check(t, "rayjob/rj", down, head, worker, headSvc)

		d := got["Pod/rc-worker-down"]
		require.True(t, d.Drift)
		require.Equal(t, audit.NeverPatched, d.Reason)
		require.Empty(t, d.Applied)
		require.Contains(t, d.Fields, "metadata.labels.team")
		require.Equal(t, &audit.Owner{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "rj", UID: string(rj.GetUID())}, d.Cluster.Owner)

		for _, k := range []string{"Pod/rc-worker-down", "Pod/rc-worker-a"} {
			w := got[k]
			require.Len(t, w.Skipped, 1, k)
			sk := w.Skipped[0]
			require.Equal(t, rayCPURef, sk.Policy, k)
			require.Equal(t, "request-above-limit", sk.Rule, k)
			require.Contains(t, sk.Field, "resources.requests", k)
			require.NotContains(t, w.Applied, rayCPURef, k)
			require.Equal(t, map[string][]string{teamRef: {"metadata.labels.team"}, rayCPURef: {"spec.containers[@main].resources.requests.cpu"}}, w.Sets, k)
		}
		// The stored worker kept its request: the policy was left out at admission too.
		live := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(worker), live))
		require.Equal(t, "1", live.Spec.Containers[0].Resources.Requests.Cpu().String())
		require.Empty(t, got["Pod/rc-head"].Skipped, "ray-cpu matches workers only")

		table := explainRun(t, "raycluster/rc")
		require.Equal(t, 0, table.code, table.stderr)
		require.Contains(t, table.stdout, "left out: "+rayCPURef)
		require.Contains(t, table.stdout, "drift:    never patched: ")
		t.Logf("podpatch explain -n %s raycluster/rc:\n%s", explainNamespace, table.stdout)
		y := explainRun(t, "raycluster/rc", "-o", "yaml")
		require.Equal(t, 0, y.code, y.stderr)
		require.Contains(t, y.stdout, "reason: never-patched")
	})
	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			code int
			msg  string
		}{
			{[]string{"nosuchkind/x"}, 1, `unknown kind "nosuchkind"`},
			{[]string{"daskcluster/missing"}, 1, `daskcluster "missing" not found in namespace ` + explainNamespace},
			{[]string{"namespace/" + explainNamespace}, 1, "Namespace is not namespaced"},
			{[]string{"daskcluster"}, 2, "want KIND/NAME"},
			{[]string{"daskcluster/dc", "-o", "xml"}, 2, "--output"},
		} {
			run := explainRun(t, c.args...)
			require.Equal(t, c.code, run.code, "%v: %s", c.args, run.stderr)
			require.Contains(t, run.stderr, c.msg, c.args)
			require.Equal(t, 1, strings.Count(run.stderr, "\n"), "one line: %s", run.stderr)
			require.Empty(t, run.stdout)
		}
	})
}

// serveExamples starts podpatch behind the base webhook configurations and waits until it
// serves the example policies (applied by the caller) and the API server calls it for a Dask
// worker of a namespace.
func serveExamples(t *testing.T, namespace string) *podpatchProcess {
	t.Helper()
	p := servePodpatch(t)
	p.waitForExamplesApplied(t, namespace)
	return p
}

// explainRules are the permissions `podpatch explain` needs, read from the ClusterRole reference
// §9 lists, so that what the reference says is what the test grants.
func explainRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "reference.md"))
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(b), "As a ClusterRole (what `TestExplainGuide` grants a user):")
	require.True(t, ok, "reference §9 lists explain's permissions")
	_, block, _ = strings.Cut(block, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	var role struct {
		Rules []rbacv1.PolicyRule `json:"rules"`
	}
	require.NoError(t, yaml.UnmarshalStrict([]byte(block), &role))
	require.NotEmpty(t, role.Rules)
	return role.Rules
}

// TestExplainGuide is the troubleshooting guide's example: the example policies, a DaskCluster
// whose scheduler Service the enforced internal load balancer makes a LoadBalancer (the
// operator waits for its address), and a worker admitted while podpatch was down; explained by
// a user holding only explainRules, whose output is the admin's.
func TestExplainGuide(t *testing.T) {
	ctx := contextBackground()
	const ns = "explain-guide"
	crd := installCRDs(t,
		ownerCRD{"kubernetes.dask.org", "v1", "DaskCluster", "daskclusters"},
		ownerCRD{"kubernetes.dask.org", "v1", "DaskWorkerGroup", "daskworkergroups"})
	ensureNamespace(t, ns)
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))

	dc := createCustom(t, ns, crd["DaskCluster"], "analytics")
	t.Cleanup(func() { _ = k8s.Delete(ctx, dc) })
	dcRef := ref(dc, "kubernetes.dask.org/v1", "DaskCluster")
	wg := createCustom(t, ns, crd["DaskWorkerGroup"], "analytics-default", dcRef)
	t.Cleanup(func() { _ = k8s.Delete(ctx, wg) })
	in := func(obj client.Object) client.Object { obj.SetNamespace(ns); return obj }
	schedRS := builtinOwner(t, in(&appsv1.ReplicaSet{}), "analytics-scheduler-6c9f7d8b5d",
		ref(builtinOwner(t, in(&appsv1.Deployment{}), "analytics-scheduler", dcRef), "apps/v1", "Deployment"))
	workRS := builtinOwner(t, in(&appsv1.ReplicaSet{}), "analytics-default-worker-7d4b9c6f8",
		ref(builtinOwner(t, in(&appsv1.Deployment{}), "analytics-default-worker", ref(wg, "kubernetes.dask.org/v1", "DaskWorkerGroup")), "apps/v1", "Deployment"))
	labels := map[string]string{"dask.org/cluster-name": "analytics", "dask.org/workergroup-name": "analytics-default"}
	// While podpatch is down.
	fixtureIn(t, ns, "dask-operator/worker-pod.yaml", "analytics-default-worker-7d4b9c6f8-x2x9q", labels, ref(workRS, "apps/v1", "ReplicaSet"))

	serveExamples(t, ns)
	fixtureIn(t, ns, "dask-operator/scheduler-pod.yaml", "analytics-scheduler-6c9f7d8b5d-79d9k", map[string]string{"dask.org/cluster-name": "analytics"},
		ref(schedRS, "apps/v1", "ReplicaSet"))
	fixtureIn(t, ns, "dask-operator/worker-pod.yaml", "analytics-default-worker-7d4b9c6f8-dw5dw", labels, ref(workRS, "apps/v1", "ReplicaSet"))
	svc := fixtureIn(t, ns, "dask-operator/scheduler-service.yaml", "analytics-scheduler", map[string]string{"dask.org/cluster-name": "analytics"}, dcRef)
	require.Equal(t, "LoadBalancer", svc.Object["spec"].(map[string]any)["type"], "the enforced internal load balancer")

	run := func(kc string, args ...string) auditRun {
		return runCommand(t, append([]string{"explain", "--kubeconfig", kc, "-n", ns}, args...)...)
	}
	admin := run(kubeconfig, "daskcluster/analytics")
	require.Equal(t, 0, admin.code, admin.stderr)
	require.Regexp(t, `podpatch-system/platform-defaults/scheduler-internal-lb@\d+ \(platform enforce\): sets metadata.annotations.networking.gke.io/load-balancer-type, spec.type; the object has them`, admin.stdout)
	require.Contains(t, admin.stdout, "drift:    never patched: ")
	t.Logf("$ podpatch explain -n %s daskcluster/analytics\n%s", ns, admin.stdout)
	y := run(kubeconfig, "svc/analytics-scheduler", "-o", "yaml")
	require.Equal(t, 0, y.code, y.stderr)
	t.Logf("$ podpatch explain -n %s svc/analytics-scheduler -o yaml\n%s", ns, y.stdout)

	// A user with only the documented permissions gets the same answer, without a warning.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "podpatch-explain"}, Rules: explainRules(t)}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "podpatch-explain-guide"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "explainer"}}}
	installWebhooks(t, role, binding) // creates them, deleted when the test ends
	user, err := controlPlane.UserKubeconfig("explainer")
	require.NoError(t, err)
	var as auditRun
	require.Eventually(t, func() bool { as = run(user, "daskcluster/analytics"); return as.code == 0 },
		10*time.Second, 200*time.Millisecond, "as the user")
	require.Empty(t, as.stderr)
	require.Equal(t, admin.stdout, as.stdout)
	// Without get on ReplicaSets: the scheduler and workers below them are missing, and a
	// warning says why.
	partial := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "podpatch-explain-partial"}}
	for _, r := range explainRules(t) {
		if !slices.Contains(r.APIGroups, "apps") {
			partial.Rules = append(partial.Rules, r)
		}
	}
	partialBinding := binding.DeepCopy()
	partialBinding.Name, partialBinding.ResourceVersion, partialBinding.RoleRef.Name = "podpatch-explain-partial", "", partial.Name
	partialBinding.Subjects[0].Name = "partial-explainer"
	installWebhooks(t, partial, partialBinding)
	pu, err := controlPlane.UserKubeconfig("partial-explainer")
	require.NoError(t, err)
	var part auditRun
	require.Eventually(t, func() bool { part = run(pu, "daskcluster/analytics", "-o", "json"); return part.code == 0 },
		10*time.Second, 200*time.Millisecond, "as the partial user")
	require.Contains(t, part.stderr, "replicasets.apps")
	require.Contains(t, part.stderr, "forbidden")
	require.Contains(t, part.stderr, "may be missing from the explanation")
	rep := &explain.Report{}
	require.NoError(t, json.Unmarshal([]byte(part.stdout), rep))
	require.Equal(t, 1, rep.Total, "only the Service, owned by the DaskCluster directly")

	// Without them: one line, exit 1.
	nobody, err := controlPlane.UserKubeconfig("nobody")
	require.NoError(t, err)
	denied := run(nobody, "daskcluster/analytics")
	require.Equal(t, 1, denied.code)
	require.Contains(t, denied.stderr, "forbidden")
}
