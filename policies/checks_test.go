package policies

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
)

// resourcesPolicy is a merge policy for a manager and role setting the main container's resources.
func resourcesPolicy(manager, role, resources string) string {
	return fmt.Sprintf("match: {managers: [%s], roles: [%s]}\ntemplate:\n  spec:\n    containers:\n    - name: \"@main\"\n      resources: %s\n", manager, role, resources)
}

// applyBoth applies set to a fixture with Apply and with Patch, checks that both find the same
// and that the findings did not change the object (the patch is the one without checks: the
// object Apply returns is the patch applied), and returns Apply's result.
func applyBoth(t *testing.T, set *Set, kind profiles.Kind, obj []byte) Result {
	t.Helper()
	in := Input{Kind: kind, Object: obj, Namespace: "default"}
	res, err := set.Apply(in)
	require.NoError(t, err)
	pres, err := set.Patch(in)
	require.NoError(t, err)
	require.Equal(t, res.Findings, pres.Findings, "Patch (webhook) and Apply (render) must find the same")
	require.Equal(t, res.Patch, pres.Patch)
	require.LessOrEqual(t, len(res.Findings), checks.MaxFindings)
	return res
}

func TestChecksFire(t *testing.T) {
	cases := []struct {
		name, fixture, policy string
		kind                  profiles.Kind
		want                  []checks.Finding // Check, Severity, Policy, Field compared; Message and Fix must be set
	}{
		{name: "ray gpu added", fixture: "kuberay/worker-pod.yaml", policy: resourcesPolicy("ray", "worker", `{limits: {nvidia.com/gpu: "1"}}`),
			want: []checks.Finding{{Check: checks.RayResources, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[ray-worker].resources.limits.nvidia.com/gpu"}}},
		{name: "ray memory lowered", fixture: "kuberay/worker-pod.yaml", policy: resourcesPolicy("ray", "worker", `{limits: {memory: 512Mi}, requests: {memory: 512Mi}}`),
			want: []checks.Finding{{Check: checks.RayResources, Severity: checks.SeverityError, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[ray-worker].resources.limits.memory"}}},
		{name: "ray memory raised, cpu raised", fixture: "kuberay/worker-pod.yaml", policy: resourcesPolicy("ray", "worker", `{limits: {memory: 4Gi, cpu: "2"}, requests: {memory: 4Gi, cpu: "2"}}`),
			want: []checks.Finding{
				{Check: checks.RayResources, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[ray-worker].resources.limits.cpu"},
				{Check: checks.RayResources, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[ray-worker].resources.limits.memory"}}},
		{name: "ray tpu added", fixture: "kuberay/worker-pod.yaml", policy: resourcesPolicy("ray", "worker", `{limits: {google.com/tpu: "4"}}`),
			want: []checks.Finding{{Check: checks.RayResources, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[ray-worker].resources.limits.google.com/tpu"}}},
		{name: "ray label only", fixture: "kuberay/worker-pod.yaml", policy: "template: {metadata: {labels: {a: b}}}"},
		{name: "dask classic memory raised", fixture: "dask-classic/worker-pod.yaml", policy: resourcesPolicy("dask", "worker", `{limits: {memory: 8G}, requests: {memory: 8G}}`),
			want: []checks.Finding{{Check: checks.DaskWorker, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[dask-container].resources.limits.memory"}}},
		{name: "dask classic memory lowered, cpu raised", fixture: "dask-classic/worker-pod.yaml", policy: resourcesPolicy("dask", "worker", `{limits: {memory: 2G, cpu: "2"}, requests: {memory: 2G}}`),
			want: []checks.Finding{
				{Check: checks.DaskWorker, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[dask-container].resources.limits.memory"},
				{Check: checks.DaskWorker, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[dask-container].resources.limits.cpu"}}},
		{name: "dask gateway memory raised", fixture: "dask-gateway/worker-pod.yaml", policy: resourcesPolicy("dask-gateway", "worker", `{limits: {memory: 4Gi}, requests: {memory: 4Gi}}`),
			want: []checks.Finding{{Check: checks.DaskWorker, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[dask-worker].resources.limits.memory"}}},
		{name: "dask operator worker adapts", fixture: "dask-operator/worker-pod.yaml", policy: resourcesPolicy("dask", "worker", `{limits: {memory: 8Gi}, requests: {memory: 8Gi}}`)},
		{name: "spark executor below heap", fixture: "spark/executor-pod.yaml", policy: resourcesPolicy("spark", "executor", `{limits: {memory: 512Mi}, requests: {memory: 512Mi}}`),
			want: []checks.Finding{{Check: checks.SparkMemory, Severity: checks.SeverityError, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[spark-kubernetes-executor].resources.limits.memory"}}},
		{name: "spark executor raised", fixture: "spark/executor-pod.yaml", policy: resourcesPolicy("spark", "executor", `{limits: {memory: 8Gi}, requests: {memory: 8Gi}}`),
			want: []checks.Finding{{Check: checks.SparkMemory, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[spark-kubernetes-executor].resources.limits.memory"}}},
		{name: "spark executor heap and memory raised together", fixture: "spark/executor-pod.yaml",
			policy: "match: {managers: [spark], roles: [executor]}\ntemplate: {spec: {containers: [{name: \"@main\", env: [{name: SPARK_EXECUTOR_MEMORY, value: 1536m}], resources: {limits: {memory: 2Gi}, requests: {memory: 2Gi}}}]}}"},
		{name: "spark executor heap raised above memory", fixture: "spark/executor-pod.yaml",
			policy: "match: {managers: [spark], roles: [executor]}\ntemplate: {spec: {containers: [{name: \"@main\", env: [{name: SPARK_EXECUTOR_MEMORY, value: 4g}], resources: {limits: {memory: 2Gi}, requests: {memory: 2Gi}}}]}}",
			want:   []checks.Finding{{Check: checks.SparkMemory, Severity: checks.SeverityError, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[spark-kubernetes-executor].resources.limits.memory"}}},
		{name: "spark driver lowered", fixture: "spark/driver-pod.yaml", policy: resourcesPolicy("spark", "driver", `{limits: {memory: 1Gi}, requests: {memory: 1Gi}}`),
			want: []checks.Finding{{Check: checks.SparkMemory, Severity: checks.SeverityError, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[spark-kubernetes-driver].resources.limits.memory"}}},
		{name: "flink taskmanager lowered", fixture: "flink/taskmanager-pod.yaml", policy: resourcesPolicy("flink", "taskmanager", `{limits: {memory: 1Gi}, requests: {memory: 1Gi}}`),
			want: []checks.Finding{{Check: checks.FlinkMemory, Severity: checks.SeverityError, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[flink-main-container].resources.limits.memory"}}},
		{name: "flink taskmanager raised", fixture: "flink/taskmanager-pod.yaml", policy: resourcesPolicy("flink", "taskmanager", `{limits: {memory: 4Gi}, requests: {memory: 4Gi}}`),
			want: []checks.Finding{{Check: checks.FlinkMemory, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[flink-main-container].resources.limits.memory"}}},
		{name: "flink jobmanager raised", fixture: "flink/jobmanager-pod.yaml", policy: resourcesPolicy("flink", "jobmanager", `{limits: {memory: 8Gi}, requests: {memory: 8Gi}}`),
			want: []checks.Finding{{Check: checks.FlinkMemory, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.containers[flink-main-container].resources.limits.memory"}}},
		{name: "dask scheduler load balancer", kind: profiles.KindService, fixture: "dask-operator/scheduler-service.yaml",
			policy: "match: {managers: [dask], roles: [scheduler]}\nservice: {spec: {type: LoadBalancer}}",
			want:   []checks.Finding{{Check: checks.DaskLoadBalancer, Severity: checks.SeverityWarning, Policy: "podpatch-system/hostile/p1", Field: "spec.type"}}},
		{name: "dask scheduler annotation only", kind: profiles.KindService, fixture: "dask-operator/scheduler-service.yaml",
			policy: "match: {managers: [dask], roles: [scheduler]}\nservice: {metadata: {annotations: {a: b}}}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kind := c.kind
			if kind == "" {
				kind = profiles.KindPod
			}
			res := applyBoth(t, platformSet(t, c.policy), kind, fixtureJSON(t, c.fixture, nil))
			require.True(t, res.Changed)
			require.Empty(t, res.Skipped)
			var got []checks.Finding
			for _, f := range res.Findings {
				require.NotEmpty(t, f.Message)
				require.NotEmpty(t, f.Fix)
				require.NotContains(t, f.String(), "\n")
				got = append(got, checks.Finding{Check: f.Check, Severity: f.Severity, Policy: f.Policy, Field: f.Field})
			}
			require.Equal(t, c.want, got, "%v", res.Findings)
		})
	}
}

// TestChecksDoNotChangeTheObject: the checks only read; every fixture patched by a policy set
// that fires every check gives the same object and patch with the checks as the patch applied
// without them (Apply's object is the patch's result, computed before the checks run), and
// Apply and Patch agree on every fixture.
func TestChecksDoNotChangeTheObject(t *testing.T) {
	set := platformSet(t,
		resourcesPolicy("ray, dask, dask-gateway, spark, flink", "worker, scheduler", `{limits: {memory: 3Gi, cpu: "3", nvidia.com/gpu: "1"}, requests: {memory: 3Gi, cpu: "3", nvidia.com/gpu: "1"}}`),
		"match: {managers: [dask], roles: [scheduler]}\nservice: {spec: {type: LoadBalancer}}")
	fired := map[string]bool{}
	for _, name := range []string{"kuberay/worker-pod.yaml", "kuberay/head-pod.yaml", "dask-classic/worker-pod.yaml", "dask-gateway/worker-pod.yaml",
		"spark/executor-pod.yaml", "spark/driver-pod.yaml", "flink/taskmanager-pod.yaml", "flink/jobmanager-pod.yaml", "dask-operator/scheduler-service.yaml"} {
		kind := profiles.KindPod
		if strings.HasSuffix(name, "service.yaml") {
			kind = profiles.KindService
		}
		obj := fixtureJSON(t, name, nil)
		res := applyBoth(t, set, kind, obj)
		for _, f := range res.Findings {
			fired[f.Check] = true
		}
		again, err := set.Apply(Input{Kind: kind, Object: res.Object, Namespace: "default"})
		require.NoError(t, err)
		require.JSONEq(t, string(res.Object), string(again.Object), "%s: idempotent", name)
		require.Empty(t, again.Findings, "%s: a second admission changes no figure, so finds nothing", name)
	}
	for _, id := range checks.IDs {
		if id == checks.KueuePlacement || id == checks.Unschedulable {
			continue // placement on Pods Kueue manages: TestKueuePlacementProperty; the scheduler's: package placement
		}
		require.True(t, fired[id], "%s never fired", id)
	}
}

// FuzzRayStartCommand feeds hostile command lines to the checks through a KubeRay worker whose
// GPUs, memory and CPUs a policy changes: the `ray start` parsing must not panic, must stay within
// MaxFindings, and Apply and Patch must agree. The command-line parsers on their own:
// policies/checks' FuzzCommandLine.
func FuzzRayStartCommand(f *testing.F) {
	seed := fixtureJSON(f, "kuberay/worker-pod.yaml", nil)
	var obj map[string]any
	require.NoError(f, json.Unmarshal(seed, &obj))
	main := obj["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	for _, s := range []string{main["args"].([]any)[0].(string), `ray start --num-gpus=1e999 --memory=-1 --resources='{"TPU": "x"}'`,
		`ray start --num-cpus --num-gpus`, `"ray" 'start' --memory=$(X) \`, "ray start --resources='" + strings.Repeat("{", 5000)} {
		f.Add(s, "--num-gpus=2")
	}
	set := platformSet(f, resourcesPolicy("ray, dask, flink, spark", "worker", `{limits: {memory: 3Gi, cpu: "3", nvidia.com/gpu: "1", google.com/tpu: "2"}, requests: {nvidia.com/gpu: "1", google.com/tpu: "2"}}`))
	f.Fuzz(func(t *testing.T, command, arg string) {
		main["args"] = []any{command, arg, command}
		main["env"] = []any{map[string]any{"name": "X", "value": arg}, map[string]any{"name": "FLINK_PROPERTIES", "value": command}}
		js, err := json.Marshal(obj)
		require.NoError(t, err)
		for _, labels := range []string{`"ray.io/node-type":"worker"`} {
			if !bytes.Contains(js, []byte(labels)) {
				t.Fatal("fixture lost its labels")
			}
		}
		res := applyBoth(t, set, profiles.KindPod, js)
		for _, fd := range res.Findings {
			require.Equal(t, checks.RayResources, fd.Check)
		}
		// The other managers' parsers read the same command lines in policies/checks'
		// FuzzCommandLine.
	})
}
