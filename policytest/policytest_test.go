package policytest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const head = "apiVersion: podpatch.io/v1alpha1\nkind: PolicyTest\nmetadata: {name: s}\nspec:\n  policies: [../../manifests/examples]\n"

const worker = "../../policies/testdata/fixtures/dask-operator/worker-pod.yaml"

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
		{"after leading document marker", "---\n" + head + "  cases:\n    - name: a\n      file: x\n", 8, "no expectation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.yaml")
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
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

// TestRunFileErrors: expectations that name what does not exist are *Errors with the case's line.
func TestRunFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, msg string }{
		{"unknown applied", "      expect: {applied: [a/b/c]}\n", "expect.applied names a/b/c"},
		{"unknown leftOut", "      expect: {leftOut: [{policy: a/b/c}]}\n", "expect.leftOut names a/b/c"},
		{"missing object file", "      expect: {objectFile: want/none.yaml}\n", "run podpatch test --update"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", "tmp-"+strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			body := head + "  cases:\n    - name: a\n      file: " + worker + "\n" + tc.body
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(path) })
			_, err := RunFile(path, Options{})
			var e *Error
			if !errors.As(err, &e) || e.Line != 7 || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("got %v, want line 7 and %q", err, tc.msg)
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
