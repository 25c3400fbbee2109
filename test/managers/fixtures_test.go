package managers

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/test/cluster"
)

// fixture is one file of policies/testdata/fixtures that a manager's real object refreshes.
type fixture struct {
	file string
	// pick chooses the object among the control copies.
	pick func(g generated) bool
	// about is the file's description, after the line naming the generator.
	about string
}

// fixtures are, per fixtures directory, the files `make fixtures` writes.
var fixtures = map[string][]fixture{
	"kuberay": {
		{"head-pod.yaml", isPod(profiles.RoleScheduler, ""), "Head Pod of RayCluster raycluster-kuberay (test/managers/testdata/kuberay/raycluster.yaml): bare Pod, generateName <cluster>-head-."},
		{"worker-pod.yaml", isPod(profiles.RoleWorker, "workergroup"), "Worker Pod of group workergroup: bare Pod, generateName <cluster>-<group>-worker-, init container wait-gcs-ready."},
		{"head-service.yaml", isService(""), "Head Service <cluster>-head-svc (headless by default)."},
	},
	"dask-operator": {
		{"scheduler-pod.yaml", isPodOf("simple", profiles.RoleScheduler, ""), "Scheduler Pod of the cluster KubeCluster(name=\"simple\", n_workers=2, resources=...) creates, from the scheduler Deployment's ReplicaSet."},
		{"worker-pod.yaml", isPodOf("simple", profiles.RoleWorker, "simple-default"), "Worker Pod of worker group simple-default: one Deployment (replicas 1) per worker, <group>-worker-<10 hex>."},
		{"scheduler-service.yaml", isService("simple"), "Scheduler Service <cluster>-scheduler; it carries the same labels as the scheduler Pod."},
	},
	"spark": {
		{"driver-pod.yaml", isPod(profiles.RoleScheduler, ""), "Driver Pod from spark-submit --deploy-mode cluster --name spark-pi --class org.apache.spark.examples.SparkPi (bare Pod, <prefix>-driver)."},
		{"driver-service.yaml", isService(""), "Driver Service <prefix>-driver-svc (headless), owned by the driver Pod; labels: spark-app-selector only."},
		{"executor-pod.yaml", isNamed(profiles.KindPod, "-exec-1"), "Executor Pod <prefix>-exec-1, owned by the driver Pod (spark.kubernetes.driver.pod.name)."},
	},
	"flink": {
		{"jobmanager-pod.yaml", isPod(profiles.RoleScheduler, ""), "JobManager Pod of session cluster basic-example (KubernetesSessionCli), from the JobManager Deployment's ReplicaSet."},
		{"rest-service.yaml", isNamed(profiles.KindService, "-rest"), "REST Service <cluster-id>-rest, owned by the JobManager Deployment."},
		{"internal-service.yaml", isNamed(profiles.KindService, "basic-example"), "Internal Service <cluster-id> (headless), owned by the JobManager Deployment."},
	},
}

func isPod(role profiles.Role, group string) func(generated) bool {
	return func(g generated) bool {
		return g.Kind == profiles.KindPod && g.Role == role && (group == "" || g.Group == group)
	}
}

func isPodOf(clusterName string, role profiles.Role, group string) func(generated) bool {
	return func(g generated) bool { return g.Cluster == clusterName && isPod(role, group)(g) }
}

func isService(clusterName string) func(generated) bool {
	return func(g generated) bool {
		return g.Kind == profiles.KindService && (clusterName == "" || g.Cluster == clusterName)
	}
}

func isNamed(kind profiles.Kind, suffix string) func(generated) bool {
	return func(g generated) bool { return g.Kind == kind && strings.HasSuffix(g.obj.GetName(), suffix) }
}

