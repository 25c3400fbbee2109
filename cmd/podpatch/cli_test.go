package main

// These tests build the real podpatch binary once and run it as a user would, checking stdout,
// stderr and the exit status of `render`, `lint` and `version` (reference §4).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// podpatchBin is the binary built by TestMain.
var podpatchBin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "podpatch-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cli tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	podpatchBin = filepath.Join(dir, "podpatch")
	build := exec.Command("go", "build", "-o", podpatchBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cli tests: building podpatch:", err)
		return 1
	}
	return m.Run()
}

// Paths relative to this package's directory, where `go test` runs the tests.
const (
	examples     = "../../manifests/examples"
	fixtures     = "../../policies/testdata/fixtures"
	daskWorker   = fixtures + "/dask-operator/worker-pod.yaml"
	daskSched    = fixtures + "/dask-operator/scheduler-pod.yaml"
	daskService  = fixtures + "/dask-operator/scheduler-service.yaml"
	sparkExec    = fixtures + "/spark/executor-pod.yaml"
	gpuWorkerDep = "testdata/objects/gpu-worker-deployment.yaml"
	unrecognised = "testdata/objects/unrecognised.yaml"
	noNamespace  = "testdata/objects/worker-no-namespace.yaml"
	nsPolicies   = "testdata/policies"
	lintDir      = "testdata/lint"
)

// Provenance the example policies leave on the objects they patch.
const (
	workerApplied = "podpatch-system/platform-defaults/worker-requests," +
		"default/team-overrides/big-workers," +
		"podpatch-system/cost-center/cost-center," + securityApplied
	gpuWorkerApplied = "podpatch-system/platform-defaults/worker-requests," +
		"podpatch-system/gpu-workers/gpu-workers," +
		"default/team-overrides/big-workers," +
		"podpatch-system/cost-center/cost-center," + securityApplied
	schedulerPodApplied     = "podpatch-system/cost-center/cost-center," + securityApplied
	schedulerServiceApplied = "podpatch-system/external-urls/external-urls,podpatch-system/cost-center/cost-center,podpatch-system/platform-defaults/scheduler-internal-lb"
	sparkExecutorApplied    = "podpatch-system/platform-defaults/worker-requests,podpatch-system/spark-spot/spot-executors,podpatch-system/cost-center/cost-center," + securityApplied
	securityApplied         = "podpatch-system/security-baseline/security-baseline"
)

// result is what one run of the binary printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// podpatch runs the binary with args and stdin (none when empty). Whatever the outcome, a Go
// panic or stack trace must never reach the user.
func podpatch(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, podpatchBin, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	default:
		require.NoError(t, err, "running podpatch %s", strings.Join(args, " "))
	}
	for _, bad := range []string{"panic", "goroutine", "internal error"} {
		assert.NotContains(t, r.stderr, bad, "podpatch %s: stderr must never show a Go panic", strings.Join(args, " "))
	}
	return r
}

// requireOK asserts a successful run with nothing on stderr and returns stdout.
func requireOK(t *testing.T, r result) string {
	t.Helper()
	require.Equal(t, 0, r.code, "exit status; stderr:\n%s", r.stderr)
	require.Empty(t, r.stderr)
	return r.stdout
}

