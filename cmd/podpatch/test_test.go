package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPolicyTestSuites runs the repository's own suites (manifests/policy-tests): every case
// must pass, and the text output names each case.
func TestPolicyTestSuites(t *testing.T) {
	out := requireOK(t, podpatch(t, "", "test", "../../manifests/policy-tests"))
	assert.Contains(t, out, "PASS examples/dask worker (")
	assert.Contains(t, out, "PASS examples/flink taskmanager (")
	assert.Contains(t, out, "PASS placement/dask gpu worker on the gpu pool (")
	assert.Contains(t, out, "PASS placement/dask gpu worker pinned to eks is stranded (")
	assert.NotContains(t, out, "FAIL")
	assert.Regexp(t, `(?m)^\d+ passed, 0 failed, 0 wrong test files$`, out)
}

// TestPolicyTestMustFail runs the test files that must fail: a wrong expectation exits 1 with
// the difference; each bad file exits 2 with its file and line.
func TestPolicyTestMustFail(t *testing.T) {
	dir := "../../policytest/testdata/fail/"
	r := podpatch(t, "", "test", dir+"wrong-expectation.yaml")
	require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "FAIL wrong-expectation/dask worker cpu ("+dir+"wrong-expectation.yaml:9)")
	assert.Contains(t, r.stdout, `spec.containers[worker].resources.requests.cpu: want "2", got "1"`)
	r = podpatch(t, "", "test", dir+"wrong-schedulability.yaml")
	require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "FAIL wrong-schedulability/dask worker stranded ("+dir+"wrong-schedulability.yaml:13)")
	assert.Contains(t, r.stdout, "schedulable: want false, got true (it fits Nodes default-pool-a, default-pool-b)")
	for _, tc := range []struct{ file, msg string }{
		{"unknown-field.yaml:12", "field aplied not found"},
		{"no-expectation.yaml:9", `case "dask worker": no expectation`},
		{"unknown-policy.yaml:9", "names podpatch-system/gpu/gpu-everywhere, which is no policy of spec.policies"},
		{"schedulable-without-nodes.yaml:13", `case "dask worker": expect.schedulable needs context.nodes`},
	} {
		name, _, _ := strings.Cut(tc.file, ":")
		line := requireOneLineError(t, podpatch(t, "", "test", dir+name), 2)
		assert.Equal(t, "podpatch test: "+dir+tc.file+": ", line[:len("podpatch test: "+dir+tc.file+": ")])
		assert.Contains(t, line, tc.msg)
	}
	// A folder holding both: a wrong file wins (exit 2), and the other cases still run.
	r = podpatch(t, "", "test", dir)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stdout, "FAIL wrong-expectation/dask worker cpu")
	assert.Contains(t, r.stdout, "FAIL wrong-schedulability/dask worker stranded")
	assert.Equal(t, 4, strings.Count(r.stderr, "\n"), r.stderr)
}

// TestPolicyTestOutputs checks --output json and junit, --run, and usage errors.
func TestPolicyTestOutputs(t *testing.T) {
	r := podpatch(t, "", "test", "-o", "json", "../../policytest/testdata/fail/wrong-expectation.yaml")
	require.Equal(t, 1, r.code)
	var rep struct {
		Cases []struct {
			Name     string   `json:"name"`
			Pass     bool     `json:"pass"`
			Failures []string `json:"failures"`
		} `json:"cases"`
		Failed int `json:"failed"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Len(t, rep.Cases, 1)
	assert.False(t, rep.Cases[0].Pass)
	assert.Equal(t, 1, rep.Failed)

	out := requireOK(t, podpatch(t, "", "test", "-o", "junit", "--run", "examples/ray", "../../manifests/policy-tests"))
	var ju struct {
		Suites []struct {
			Tests int `xml:"tests,attr"`
			Cases []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal([]byte(out), &ju))
	require.Len(t, ju.Suites, 1)
	assert.Equal(t, 3, ju.Suites[0].Tests, "the three ray cases")

	assert.Contains(t, requireOneLineError(t, podpatch(t, "", "test"), 2), "at least one PATH")
	assert.Contains(t, requireOneLineError(t, podpatch(t, "", "test", "-o", "xml", "."), 2), `--output "xml"`)
	assert.Contains(t, requireOneLineError(t, podpatch(t, "", "test", t.TempDir()), 2), "no PolicyTest files")
	assert.Contains(t, requireOneLineError(t, podpatch(t, "", "test", "--run", "nomatch", "../../manifests/policy-tests"), 2)+r.stderr, "matches no case")
}

// TestPolicyTestUpdate: --update writes a missing or stale expect.objectFile, says so, and
// the suite then passes; an inline expect.object is never rewritten.
func TestPolicyTestUpdate(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs("../..")
	require.NoError(t, err)
	suite := `apiVersion: podpatch.io/v1alpha1
kind: PolicyTest
metadata: {name: upd}
spec:
  policies: [` + abs + `/manifests/examples]
  cases:
    - name: worker
      file: ` + abs + `/policies/testdata/fixtures/dask-operator/worker-pod.yaml
      expect: {objectFile: want/worker.yaml}
    - name: inline
      file: ` + abs + `/policies/testdata/fixtures/dask-operator/worker-pod.yaml
      expect: {object: {kind: Pod}}
`
	path := writeFile(t, dir, "suite.yaml", suite)
	r := podpatch(t, "", "test", "--update", path)
	require.Equal(t, 1, r.code, "the inline case still fails: stdout\n%s", r.stdout)
	assert.Contains(t, r.stderr, "updated "+filepath.Join(dir, "want/worker.yaml")+" (case upd/worker)")
	assert.Contains(t, r.stdout, "--update does not rewrite an inline expect.object")
	assert.Equal(t, suite, readFile(t, path), "the test file itself is never rewritten")
	want, err := os.ReadFile(filepath.Join(dir, "want/worker.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(want), "cost-center: data-platform")
	r = podpatch(t, "", "test", "--run", "upd/worker", path)
	assert.Equal(t, 0, r.code, r.stdout)
}
