package policytest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const head = "apiVersion: podpatch.io/v1alpha1\nkind: PolicyTest\nmetadata: {name: s}\nspec:\n  policies: [../../manifests/examples]\n"

const worker = "../../policies/testdata/fixtures/dask-operator/worker-pod.yaml"

// openRoot opens dir as the suites' root until the test ends.
func openRoot(t testing.TB, dir string) *Root {
	t.Helper()
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// repo is the repository as the root: the suites of testdata name its policies and fixtures.
func repo(t testing.TB) Options { return Options{Root: openRoot(t, "../..")} }

// TestLoadErrors: each class of wrong test file is an *Error with its line.
func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		line       int
		msg        string
	}{
		{"unknown field", head + "  cases:\n    - name: a\n      file: x\n      expect: {aplied: []}\n", 9, "field aplied not found"},
		{"wrong type", head + "  cases:\n    - name: a\n      file: x\n      expect: {changed: maybe}\n", 9, "cannot unmarshal"},
		{"no expectation", head + "  cases:\n    - name: a\n      file: x\n", 7, "no expectation"},
		{"no cases", head, 5, "spec.cases is empty"},
		{"no object", head + "  cases:\n    - name: a\n      expect: {changed: true}\n", 7, "one of them"},
		{"both objects", head + "  cases:\n    - name: a\n      file: x\n      object: {kind: Pod}\n      expect: {changed: true}\n", 7, "one of them"},
		{"duplicate case", head + "  cases:\n    - name: a\n      file: x\n      expect: {changed: true}\n    - name: a\n      file: x\n      expect: {changed: true}\n", 10, "also at line 7"},
		{"value and absent", head + "  cases:\n    - name: a\n      file: x\n      expect:\n        fields:\n          - {path: a, value: 1, absent: true}\n", 11, "one of them"},
		{"neither value nor absent", head + "  cases:\n    - name: a\n      file: x\n      expect:\n        fields:\n          - {path: a}\n", 11, "one of them"},
		{"bad path", head + "  cases:\n    - name: a\n      file: x\n      expect:\n        fields:\n          - {path: \"a[b\", absent: true}\n", 11, "unclosed"},
		{"unknown check", head + "  cases:\n    - name: a\n      file: x\n      expect: {findings: [gpu-check]}\n", 9, `unknown check id "gpu-check"`},
		{"kubernetes version", head + "  context: {kubernetesVersion: \"1.31\"}\n  cases:\n    - name: a\n      file: x\n      expect: {changed: true}\n", 6, "not supported"},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n", 2, "want apiVersion"},
		{"alias", head + "  cases: &c []\n  more: *c\n", 0, "alias"},
		{"two documents", head + "  cases: []\n---\n" + head, 0, "holds 2 documents"},
		{"schedulable without nodes", head + "  cases:\n    - name: a\n      file: x\n      expect:\n        changed: true\n        schedulable: true\n", 11, "expect.schedulable needs context.nodes"},
		{"fitsNodes without nodes", head + "  context: {nodes: {objects: []}}\n  cases:\n    - name: a\n      file: x\n      expect: {fitsNodes: [n]}\n", 10, "expect.fitsNodes needs context.nodes"},
		{"unschedulable finding without nodes", head + "  cases:\n    - name: a\n      file: x\n      expect:\n        findings: [unschedulable]\n", 10, "expect.findings: unschedulable needs context.nodes"},
		{"reason without schedulable false", head + nodesCtx + "  cases:\n    - name: a\n      file: x\n      expect:\n        unschedulableReason: taint\n", 14, "needs schedulable: false"},
		{"unschedulable but fits", head + nodesCtx + "  cases:\n    - name: a\n      file: x\n      expect:\n        schedulable: false\n        fitsNodes: [n]\n", 14, "names what takes the Pod"},
		{"schedulable contradicts findings", head + nodesCtx + "  cases:\n    - name: a\n      file: x\n      expect:\n        schedulable: false\n        findings: []\n", 15, "contradicts expect.findings"},
		{"after leading document marker", "---\n" + head + "  cases:\n    - name: a\n      file: x\n", 8, "no expectation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "t.yaml")
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := load(openRoot(t, dir), path)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("want *Error, got %v", err)
			}
			if e.Line != tc.line || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("got %v, want line %d and %q", err, tc.line, tc.msg)
			}
		})
	}
}