// requireOneLineError asserts a failed run with the given exit status and exactly one line on
// stderr, which is returned.
func requireOneLineError(t *testing.T, r result, code int) string {
	t.Helper()
	require.Equal(t, code, r.code, "exit status; stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.True(t, strings.HasSuffix(r.stderr, "\n"), "stderr must end in a newline: %q", r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "want exactly one line on stderr, got:\n%s", r.stderr)
	return strings.TrimSuffix(r.stderr, "\n")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// documents splits render's output into its documents, as JSON; every one must be valid YAML
// and must start with an explicit "---" separator.
func documents(t *testing.T, out string) [][]byte {
	t.Helper()
	require.True(t, strings.HasPrefix(out, "---\n"), "render output must start with ---: %q", out)
	docs, err := policies.SplitDocuments(strings.NewReader(out))
	require.NoError(t, err, "render output must be valid YAML:\n%s", out)
	js := make([][]byte, len(docs))
	for i, d := range docs {
		js[i] = d.JSON
	}
	return js
}

// decodeInto decodes a document strictly: podpatch must never write a field the Kubernetes type
// does not have.
func decodeInto(t *testing.T, doc []byte, v any) {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict(doc, v), "%s", doc)
}

func onePod(t *testing.T, out string) corev1.Pod {
	t.Helper()
	docs := documents(t, out)
	require.Len(t, docs, 1)
	var pod corev1.Pod
	decodeInto(t, docs[0], &pod)
	return pod
}

func quantities(rl corev1.ResourceList) map[string]string {
	out := make(map[string]string, len(rl))
	for k, q := range rl {
		out[string(k)] = q.String()
	}
	return out
}

func envOf(c corev1.Container) map[string]string {
	out := make(map[string]string, len(c.Env))
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

func envNames(c corev1.Container) []string {
	out := make([]string, len(c.Env))
	for i, e := range c.Env {
		out[i] = e.Name
	}
	return out
}

// checkExampleWorker checks what manifests/examples do to the Dask operator worker Pod of
// group "simple-default" in namespace default: the platform request default loses to the
// pod's own requests, the namespace policy raises memory and adds env and a team label, and
// cost-center is enforced. The GPU policy does not match that group.
func checkExampleWorker(t *testing.T, pod corev1.Pod) {
	t.Helper()
	assert.Equal(t, workerApplied, pod.Annotations[policies.AppliedAnnotation])
	assert.Equal(t, map[string]string{
		"dask.org/cluster-name":     "simple",
		"dask.org/workergroup-name": "simple-default",
		"dask.org/component":        "worker",
		"sidecar.istio.io/inject":   "false",
		"pod-template-hash":         "7d4b9c6f8",
		"team":                      "analytics",
		"cost-center":               "data-platform",
	}, pod.Labels)
	assert.Equal(t, "simple-default-worker-3f9c2a1b7e-7d4b9c6f8-", pod.GenerateName)
	assert.Empty(t, pod.Name)
	assert.Equal(t, "default", pod.Namespace)
	require.Len(t, pod.OwnerReferences, 1)
	assert.Equal(t, "simple-default-worker-3f9c2a1b7e-7d4b9c6f8", pod.OwnerReferences[0].Name)

	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]
	assert.Equal(t, "worker", c.Name)
	assert.Equal(t, "ghcr.io/dask/dask:latest", c.Image)
	assert.Equal(t, []string{"dask-worker", "--name", "$(DASK_WORKER_NAME)", "--dashboard", "--dashboard-address", "8788"}, c.Args)
	assert.Equal(t, []string{"DASK_WORKER_NAME", "DASK_SCHEDULER_ADDRESS", "MALLOC_TRIM_THRESHOLD_"}, envNames(c))
	assert.Equal(t, "65536", envOf(c)["MALLOC_TRIM_THRESHOLD_"])
	assert.Equal(t, map[string]string{"cpu": "1", "memory": "4Gi"}, quantities(c.Resources.Requests))
	assert.Equal(t, map[string]string{"cpu": "1", "memory": "4Gi"}, quantities(c.Resources.Limits))
	require.Len(t, c.Ports, 1)
	assert.Equal(t, corev1.ContainerPort{Name: "http-dashboard", ContainerPort: 8788, Protocol: corev1.ProtocolTCP}, c.Ports[0])
	assert.Empty(t, pod.Spec.NodeSelector, "gpu-workers matches only *gpu* groups")
	for _, tol := range pod.Spec.Tolerations {
		// The Pod arrives with the API server's default not-ready/unreachable tolerations.
		assert.NotEqual(t, "nvidia.com/gpu", tol.Key, "gpu-workers matches only *gpu* groups")
	}
	assert.Equal(t, corev1.RestartPolicyAlways, pod.Spec.RestartPolicy)
}

func TestVersion(t *testing.T) {
	out := requireOK(t, podpatch(t, "", "version"))
	assert.Regexp(t, `^podpatch \S+\n$`, out)
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}} {
		out := requireOK(t, podpatch(t, "", args...))
		assert.Contains(t, out, "podpatch render -f FILE")
		assert.Contains(t, out, "podpatch lint PATH")
	}
}

func TestRenderDaskWorker(t *testing.T) {
	fromFile := requireOK(t, podpatch(t, "", "render", "-f", daskWorker, "--policies", examples))
	checkExampleWorker(t, onePod(t, fromFile))

	t.Run("stdin", func(t *testing.T) {
		out := requireOK(t, podpatch(t, readFile(t, daskWorker), "render", "-f", "-", "--policies", examples))
		assert.Equal(t, fromFile, out, "reading from stdin must give what reading the file gives")
	})

	t.Run("json", func(t *testing.T) {
		js, err := yaml.YAMLToJSON([]byte(readFile(t, daskWorker)))
		require.NoError(t, err)
		var indented bytes.Buffer
		require.NoError(t, json.Indent(&indented, js, "", "  "))
		for name, text := range map[string]string{"compact.json": string(js), "indented.json": indented.String()} {
			path := writeFile(t, t.TempDir(), name, text)
			out := requireOK(t, podpatch(t, "", "render", "-f", path, "--policies", examples))
			assert.Equal(t, fromFile, out, "%s: JSON input must render like the same object in YAML", name)
		}
	})

	t.Run("json stdin", func(t *testing.T) {
		js, err := yaml.YAMLToJSON([]byte(readFile(t, daskWorker)))
		require.NoError(t, err)
		out := requireOK(t, podpatch(t, string(js), "render", "-f", "-", "--policies", examples))
		assert.Equal(t, fromFile, out)
	})

	t.Run("idempotent", func(t *testing.T) {
		// Admission may be re-invoked: rendering the output again changes nothing.
		again := requireOK(t, podpatch(t, fromFile, "render", "-f", "-", "--policies", examples))
		assert.Equal(t, fromFile, again)
	})

	t.Run("policy file", func(t *testing.T) {
		// Single files instead of a directory, repeated --policies, in any order.
		out := requireOK(t, podpatch(t, "", "render", "-f", daskWorker,
			"--policies", examples+"/team-overrides.yaml",
			"--policies", examples+"/cost-center.yaml",
			"--policies", examples+"/gpu-workers.yaml",
			"--policies", examples+"/security-baseline.yaml",
			"--policies", examples+"/platform-defaults.yaml"))
		assert.Equal(t, fromFile, out)
	})
}

