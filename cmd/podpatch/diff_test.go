package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/preview"
)

// diffPolicies writes a changed copy of an example policy file into a new directory.
func diffPolicies(t *testing.T, file, old, new string) string {
	t.Helper()
	dir := t.TempDir()
	text := readFile(t, filepath.Join(examples, file))
	require.Contains(t, text, old)
	writeFile(t, dir, file, strings.ReplaceAll(text, old, new))
	return dir
}

func TestDiffFiles(t *testing.T) {
	objects := []string{"-f", daskWorker, "-f", daskSched, "-f", daskService, "-f", sparkExec}
	// The same policies again: nothing changes.
	same := podpatch(t, "", append([]string{"diff", "--base", examples, "--policies", filepath.Join(examples, "cost-center.yaml")}, objects...)...)
	require.Equal(t, 0, same.code, same.stderr)
	require.Contains(t, same.stdout, "0 of 4 previewed object(s) change")

	// A default changes: every object it shapes is previewed with the new value, exit 3.
	changed := diffPolicies(t, "cost-center.yaml", "cost-center: data-platform", "cost-center: finance")
	r := podpatch(t, "", append([]string{"diff", "--base", examples, "--policies", changed, "-o", "json"}, objects...)...)
	require.Equal(t, 3, r.code, r.stderr)
	rep := &preview.Report{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), rep))
	require.Equal(t, 4, rep.Stats.Changed)
	require.Equal(t, []string{"podpatch-system/cost-center"}, rep.ConfigMaps)
	seen := 0
	for _, g := range rep.Groups {
		for _, o := range g.Objects {
			require.Equal(t, []preview.Field{{Path: "metadata.labels.cost-center", Old: "data-platform", New: "finance"}}, o.Fields, o.Name)
			seen++
		}
	}
	require.Equal(t, 4, seen)
	md := podpatch(t, "", append([]string{"diff", "--base", examples, "--policies", changed, "-o", "markdown"}, objects...)...)
	require.Equal(t, 3, md.code)
	require.True(t, strings.HasPrefix(md.stdout, "### podpatch diff: :warning: 4 object(s) change"), md.stdout)

	// A policy whose limit is below the workers' requests would be left out: exit 4.
	dir := t.TempDir()
	writeFile(t, dir, "tight.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: tight
  namespace: podpatch-system
  labels: {podpatch.io/policy: "true"}
data:
  tight.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: tight}
    spec:
      mode: merge
      match: {roles: [worker]}
      template:
        spec:
          containers:
            - name: "*"
              resources: {limits: {cpu: 100m}}
`)
	broken := podpatch(t, "", "diff", "--base", examples, "--policies", dir, "-f", daskWorker, "-o", "json")
	require.Equal(t, 4, broken.code, broken.stderr)
	rep = &preview.Report{}
	require.NoError(t, json.Unmarshal([]byte(broken.stdout), rep))
	require.Equal(t, 1, rep.Stats.Breaking)
	o := rep.Groups[0].Objects[0]
	require.True(t, o.Breaks)
	require.Len(t, o.LeftOut, 1)
	require.True(t, strings.HasPrefix(o.LeftOut[0], "podpatch-system/tight/tight: "), o.LeftOut[0])

	// Deleting a ConfigMap: the policies stop applying.
	del := podpatch(t, "", "diff", "--base", examples, "--policies", filepath.Join(examples, "cost-center.yaml"), "--delete", "podpatch-system/spark-spot", "-f", sparkExec, "-o", "yaml")
	require.Equal(t, 3, del.code, del.stderr)
	require.Contains(t, del.stdout, "podpatch-system/spark-spot/spot-executors")

	// Objects without a namespace are in --namespace: its namespace policies apply.
	ns := podpatch(t, "", "diff", "--base", examples, "--policies", changed, "-f", noNamespace, "--namespace", "other", "-o", "json")
	require.Equal(t, 3, ns.code, ns.stderr)
	rep = &preview.Report{}
	require.NoError(t, json.Unmarshal([]byte(ns.stdout), rep))
	require.Equal(t, "other", rep.Groups[0].Namespace)
}

func TestDiffUsage(t *testing.T) {
	for _, args := range [][]string{
		{"diff", "--base", examples, "-f", daskWorker},
		{"diff", "--policies", examples, "-A", "-f", daskWorker},
		{"diff", "--policies", examples, "--base", examples, "-f", daskWorker, "-o", "xml"},
		{"diff", "--policies", examples, "--base", examples, "-f", daskWorker, "--delete", "nope"},
		{"diff", "--policies", examples, "--base", examples, "-f", daskWorker, "--delete", "podpatch-system/missing"},
		{"diff", "--policies", "-", "--base", examples, "-f", "-"},
	} {
		r := podpatch(t, "", args...)
		requireOneLineError(t, r, 2)
	}
	// An invalid changed ConfigMap: its lint lines, exit 1.
	dir := t.TempDir()
	writeFile(t, dir, "bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: podpatch-system, labels: {podpatch.io/policy: \"true\"}}\ndata:\n  x.yaml: |\n    apiVersion: podpatch.io/v1alpha1\n    kind: PodTemplatePatch\n    metadata: {name: x}\n    spec: {mode: sideways}\n")
	r := podpatch(t, "", "diff", "--base", examples, "--policies", dir, "-f", daskWorker)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "spec.mode")
}
