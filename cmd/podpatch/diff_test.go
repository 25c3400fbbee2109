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

// labNodes are Nodes shaped like the lab's pools (test/cluster LabPools) with a second GPU pool,
// gpu-a100, and without any EKS spot capacity, as `kubectl get nodes -o yaml` lists them.
const labNodes = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: default-pool-a, labels: {cloud.google.com/gke-nodepool: default-pool, topology.kubernetes.io/zone: europe-west4-a}}
- apiVersion: v1
  kind: Node
  metadata: {name: gpu-pool-a, labels: {cloud.google.com/gke-nodepool: gpu-pool, cloud.google.com/gke-accelerator: nvidia-l4}}
  spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
- apiVersion: v1
  kind: Node
  metadata: {name: gpu-a100-a, labels: {cloud.google.com/gke-nodepool: gpu-a100, cloud.google.com/gke-accelerator: nvidia-tesla-a100}}
  spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
- apiVersion: v1
  kind: Node
  metadata: {name: spot-pool-a, labels: {cloud.google.com/gke-nodepool: spot-pool, cloud.google.com/gke-spot: "true"}}
  spec: {taints: [{key: cloud.google.com/gke-spot, value: "true", effect: NoSchedule}]}
- apiVersion: v1
  kind: Node
  metadata: {name: eks-on-demand-a, labels: {eks.amazonaws.com/nodegroup: on-demand, eks.amazonaws.com/capacityType: ON_DEMAND}}
  spec: {taints: [{key: eks.amazonaws.com/nodegroup, value: on-demand, effect: NoSchedule}]}
`

// TestDiffPoolMoves: with --nodes, a change that moves the GPU workers from gpu-pool to
// gpu-a100 and the Spark executors from GKE spot to EKS spot capacity the cluster lacks says so
// in the table and the Markdown.
func TestDiffPoolMoves(t *testing.T) {
	nodes := writeFile(t, t.TempDir(), "nodes.yaml", labNodes)
	gpu := diffPolicies(t, "gpu-workers.yaml", "gke-nodepool: gpu-pool", "gke-nodepool: gpu-a100")
	spot := diffPolicies(t, "spark-spot.yaml", `{key: cloud.google.com/gke-spot, operator: In, values: ["true"]}`, `{key: eks.amazonaws.com/capacityType, operator: In, values: [SPOT]}`)
	args := []string{"diff", "--base", examples, "--policies", gpu, "--policies", spot, "--nodes", nodes, "-f", gpuWorkerDep, "-f", sparkExec, "-f", daskWorker}

	table := podpatch(t, "", args...)
	require.Equal(t, 4, table.code, table.stderr)
	for _, want := range []string{
		"Pool moves (the pools the Pods fit, before → after):\n",
		"  1 spark executor(s) of spark-jobs/spark-pi: spot-pool → now unschedulable: no Node of 5 fits: none matches eks.amazonaws.com/capacityType In SPOT\n",
		"  1 dask worker(s) of default/simple: gpu-pool → gpu-a100\n",
		"    @ pools: gpu-pool → gpu-a100\n",
		"    @ pools: spot-pool → now unschedulable\n",
	} {
		require.Contains(t, table.stdout, want)
	}
	md := podpatch(t, "", append(args, "-o", "markdown")...)
	require.Equal(t, 4, md.code, md.stderr)
	for _, want := range []string{
		"**Pool moves** (the pools the Pods fit, before → after):\n\n",
		"- 1 spark executor(s) of `spark-jobs/spark-pi`: `spot-pool` → now unschedulable: no Node of 5 fits: none matches eks.amazonaws.com/capacityType In SPOT\n",
		"- 1 dask worker(s) of `default/simple`: `gpu-pool` → `gpu-a100`\n",
	} {
		require.Contains(t, md.stdout, want)
	}
	js := podpatch(t, "", append(args, "-o", "json")...)
	rep := &preview.Report{}
	require.NoError(t, json.Unmarshal([]byte(js.stdout), rep))
	require.Equal(t, 2, rep.Stats.Moved)
	t.Logf("\n%s\n%s", table.stdout, md.stdout)

	// A file that is not Nodes: exit 1, one line.
	bad := podpatch(t, "", "diff", "--base", examples, "--policies", gpu, "--nodes", daskWorker, "-f", gpuWorkerDep)
	require.Contains(t, requireOneLineError(t, bad, 1), "want a v1 Node")
}