func TestRenderMultiDocument(t *testing.T) {
	stream := strings.Join([]string{
		readFile(t, daskSched),
		readFile(t, daskWorker),
		readFile(t, daskService),
		readFile(t, sparkExec),
		readFile(t, unrecognised),
	}, "\n---\n")
	path := writeFile(t, t.TempDir(), "cluster.yaml", stream)
	out := requireOK(t, podpatch(t, "", "render", "-f", path, "--policies", examples))
	docs := documents(t, out)
	require.Len(t, docs, 6, "one output document per input object, in input order:\n%s", out)

	var sched corev1.Pod
	decodeInto(t, docs[0], &sched)
	assert.Equal(t, "scheduler", sched.Labels["dask.org/component"])
	assert.Equal(t, schedulerPodApplied, sched.Annotations[policies.AppliedAnnotation])
	assert.Equal(t, "data-platform", sched.Labels["cost-center"])
	assert.NotContains(t, sched.Labels, "team", "the namespace policy is for workers only")

	var worker corev1.Pod
	decodeInto(t, docs[1], &worker)
	checkExampleWorker(t, worker)

	var svc corev1.Service
	decodeInto(t, docs[2], &svc)
	assert.Equal(t, "Service", svc.Kind)
	assert.Equal(t, "simple-scheduler", svc.Name)
	assert.Equal(t, schedulerServiceApplied, svc.Annotations[policies.AppliedAnnotation])
	assert.Equal(t, "Internal", svc.Annotations["networking.gke.io/load-balancer-type"])
	assert.Equal(t, corev1.ServiceTypeLoadBalancer, svc.Spec.Type)
	assert.Equal(t, "data-platform", svc.Labels["cost-center"])
	assert.Equal(t, map[string]string{"dask.org/cluster-name": "simple", "dask.org/component": "scheduler"}, svc.Spec.Selector,
		"a Service's selector is never changed")
	require.Len(t, svc.Spec.Ports, 2)
	assert.Equal(t, "tcp-comm", svc.Spec.Ports[0].Name)
	assert.Equal(t, "http-dashboard", svc.Spec.Ports[1].Name)

	var executor corev1.Pod
	decodeInto(t, docs[3], &executor)
	assert.Equal(t, "spark-pi-8e2d4b6a1c3f5e70-exec-1", executor.Name)
	assert.Equal(t, sparkExecutorApplied, executor.Annotations[policies.AppliedAnnotation])
	assert.Contains(t, executor.Spec.Tolerations, corev1.Toleration{
		Key: "cloud.google.com/gke-spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule,
	})
	require.NotNil(t, executor.Spec.Affinity)
	require.NotNil(t, executor.Spec.Affinity.NodeAffinity)
	required := executor.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	require.NotNil(t, required)
	require.NotEmpty(t, required.NodeSelectorTerms)
	for _, term := range required.NodeSelectorTerms {
		assert.Contains(t, term.MatchExpressions, corev1.NodeSelectorRequirement{
			Key: "cloud.google.com/gke-spot", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"},
		})
	}

	// The unrecognised objects at the end are printed exactly as they came in.
	assert.True(t, strings.HasSuffix(out, "\n---\n"+readFile(t, unrecognised)),
		"unrecognised objects must be printed verbatim at the end:\n%s", out)
	var web corev1.Pod
	decodeInto(t, docs[4], &web)
	assert.Equal(t, "web", web.Name)
	var cm corev1.ConfigMap
	decodeInto(t, docs[5], &cm)
	assert.Equal(t, "settings", cm.Name)

	t.Run("several files", func(t *testing.T) {
		// Several -f flags: files in the order given.
		out := requireOK(t, podpatch(t, "", "render", "-f", daskService, "-f", daskWorker, "-f", unrecognised, "--policies", examples))
		docs := documents(t, out)
		require.Len(t, docs, 4)
		var svc corev1.Service
		decodeInto(t, docs[0], &svc)
		assert.Equal(t, schedulerServiceApplied, svc.Annotations[policies.AppliedAnnotation])
		var worker corev1.Pod
		decodeInto(t, docs[1], &worker)
		checkExampleWorker(t, worker)
		assert.True(t, strings.HasSuffix(out, "\n---\n"+readFile(t, unrecognised)))
	})
}

