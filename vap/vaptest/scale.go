package vaptest

import (
	"fmt"
	"strings"
)

// SelectedName is the policy of ScalePolicies that selects every Dask worker.
const SelectedName = "selected"

// scaleManagers and scaleRoles are what the other policies of ScalePolicies select, in turn.
var (
	scaleManagers = []string{"dask", "dask-gateway", "spark", "ray", "flink"}
	scaleRoles    = []string{"worker", "scheduler"}
)

// ScalePolicies are n enforce policy documents of which one, SelectedName, selects a Dask
// worker in any namespace (a label and every container's allowPrivilegeEscalation); each other
// one selects a namespace of its own (team-<i>) and, when spread, a manager and role in turn,
// else Dask workers too (the second line's worst case: every policy in one group). They are
// the second line's benchmark (test/e2e's BenchmarkSecondLineCreate) and its grouping's test.
func ScalePolicies(n int, spread bool) []string {
	docs := []string{`apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: ` + SelectedName + `}
spec:
  mode: enforce
  match: {managers: [dask], roles: [worker]}
  template:
    metadata: {labels: {cost-center: data-platform}}
    spec: {containers: [{name: "*", securityContext: {allowPrivilegeEscalation: false}}]}
`}
	for i := 1; i < n; i++ {
		manager, role := "dask", "worker"
		if spread {
			manager, role = scaleManagers[i%len(scaleManagers)], scaleRoles[(i/len(scaleManagers))%len(scaleRoles)]
		}
		docs = append(docs, fmt.Sprintf(`apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: p%d}
spec:
  mode: enforce
  match: {managers: [%s], roles: [%s], namespaces: [team-%d]}
  template:
    metadata: {labels: {team-policy: p%d}}
    spec: {containers: [{name: "*", securityContext: {runAsNonRoot: true}}]}
`, i, manager, role, i, i))
	}
	return docs
}

// ScaleConfigMaps are ScalePolicies as platform policy ConfigMaps (podpatch-system, named
// prefix-<i>), as many as a ConfigMap's bound of 16 policies needs, as one YAML stream.
func ScaleConfigMaps(prefix string, n int, spread bool) string {
	docs := ScalePolicies(n, spread)
	var b strings.Builder
	for i := 0; i < len(docs); i += 16 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s-%03d, namespace: podpatch-system, labels: {podpatch.io/policy: \"true\"}}\ndata:\n  policies.yaml: |\n", prefix, i/16)
		for _, line := range strings.Split(strings.Join(docs[i:min(i+16, len(docs))], "---\n"), "\n") {
			if line != "" {
				b.WriteString("    " + line + "\n")
			}
		}
	}
	return b.String()
}
