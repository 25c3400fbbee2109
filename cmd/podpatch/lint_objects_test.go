package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/validity"
)

// objectLine is `FILE: KIND NS/NAME: left out|check|warning: …`.
var objectLine = regexp.MustCompile(`^(\S+): (\S+) (\S+/\S+): (left out|check|warning): (.+)$`)

// platformPolicy writes one platform policy ConfigMap holding spec (YAML of the policy's spec).
func platformPolicy(t *testing.T, dir, name, spec string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {%s: \"true\"}\ndata:\n  p.yaml: |\n"+
		"    apiVersion: podpatch.io/v1alpha1\n    kind: PodTemplatePatch\n    metadata: {name: %s}\n    spec:\n", name, policies.DefaultPlatformNamespace, policies.PolicyLabel, name)
	for _, l := range strings.Split(strings.TrimSpace(spec), "\n") {
		b.WriteString("      " + l + "\n")
	}
	return writeFile(t, dir, name+".yaml", b.String())
}

// objectLines splits lint's output into the object lines and the summary, checking the form.
func objectLines(t *testing.T, out string) (lines []string, summary string) {
	t.Helper()
	all := strings.Split(strings.TrimSuffix(withoutScopes(out), "\n"), "\n")
	require.GreaterOrEqual(t, len(all), 2, "%s", out)
	summary = all[len(all)-1]
	for _, l := range all[1 : len(all)-1] {
		require.Regexp(t, objectLine, l)
		lines = append(lines, l)
	}
	return lines, summary
}

func TestLintObjects(t *testing.T) {
	classic := fixtures + "/dask-classic/worker-pod.yaml"
	ray := fixtures + "/kuberay/worker-pod.yaml"

	t.Run("warnings exit 0", func(t *testing.T) {
		// The examples raise the classic Dask worker's memory above its --memory-limit, and make
		// the Dask operator's scheduler Service a LoadBalancer: two warnings, nothing else.
		out := requireOK(t, podpatch(t, "", "lint", examples, "--objects", classic+","+daskService+","+daskWorker+","+sparkExec))
		lines, summary := objectLines(t, out)
		require.Len(t, lines, 2, "%s", out)
		m := objectLine.FindStringSubmatch(lines[0])
		assert.Equal(t, []string{classic, "Pod", "default/dask-jovyan-5f3a2b1c-9*", "check"}, m[1:5])
		assert.True(t, strings.HasPrefix(m[5], checks.DaskWorker+" (warning) default/team-overrides/big-workers: "), m[5])
		m = objectLine.FindStringSubmatch(lines[1])
		assert.Equal(t, []string{daskService, "Service", "default/simple-scheduler", "check"}, m[1:5])
		assert.True(t, strings.HasPrefix(m[5], checks.DaskLoadBalancer+" (warning) podpatch-system/platform-defaults/scheduler-internal-lb: spec.type: "), m[5])
		assert.Equal(t, "objects: 2 with policies left out or findings: 0 left out, 0 error and 2 warning finding(s)", summary)
	})

	t.Run("error finding exits 1", func(t *testing.T) {
		dir := t.TempDir()
		pol := platformPolicy(t, dir, "shrink", "match: {managers: [ray], roles: [worker]}\n"+
			"template: {spec: {containers: [{name: \"@main\", resources: {limits: {memory: 512Mi}, requests: {memory: 512Mi}}}]}}")
		r := podpatch(t, "", "lint", pol, "--objects", ray)
		require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		assert.Empty(t, r.stderr)
		lines, _ := objectLines(t, r.stdout)
		require.Len(t, lines, 1, "%s", r.stdout)
		m := objectLine.FindStringSubmatch(lines[0])
		assert.Equal(t, []string{ray, "Pod", "default/raycluster-kuberay-workergroup-worker-*"}, m[1:4])
		assert.True(t, strings.HasPrefix(m[5], checks.RayResources+" (error) podpatch-system/shrink/shrink: spec.containers[ray-worker].resources.limits.memory: "), m[5])
	})

	t.Run("left out exits 1", func(t *testing.T) {
		// A request above the limit the manager set: left out (reference §8).
		dir := t.TempDir()
		pol := platformPolicy(t, dir, "greedy", "match: {managers: [ray], roles: [worker]}\n"+
			"template: {spec: {containers: [{name: \"@main\", resources: {requests: {memory: 64Gi}}}]}}")
		r := podpatch(t, "", "lint", pol, "--objects", ray)
		require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		lines, summary := objectLines(t, r.stdout)
		require.Len(t, lines, 1, "%s", r.stdout)
		m := objectLine.FindStringSubmatch(lines[0])
		assert.Equal(t, "left out", m[4])
		assert.Contains(t, m[5], "podpatch-system/greedy/greedy")
		assert.Contains(t, m[5], validity.RuleRequestAboveLimit)
		assert.Equal(t, "objects: 1 with policies left out or findings: 1 left out, 0 error and 0 warning finding(s)", summary)
	})

	t.Run("no finding without a policy", func(t *testing.T) {
		dir := t.TempDir()
		pol := platformPolicy(t, dir, "label", "template: {metadata: {labels: {team: a}}}")
		out := requireOK(t, podpatch(t, "", "lint", pol, "--objects", ray, "--objects", classic))
		assert.True(t, strings.HasSuffix(out, "objects: 0 with policies left out or findings: 0 left out, 0 error and 0 warning finding(s)\n"), out)
	})

	t.Run("stdin once", func(t *testing.T) {
		r := podpatch(t, readFile(t, ray), "lint", "-", "--objects", "-")
		require.Equal(t, 2, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	})

	t.Run("objects from stdin", func(t *testing.T) {
		out := requireOK(t, podpatch(t, readFile(t, classic), "lint", examples, "--objects", "-"))
		lines, _ := objectLines(t, out)
		require.Len(t, lines, 1)
		assert.True(t, strings.HasPrefix(lines[0], "-: Pod default/dask-jovyan-5f3a2b1c-9*: check: "+checks.DaskWorker), lines[0])
	})
}