func TestRenderList(t *testing.T) {
	var items []json.RawMessage
	for _, f := range []string{daskService, daskWorker} {
		js, err := yaml.YAMLToJSON([]byte(readFile(t, f)))
		require.NoError(t, err)
		items = append(items, js)
	}
	items = append(items, json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"default"},"data":{"level":"debug"}}`))
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": items})
	require.NoError(t, err)
	listYAML, err := yaml.JSONToYAML(list)
	require.NoError(t, err)

	for name, text := range map[string]string{"list.json": string(list), "list.yaml": string(listYAML)} {
		t.Run(name, func(t *testing.T) {
			// A List stays one List (as kubectl get -o yaml prints it), its items patched in place
			// and in order.
			path := writeFile(t, t.TempDir(), name, text)
			out := requireOK(t, podpatch(t, "", "render", "-f", path, "--policies", examples))
			docs := documents(t, out)
			require.Len(t, docs, 1, "%s", out)
			var got struct {
				APIVersion string            `json:"apiVersion"`
				Kind       string            `json:"kind"`
				Metadata   map[string]any    `json:"metadata"`
				Items      []json.RawMessage `json:"items"`
			}
			decodeInto(t, docs[0], &got)
			assert.Equal(t, "v1", got.APIVersion)
			assert.Equal(t, "List", got.Kind)
			assert.Equal(t, map[string]any{"resourceVersion": ""}, got.Metadata)
			require.Len(t, got.Items, 3, "%s", out)
			var svc corev1.Service
			decodeInto(t, got.Items[0], &svc)
			assert.Equal(t, schedulerServiceApplied, svc.Annotations[policies.AppliedAnnotation])
			assert.Equal(t, corev1.ServiceTypeLoadBalancer, svc.Spec.Type)
			var worker corev1.Pod
			decodeInto(t, got.Items[1], &worker)
			checkExampleWorker(t, worker)
			assert.JSONEq(t, string(items[2]), string(got.Items[2]), "an item no policy matches is unchanged")
		})
	}

	t.Run("nothing matched", func(t *testing.T) {
		// A List none of whose items a policy matches is printed exactly as it came in.
		in := "# only settings\napiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: ConfigMap, metadata: {name: settings}, data: {level: 'debug'}}\n"
		out := requireOK(t, podpatch(t, in, "render", "-f", "-", "--policies", examples))
		assert.Equal(t, "---\n"+in, out)
	})

	t.Run("explain", func(t *testing.T) {
		path := writeFile(t, t.TempDir(), "list.json", string(list))
		out := requireOK(t, podpatch(t, "", "render", "-f", path, "--policies", examples, "--explain"))
		var explained []string
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "# podpatch: ") && !strings.HasPrefix(line, "# podpatch:  ") {
				explained = append(explained, line)
			}
		}
		require.Len(t, explained, 3, "one explanation heading per item:\n%s", out)
		assert.Contains(t, explained[0], "Service default/simple-scheduler: dask scheduler")
		assert.Contains(t, explained[1], "Pod default/simple-default-worker-3f9c2a1b7e-7d4b9c6f8-*: dask worker")
		assert.Contains(t, explained[2], "ConfigMap default/settings: not recognised")
	})
}

func TestRenderDeploymentTemplate(t *testing.T) {
	out := requireOK(t, podpatch(t, "", "render", "-f", gpuWorkerDep, "--policies", examples))
	docs := documents(t, out)
	require.Len(t, docs, 1)
	var dep appsv1.Deployment
	decodeInto(t, docs[0], &dep)

	// The Deployment itself is not a Pod: its metadata and selector are untouched.
	assert.Equal(t, "simple-gpu-worker-5b2e7c9d1a", dep.Name)
	assert.Empty(t, dep.Annotations)
	assert.NotContains(t, dep.Labels, "cost-center")
	wantSelector := map[string]string{"dask.org/cluster-name": "simple", "dask.org/workergroup-name": "simple-gpu", "dask.org/component": "worker"}
	require.NotNil(t, dep.Spec.Selector)
	assert.Equal(t, wantSelector, dep.Spec.Selector.MatchLabels)
	require.NotNil(t, dep.Spec.Replicas)
	assert.Equal(t, int32(1), *dep.Spec.Replicas)

	// Its pod template is patched as a Pod of the Deployment's namespace, so the GPU policy
	// (group simple-gpu) and the namespace policy of "default" apply.
	tmpl := dep.Spec.Template
	assert.Equal(t, gpuWorkerApplied, tmpl.Annotations[policies.AppliedAnnotation])
	assert.Equal(t, "data-platform", tmpl.Labels["cost-center"])
	assert.Equal(t, "analytics", tmpl.Labels["team"])
	for k, v := range wantSelector {
		assert.Equal(t, v, tmpl.Labels[k], "template labels the selector depends on are kept")
	}
	assert.Equal(t, map[string]string{"cloud.google.com/gke-nodepool": "gpu-pool"}, tmpl.Spec.NodeSelector)
	assert.Equal(t, []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		tmpl.Spec.Tolerations)
	require.Len(t, tmpl.Spec.Containers, 1)
	c := tmpl.Spec.Containers[0]
	assert.Equal(t, map[string]string{"cpu": "4", "memory": "4Gi", "nvidia.com/gpu": "1"}, quantities(c.Resources.Limits))
	assert.Equal(t, map[string]string{"cpu": "4", "memory": "4Gi"}, quantities(c.Resources.Requests))
	assert.Equal(t, "65536", envOf(c)["MALLOC_TRIM_THRESHOLD_"])

	t.Run("idempotent", func(t *testing.T) {
		again := requireOK(t, podpatch(t, out, "render", "-f", "-", "--policies", examples))
		assert.Equal(t, out, again)
	})
}

func TestRenderExplain(t *testing.T) {
	plain := requireOK(t, podpatch(t, "", "render", "-f", daskWorker, "-f", unrecognised, "--policies", examples))
	out := requireOK(t, podpatch(t, "", "render", "-f", daskWorker, "-f", unrecognised, "--policies", examples, "--explain"))

	var explained, rest []string
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(line, "# podpatch:") {
			explained = append(explained, strings.TrimSuffix(line, "\n"))
		} else {
			rest = append(rest, line)
		}
	}
	assert.Equal(t, plain, strings.Join(rest, ""), "--explain only adds # podpatch: comment lines")
	require.Len(t, explained, 7+len(profiles.All()), "%s", out)
	assert.Equal(t, `# podpatch: Pod default/simple-default-worker-3f9c2a1b7e-7d4b9c6f8-*: dask worker, cluster "simple", group "simple-default"`, explained[0])
	assert.Regexp(t, `^# podpatch:   podpatch-system/platform-defaults/worker-requests \(platform default\): `, explained[1])
	assert.Regexp(t, `^# podpatch:   default/team-overrides/big-workers \(namespace merge\): .*metadata\.labels\.team`, explained[2])
	assert.Contains(t, explained[2], "MALLOC_TRIM_THRESHOLD_")
	assert.Regexp(t, `^# podpatch:   podpatch-system/cost-center/cost-center \(platform enforce\): metadata\.labels\.cost-center$`, explained[3])
	assert.Regexp(t, `^# podpatch:   podpatch-system/security-baseline/security-baseline \(platform enforce\): spec\.containers\[worker\]\.securityContext, spec\.securityContext\.seccompProfile$`, explained[4])
	assert.Equal(t, "# podpatch: Pod default/web: not recognised by any profile, unchanged", explained[5])
	// An unrecognised Pod is told, one line a profile, which labels and values each expects
	//; a ConfigMap, which podpatch never shapes, is not.
	for i, p := range profiles.All() {
		assert.Regexp(t, `^# podpatch:   `+regexp.QuoteMeta(string(p.Manager)+" expects label "+p.RoleKey+" in (")+`.+\)`, explained[6+i])
		for role := range p.Roles {
			assert.Contains(t, explained[6+i], role)
		}
		if p.RequireKey != "" {
			assert.Contains(t, explained[6+i], p.RequireKey)
		}
	}
	assert.Equal(t, "# podpatch: ConfigMap default/settings: not recognised by any profile, unchanged", explained[6+len(profiles.All())])
	documents(t, out) // the comments keep the output valid YAML
}