// nodesCtx is a context with one Node.
const nodesCtx = "  context:\n    nodes:\n      objects:\n        - {apiVersion: v1, kind: Node, metadata: {name: n}}\n"

// TestRunFileErrors: expectations that name what does not exist are *Errors with the case's line.
func TestRunFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, msg string }{
		{"unknown applied", "      expect: {applied: [a/b/c]}\n", "expect.applied names a/b/c"},
		{"unknown leftOut", "      expect: {leftOut: [{policy: a/b/c}]}\n", "expect.leftOut names a/b/c"},
		{"missing object file", "      expect: {objectFile: want/none.yaml}\n", "run podpatch test --update"},
		{"unknown fitsNodes", "      expect: {fitsNodes: [gpu-1]}\n", "expect.fitsNodes names gpu-1, which is no Node of context.nodes"},
		{"unknown fitsNodePools", "      expect: {fitsNodePools: [spot]}\n", "expect.fitsNodePools names spot, which is no NodePool of context.nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", "tmp-"+strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			body := head + "  cases:\n    - name: a\n      file: " + worker + "\n" + tc.body
			if strings.Contains(tc.name, "fitsNode") {
				body = head + nodesCtx + "  cases:\n    - name: a\n      file: " + worker + "\n" + tc.body
			}
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(path) })
			_, err := RunFile(path, repo(t))
			var e *Error
			line := 7
			if strings.Contains(tc.name, "fitsNode") {
				line += strings.Count(nodesCtx, "\n")
			}
			if !errors.As(err, &e) || e.Line != line || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("got %v, want line %d and %q", err, line, tc.msg)
			}
		})
	}
}

// TestParsePath pins the field path syntax.
func TestParsePath(t *testing.T) {
	for p, want := range map[string]string{
		"metadata.labels.team":                                     "metadata|labels|team",
		"spec.nodeSelector[cloud.google.com/gke-nodepool]":         "spec|nodeSelector|cloud.google.com/gke-nodepool",
		"spec.containers[worker].resources.limits[nvidia.com/gpu]": "spec|containers|worker|resources|limits|nvidia.com/gpu",
		"spec.tolerations[0]":                                      "spec|tolerations|0",
	} {
		got, err := parsePath(p)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("parsePath(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, bad := range []string{"", "a.", "a..b", "a[", "a[]"} {
		if _, err := parsePath(bad); err == nil {
			t.Errorf("parsePath(%q): want an error", bad)
		}
	}
}

// TestPlacement: a case that fits and one that does not, each expected both ways: the right
// expectation passes, the wrong one fails saying what did not hold.
func TestPlacement(t *testing.T) {
	nodes := `  context:
    nodes:
      objects:
        - {apiVersion: v1, kind: Node, metadata: {name: cpu-a, labels: {cloud.google.com/gke-nodepool: default-pool}}}
        - apiVersion: v1
          kind: Node
          metadata: {name: gpu-a, labels: {cloud.google.com/gke-nodepool: gpu-pool}}
          spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
`
	gpuWorker := `      object:
        apiVersion: v1
        kind: Pod
        metadata:
          labels: {dask.org/cluster-name: c, dask.org/component: worker, dask.org/workergroup-name: c-gpu}
        spec: {containers: [{name: worker, image: dask}]}
`
	stranded := `      object:
        apiVersion: v1
        kind: Pod
        metadata:
          labels: {dask.org/cluster-name: c, dask.org/component: worker, dask.org/workergroup-name: c-default}
        spec:
          nodeSelector: {cloud.google.com/gke-nodepool: gpu-pool}
          containers: [{name: worker, image: dask}]
`
	for _, tc := range []struct {
		name, object, expect string
		failures             []string
	}{
		{"fits, expected", gpuWorker, "{schedulable: true, fitsNodes: [gpu-a], findings: []}", nil},
		{"fits, expected not", gpuWorker, "{schedulable: false, findings: [unschedulable]}",
			[]string{"schedulable: want false, got true (it fits Nodes gpu-a)", "findings: want unschedulable, missing (got [])"}},
		{"fits, other node", gpuWorker, "{fitsNodes: [cpu-a]}", []string{"fitsNodes: want cpu-a, missing (got [gpu-a])", "fitsNodes: unexpected gpu-a"}},
		{"stranded, expected", stranded, "{schedulable: false, unschedulableReason: nvidia.com/gpu=present:NoSchedule is not tolerated, fitsNodes: [], findings: [unschedulable]}", nil},
		{"stranded, expected to fit", stranded, "{schedulable: true}",
			[]string{"schedulable: want true, got false: the Pod would be unschedulable: no Node of 2 fits (Node cpu-a: its labels do not match the nodeSelector or required node affinity; Node gpu-a: taint nvidia.com/gpu=present:NoSchedule is not tolerated)"}},
		{"stranded, other reason", stranded, "{schedulable: false, unschedulableReason: cordoned}",
			[]string{`unschedulableReason: want a message containing "cordoned", got "the Pod would be unschedulable: no Node of 2 fits`}},
		{"stranded, no findings", stranded, "{findings: []}", []string{"findings: unexpected unschedulable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", "tmp-placement.yaml")
			body := head + nodes + "  cases:\n    - name: a\n" + tc.object + "      expect: " + tc.expect + "\n"
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(path) })
			rs, err := RunFile(path, repo(t))
			if err != nil || len(rs) != 1 {
				t.Fatalf("RunFile: %v, %d results", err, len(rs))
			}
			if rs[0].Pass != (len(tc.failures) == 0) || len(rs[0].Failures) != len(tc.failures) {
				t.Fatalf("pass %v, failures:\n%s\nwant:\n%s", rs[0].Pass, strings.Join(rs[0].Failures, "\n"), strings.Join(tc.failures, "\n"))
			}
			for i, f := range tc.failures {
				if !strings.HasPrefix(rs[0].Failures[i], f) {
					t.Errorf("failure %d: got %q, want %q", i, rs[0].Failures[i], f)
				}
			}
		})
	}
}