// dumpFixtures writes, when PODPATCH_MANAGERS_FIXTURES=1 (`make fixtures`), the control copies
// — what podpatch receives in the CREATE admission request — into policies/testdata/fixtures.
// Generated names, uids, hashes and the namespace are rewritten to those the file had, so a
// refresh shows only what the manager changed and the tests that name those objects go on.
func (h *harness) dumpFixtures(t *testing.T, dir, generator string, control []generated, ctl string) {
	t.Helper()
	if os.Getenv("PODPATCH_MANAGERS_FIXTURES") != "1" || t.Failed() {
		return
	}
	var picked []generated
	var old []*unstructured.Unstructured
	for _, f := range fixtures[dir] {
		path := filepath.Join(h.root, cluster.FixtureDir, dir, f.file)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		objs, err := decodeYAMLStream(b)
		require.NoError(t, err)
		require.Len(t, objs, 1, path)
		var matches []generated
		for _, g := range control {
			if f.pick(g) {
				matches = append(matches, g)
			}
		}
		require.NotEmpty(t, matches, "%s: no control object", f.file)
		sort.Slice(matches, func(i, j int) bool { return matches[i].obj.GetName() < matches[j].obj.GetName() })
		picked, old = append(picked, matches[0]), append(old, objs[0])
	}
	r := newRewriter(ctl, old[0].GetNamespace())
	for i, g := range picked {
		r.learnFixture(g.obj, old[i])
	}
	for i, g := range picked {
		js, err := g.obj.MarshalJSON()
		require.NoError(t, err)
		c := &unstructured.Unstructured{}
		require.NoError(t, c.UnmarshalJSON([]byte(r.apply(string(js)))))
		r.learnRandom(c.Object, old[i].Object)
	}
	for i, f := range fixtures[dir] {
		js, err := picked[i].obj.MarshalJSON()
		require.NoError(t, err)
		o := &unstructured.Unstructured{}
		require.NoError(t, o.UnmarshalJSON([]byte(r.apply(string(js)))))
		admissionShape(o)
		b, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		header := fmt.Sprintf("# Generated by `make fixtures` (test/managers) from %s.\n# %s\n"+
			"# As podpatch receives it in the CREATE admission request (API-server defaults included),\n"+
			"# from a namespace podpatch does not serve; generated names, uids and hashes are this file's earlier ones.\n",
			generator, f.about)
		path := filepath.Join(h.root, cluster.FixtureDir, dir, f.file)
		require.NoError(t, os.WriteFile(path, append([]byte(header), b...), 0o644))
		t.Logf("wrote %s", path)
	}
}

// learnFixture learns, from a control object and the fixture it refreshes, the names, uids and
// identity label values to keep. Conflicts are ignored: the first mapping stays.
func (r *rewriter) learnFixture(control, old *unstructured.Unstructured) {
	r.learnName(r.apply(control.GetName()), old.GetName())
	if old.GetName() == "" && control.GetGenerateName() != "" {
		r.learnName(r.apply(control.GetGenerateName()), old.GetGenerateName())
	}
	cl, ol := control.GetLabels(), old.GetLabels()
	for _, k := range identityLabels() {
		if cl[k] != "" && ol[k] != "" {
			r.learnName(r.apply(cl[k]), ol[k])
		}
	}
	co, oo := controllerOf(control), controllerOf(old)
	if co != nil && oo != nil {
		r.add(co.UID, oo.UID)
		r.learnName(r.apply(co.Name), oo.Name)
	}
	r.conflicts = nil
}

// admissionShape removes what the API server sets after mutating admission: identity,
// versions, status, the name of a generateName object, allocated IPs, IP families and node
// ports, and what managers write later. Scheme defaults and the built-in mutating admission
// plugins (default tolerations, priority) run before the webhook, so they stay.
func admissionShape(o *unstructured.Unstructured) {
	stripServerFields(o)
	stripLaterWrites(o)
	if o.GetGenerateName() != "" {
		unstructured.RemoveNestedField(o.Object, "metadata", "name")
	}
	if o.GetKind() == "Service" {
		// Set with the cluster IPs, by the Service registry after admission (none of these
		// managers sets them).
		unstructured.RemoveNestedField(o.Object, "spec", "ipFamilies")
		unstructured.RemoveNestedField(o.Object, "spec", "ipFamilyPolicy")
	}
}