func TestRenderUnmatchedVerbatim(t *testing.T) {
	t.Run("unrecognised", func(t *testing.T) {
		in := readFile(t, unrecognised)
		parts := strings.Split(in, "\n---\n")
		require.Len(t, parts, 2)
		out := requireOK(t, podpatch(t, "", "render", "-f", unrecognised, "--policies", examples))
		assert.Equal(t, "---\n"+parts[0]+"\n---\n"+parts[1], out)
	})
	t.Run("recognised, no policy matches", func(t *testing.T) {
		in := readFile(t, noNamespace)
		out := requireOK(t, podpatch(t, "", "render", "-f", noNamespace, "--policies", nsPolicies))
		assert.Equal(t, "---\n"+in, out)
	})
	t.Run("json", func(t *testing.T) {
		in := `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}`
		out := requireOK(t, podpatch(t, in+"\n", "render", "-f", "-", "--policies", examples))
		assert.Equal(t, "---\n"+in+"\n", out)
	})
}

func TestRenderNamespace(t *testing.T) {
	const prodPool, teamNS = "podpatch-system/namespace-scoped/prod-pool", "podpatch-system/namespace-scoped/team-namespaces"
	cases := []struct {
		name          string
		file          string
		flags         []string
		wantApplied   string // empty: printed unchanged
		wantPool      bool
		wantTeamLabel bool
	}{
		{name: "no namespace labels", file: noNamespace},
		{name: "namespace labels", file: noNamespace, flags: []string{"--namespace-labels", "env=prod,tier=gold"},
			wantApplied: prodPool, wantPool: true},
		{name: "other namespace labels", file: noNamespace, flags: []string{"--namespace-labels", "env=dev"}},
		{name: "namespace", file: noNamespace, flags: []string{"--namespace", "team-x"},
			wantApplied: teamNS, wantTeamLabel: true},
		{name: "namespace and labels", file: noNamespace, flags: []string{"--namespace", "team-x", "--namespace-labels", "env=prod"},
			wantApplied: prodPool + "," + teamNS, wantPool: true, wantTeamLabel: true},
		// The object's own metadata.namespace wins over --namespace.
		{name: "own namespace wins", file: daskWorker, flags: []string{"--namespace", "team-x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"render", "-f", c.file, "--policies", nsPolicies}, c.flags...)
			out := requireOK(t, podpatch(t, "", args...))
			if c.wantApplied == "" {
				assert.Equal(t, "---\n"+readFile(t, c.file), out, "an object no policy matches is printed as it came in")
				return
			}
			pod := onePod(t, out)
			assert.Equal(t, c.wantApplied, pod.Annotations[policies.AppliedAnnotation])
			assert.Empty(t, pod.Namespace, "render does not add a namespace the object lacks")
			if c.wantPool {
				assert.Equal(t, map[string]string{"cloud.google.com/gke-nodepool": "prod-pool"}, pod.Spec.NodeSelector)
			} else {
				assert.Empty(t, pod.Spec.NodeSelector)
			}
			if c.wantTeamLabel {
				assert.Equal(t, "true", pod.Labels["podpatch.example.com/team-namespace"])
			} else {
				assert.NotContains(t, pod.Labels, "podpatch.example.com/team-namespace")
			}
		})
	}

	t.Run("namespace policy without namespace", func(t *testing.T) {
		// A policy ConfigMap without metadata.namespace belongs to --namespace, like kubectl apply.
		dir := t.TempDir()
		writeFile(t, dir, "team.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: team
  labels: {podpatch.io/policy: "true"}
data:
  env.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: env}
    spec:
      template:
        spec:
          containers:
            - name: "*"
              env: [{name: TEAM, value: x}]
`)
		out := requireOK(t, podpatch(t, "", "render", "-f", noNamespace, "--policies", dir, "--namespace", "team-x"))
		pod := onePod(t, out)
		assert.Equal(t, "team-x/team/env", pod.Annotations[policies.AppliedAnnotation])
		require.Len(t, pod.Spec.Containers, 1)
		assert.Equal(t, "x", envOf(pod.Spec.Containers[0])["TEAM"])
	})
}

// lintLine is `FILE: <configmap ns/name>: <data key>: <policy>: <field path>: <message>`.
var lintLine = regexp.MustCompile(`^(\S+): (\S+/\S+): (\S+): (\S+): (\S+): (.+)$`)

// scopeLine is `FILE: <configmap ns/name>: scope: …`, the line lint prints for a ConfigMap with
// problems, without a namespace, or without the policy label.
var scopeLine = regexp.MustCompile(`(?m)^\S+: \S+/\S+: scope: .*\n`)

// withoutScopes is lint's output less its scope lines.
func withoutScopes(out string) string { return scopeLine.ReplaceAllString(out, "") }

func TestLintExamples(t *testing.T) {
	out := requireOK(t, podpatch(t, "", "lint", examples))
	assert.Regexp(t, `^\d+ ConfigMap\(s\), [1-9]\d* platform and [1-9]\d* namespace policies: ok\n$`, out, "a clean lint prints its summary alone")
}

func TestLintBadPolicies(t *testing.T) {
	cases := []struct {
		file                                  string
		configMap, key, policy, field, prefix string
	}{
		{"unknown-field.yaml", "podpatch-system/typo", "workers.yaml", "pool",
			"spec.template.spec.nodeSelecter", "Forbidden: unknown field"},
		{"bad-toleration.yaml", "podpatch-system/tolerations", "gpu.yaml", "gpu",
			"spec.template.spec.tolerations[1].operator", `Unsupported value: "Exist"`},
		{"enforce-in-namespace.yaml", "team-a/team-rules", "labels.yaml", "team-label",
			"spec.mode", "Forbidden: enforce is for platform policies only"},
		{"forbidden-field.yaml", "team-b/team-image", "image.yaml", "custom-image",
			"spec.template.spec.containers[0].image", "Forbidden: namespace policies may set only: "},
		{"bad-key.yaml", "podpatch-system/bad-key", "workers.txt", "-",
			"data[workers.txt]", `Invalid value: "workers.txt": data keys must end in .yaml or .yml`},
		{"missing-label.yaml", "podpatch-system/unlabelled", "-", "-",
			"metadata.labels[podpatch.io/policy]", `Required value: must be "true"`},
		{"invalid-yaml.yaml", "podpatch-system/broken", "broken.yaml", "-",
			"data[broken.yaml]", "Invalid value: not valid YAML: document 1: line 6 of the key's text (line 16 of "},
		{"infrastructure-annotation.yaml", "team-c/team-lb", "lb.yaml", "open-lb",
			"spec.service.metadata.annotations[service.beta.kubernetes.io/load-balancer-source-ranges]",
			`Forbidden: namespace policies may not set this annotation: it makes infrastructure act (cloud load balancers, DNS, secret injectors, podpatch itself); it matches "service.beta.kubernetes.io/*" of --namespace-denied-annotations`},
		{"oscillating-selectors.yaml", "podpatch-system/oscillating", "a.yaml", "a", "spec.match.selector",
			"Forbidden: the selection of podpatch-system/oscillating/a, podpatch-system/oscillating/b can oscillate: " +
				"podpatch-system/oscillating/a sets label phase-a=1 on pods, which makes podpatch-system/oscillating/b match; " +
				"podpatch-system/oscillating/b sets label phase-b=1 on pods, which makes podpatch-system/oscillating/a stop matching; " +
				"podpatch re-selects at most 4 times, then applies only the enforce policies"},
		{"blank-image.yaml", "podpatch-system/blank-image", "sidecar.yaml", "shipper",
			"spec.template.spec.containers[0].image", `Invalid value: " ": must not have leading or trailing whitespace`},
	}
	check := func(t *testing.T, line, file, configMap, key, policy, field, prefix string) {
		t.Helper()
		m := lintLine.FindStringSubmatch(line)
		require.NotNil(t, m, "lint line %q does not have the form FILE: ns/name: key: policy: field: message", line)
		assert.Equal(t, []string{file, configMap, key, policy, field}, m[1:6], "%s", line)
		assert.True(t, strings.HasPrefix(m[6], prefix), "message %q should start with %q", m[6], prefix)
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := lintDir + "/" + c.file
			r := podpatch(t, "", "lint", path)
			require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			assert.Empty(t, r.stderr)
			lines := strings.Split(strings.TrimSuffix(withoutLabelWarnings(withoutScopes(r.stdout)), "\n"), "\n")
			require.Len(t, lines, 1, "%s", r.stdout)
			check(t, lines[0], path, c.configMap, c.key, c.policy, c.field, c.prefix)
		})
	}

	t.Run("directory", func(t *testing.T) {
		// A directory: every file, in name order, and with a valid one the exit status stays 1.
		r := podpatch(t, "", "lint", examples, lintDir)
		require.Equal(t, 1, r.code, "stderr:\n%s", r.stderr)
		assert.Empty(t, r.stderr)
		lines := strings.Split(strings.TrimSuffix(withoutLabelWarnings(withoutScopes(r.stdout)), "\n"), "\n")
		require.Len(t, lines, len(cases), "%s", r.stdout)
		byFile := map[string]string{}
		for _, l := range lines {
			file, _, _ := strings.Cut(l, ": ")
			byFile[file] = l
		}
		for _, c := range cases {
			path := filepath.Join(lintDir, c.file)
			require.Contains(t, byFile, path, "%s", r.stdout)
			check(t, byFile[path], path, c.configMap, c.key, c.policy, c.field, c.prefix)
		}
	})

	t.Run("stdin", func(t *testing.T) {
		r := podpatch(t, readFile(t, lintDir+"/bad-toleration.yaml"), "lint", "-")
		require.Equal(t, 1, r.code)
		check(t, strings.TrimSuffix(withoutScopes(r.stdout), "\n"), "-", "podpatch-system/tolerations", "gpu.yaml", "gpu",
			"spec.template.spec.tolerations[1].operator", `Unsupported value: "Exist"`)
	})

	t.Run("namespace denied annotations flag", func(t *testing.T) {
		// An empty deny-list leaves the annotation to the allow-list, which allows it; a list
		// with an exception for it too; a list of other keys does not name it.
		path := lintDir + "/infrastructure-annotation.yaml"
		for _, flag := range []string{"--namespace-denied-annotations=",
			"--namespace-denied-annotations=service.beta.kubernetes.io/*,!service.beta.kubernetes.io/load-balancer-source-ranges",
			"--namespace-denied-annotations=vault.hashicorp.com/*"} {
			out := requireOK(t, podpatch(t, "", "lint", flag, path))
			assert.Equal(t, "1 ConfigMap(s), 0 platform and 1 namespace policies: ok\n", out, flag)
		}
		r := podpatch(t, "", "lint", "--namespace-denied-annotations=example.com/*,service.*/load-balancer-*", path)
		require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		assert.Contains(t, r.stdout, `it matches "service.*/load-balancer-*" of --namespace-denied-annotations`)
		r = podpatch(t, "", "lint", "--namespace-denied-annotations=[", path)
		require.Equal(t, 2, r.code, "a bad glob is a usage error: %s", r.stderr)
		assert.Contains(t, r.stderr, "--namespace-denied-annotations: ")
	})

	t.Run("platform namespace flag", func(t *testing.T) {
		// With team-a as the platform namespace, enforce is allowed there.
		out := requireOK(t, podpatch(t, "", "lint", "--platform-namespace", "team-a", lintDir+"/enforce-in-namespace.yaml"))
		assert.Equal(t, "1 ConfigMap(s), 1 platform and 0 namespace policies: ok\n", out)
	})
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	notYAML := writeFile(t, dir, "not-yaml.yaml", "kind: Pod\nmetadata: [name: web\n")
	text := writeFile(t, dir, "notes.txt", "render these pods please\n")
	binary := writeFile(t, dir, "blob.yaml", "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	noKind := writeFile(t, dir, "no-kind.yaml", readFile(t, daskWorker)+"---\napiVersion: v1\nmetadata: {name: nameless}\n")
	listNoKind := writeFile(t, dir, "list.json", `{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Pod", "apiVersion": "v1"}, {"metadata": {"name": "x"}}]}`)
	badJSON := writeFile(t, dir, "bad.json", `{"kind": "Pod", "apiVersion": `)
	missing := filepath.Join(dir, "missing.yaml")

	cases := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  []string // substrings of the one stderr line
	}{
		{name: "missing file", args: []string{"render", "-f", missing, "--policies", examples},
			code: 1, want: []string{"podpatch render: ", missing, "no such file"}},
		{name: "missing policies", args: []string{"render", "-f", daskWorker, "--policies", filepath.Join(dir, "nope")},
			code: 1, want: []string{"podpatch render: ", filepath.Join(dir, "nope"), "no such file"}},
		{name: "not YAML", args: []string{"render", "-f", notYAML, "--policies", examples},
			code: 1, want: []string{"podpatch render: " + notYAML + ": document 1: "}},
		{name: "not YAML on stdin", args: []string{"render", "-f", "-", "--policies", examples}, stdin: "kind: Pod\nmetadata: [name: web\n",
			code: 1, want: []string{"podpatch render: -: document 1: "}},
		{name: "plain text", args: []string{"render", "-f", text, "--policies", examples},
			code: 1, want: []string{"podpatch render: " + text + ": document 1: ", "expected a JSON object"}},
		{name: "binary", args: []string{"render", "-f", binary, "--policies", examples},
			code: 1, want: []string{"podpatch render: " + binary + ": document 1: "}},
		{name: "truncated JSON", args: []string{"render", "-f", badJSON, "--policies", examples},
			code: 1, want: []string{"podpatch render: " + badJSON + ": document 1: "}},
		{name: "object without kind", args: []string{"render", "-f", noKind, "--policies", examples},
			code: 1, want: []string{"podpatch render: " + noKind + ": document 2: object has no kind"}},
		{name: "list item without kind", args: []string{"render", "-f", listNoKind, "--policies", examples},
			code: 1, want: []string{"podpatch render: " + listNoKind + ": document 1: items[1]: object has no kind"}},
		{name: "policies that are not ConfigMaps", args: []string{"render", "-f", daskWorker, "--policies", daskService},
			code: 1, want: []string{"podpatch render: " + daskService + ": document 1: ", "ConfigMap"}},
		{name: "unknown flag", args: []string{"render", "--bogus", "-f", daskWorker, "--policies", examples},
			code: 2, want: []string{"podpatch render: ", "unknown flag: --bogus"}},
		{name: "missing -f", args: []string{"render", "--policies", examples},
			code: 2, want: []string{"podpatch render: ", "-f FILE"}},
		{name: "missing --policies", args: []string{"render", "-f", daskWorker},
			code: 2, want: []string{"podpatch render: ", "--policies"}},
		{name: "stdin twice", args: []string{"render", "-f", "-", "-f", "-", "--policies", examples},
			code: 2, want: []string{"podpatch render: ", "standard input"}},
		{name: "stray argument", args: []string{"render", "-f", daskWorker, "--policies", examples, "extra"},
			code: 2, want: []string{"podpatch render: ", "extra"}},
		{name: "bad namespace labels", args: []string{"render", "-f", daskWorker, "--policies", examples, "--namespace-labels", "novalue"},
			code: 2, want: []string{"podpatch render: ", "namespace-labels"}},
		{name: "unknown command", args: []string{"frobnicate"},
			code: 2, want: []string{`unknown command "frobnicate"`}},
		{name: "serve without a budget", args: []string{"serve", "--request-budget", "0"},
			code: 2, want: []string{"podpatch serve: ", "--request-budget must be positive"}},
		{name: "serve without slots", args: []string{"serve", "--max-in-flight", "0"},
			code: 2, want: []string{"podpatch serve: ", "--max-in-flight must be at least 1"}},
		{name: "serve with a bad memory limit", args: []string{"serve", "--memory-limit", "lots"},
			code: 2, want: []string{"podpatch serve: ", `--memory-limit "lots"`}},
		{name: "lint without paths", args: []string{"lint"},
			code: 2, want: []string{"podpatch lint: "}},
		{name: "lint unknown flag", args: []string{"lint", "--bogus", examples},
			code: 2, want: []string{"podpatch lint: ", "unknown flag: --bogus"}},
		{name: "lint missing path", args: []string{"lint", missing},
			code: 1, want: []string{"podpatch lint: ", missing, "no such file"}},
		{name: "lint not YAML", args: []string{"lint", notYAML},
			code: 1, want: []string{"podpatch lint: " + notYAML + ": document 1: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := podpatch(t, c.stdin, c.args...)
			line := requireOneLineError(t, r, c.code)
			for _, w := range c.want {
				assert.Contains(t, line, w)
			}
			assert.Empty(t, r.stdout, "nothing is printed on stdout when the input is bad")
		})
	}

	t.Run("render with an invalid policy", func(t *testing.T) {
		// The lint lines of the bad ConfigMap, then one summary line; nothing rendered.
		bad := lintDir + "/bad-toleration.yaml"
		r := podpatch(t, "", "render", "-f", daskWorker, "--policies", examples, "--policies", bad)
		require.Equal(t, 1, r.code, "stderr:\n%s", r.stderr)
		assert.Empty(t, r.stdout)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		require.Len(t, lines, 2, "%s", r.stderr)
		assert.Equal(t, bad+`: podpatch-system/tolerations: gpu.yaml: gpu: spec.template.spec.tolerations[1].operator: Unsupported value: "Exist": supported values: "Equal", "Exists"`, lines[0])
		assert.Equal(t, "podpatch render: 1 invalid policy ConfigMap(s); run podpatch lint for details", lines[1])
	})

	t.Run("no command", func(t *testing.T) {
		r := podpatch(t, "")
		require.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "Usage:")
		assert.Empty(t, r.stdout)
	})
}