// TestNodesErrors: context.nodes that cannot be read, or beyond the bounds, is a wrong test file
// at the line of context.nodes; a placement expectation on a Service is one at the case's.
func TestNodesErrors(t *testing.T) {
	dir := tmpDir(t)
	many := &strings.Builder{}
	for i := range MaxNodes + 1 {
		fmt.Fprintf(many, "---\napiVersion: v1\nkind: Node\nmetadata: {name: n%d}\n", i)
	}
	for name, text := range map[string]string{
		"many.yaml":  many.String(),
		"pod.yaml":   "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
		"twice.yaml": "apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: Node, metadata: {name: a}}\n  - {apiVersion: v1, kind: Node, metadata: {name: a}}\n",
		"big/1.yaml": "# " + strings.Repeat("x", MaxNodeBytes/2) + "\n",
		"big/2.yaml": "# " + strings.Repeat("x", MaxNodeBytes/2) + "\n",
	} {
		at := filepath.Join("testdata", dir, name)
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(at, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	service := "../../policies/testdata/fixtures/dask-operator/scheduler-service.yaml"
	for _, tc := range []struct {
		name, nodes, file string
		line              int
		msg               string
	}{
		{"too many", "{files: [" + dir + "/many.yaml]}", worker, 7, fmt.Sprintf("more than %d objects", MaxNodes)},
		{"too large", "{files: [" + dir + "/big]}", worker, 7, "more than 8 MiB together"},
		{"not a node", "{files: [" + dir + "/pod.yaml]}", worker, 7, "want a v1 Node"},
		{"twice", "{files: [" + dir + "/twice.yaml]}", worker, 7, "Node a is given twice"},
		{"missing", "{files: [" + dir + "/none.yaml]}", worker, 7, "no such file"},
		{"empty folder", "{files: [" + tmpDir(t) + "]}", worker, 7, "no *.yaml"},
		{"service", "{objects: [{apiVersion: v1, kind: Node, metadata: {name: n}}]}", service, 9, "a Service is placed on no Node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", "tmp-nodes.yaml")
			body := head + "  context:\n    nodes: " + tc.nodes + "\n  cases:\n    - name: a\n      file: " + tc.file + "\n      expect: {schedulable: true}\n"
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(path) })
			_, err := RunFile(path, repo(t))
			var e *Error
			if !errors.As(err, &e) || e.Line != tc.line || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("got %v, want line %d and %q", err, tc.line, tc.msg)
			}
		})
	}
}

// tmpDir is a folder under testdata, named relative to it (as a suite there names it), removed
// when the test ends: a suite names only files in its root.
func tmpDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("testdata", "tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Base(dir)
}
