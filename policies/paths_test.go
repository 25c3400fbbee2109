package policies

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/profiles"
)

func TestPaths(t *testing.T) {
	cm := policyConfigMap(DefaultPlatformNamespace, map[string]string{"p.yaml": docHead + `spec:
  template:
    metadata: {labels: {team: a}, annotations: {gone: null}}
    spec:
      tolerations: [{key: k, operator: Exists}]
      containers:
        - name: "@main"
          resources: {limits: {nvidia.com/gpu: "1"}}
  service:
    metadata: {annotations: {networking.gke.io/load-balancer-type: Internal}}
    spec: {type: LoadBalancer}
`})
	ps, probs := ParseConfigMap(cm, DefaultOptions())
	require.Empty(t, probs)
	require.Equal(t, []string{"metadata.annotations.gone", "metadata.labels.team", "spec.containers[@main].resources.limits.nvidia.com/gpu",
		"spec.tolerations"}, ps[0].Paths(profiles.KindPod))
	require.Equal(t, []string{"metadata.annotations.networking.gke.io/load-balancer-type", "spec.type"}, ps[0].Paths(profiles.KindService))
}

// Every field the engine says a policy changed lies in a path the policy's Paths lists, or is a
// sibling of one (a one-of group: hostPath written, emptyDir removed; value and valueFrom), item
// names aside (the policy writes `@main` or `*` where the object has `worker`), for each policy
// of every golden case applied alone to that case's objects: Paths names what a policy writes,
// not less.
func TestPathsCoverChanges(t *testing.T) {
	items := regexp.MustCompile(`\[[^\]]*\]`)
	norm := func(s string) string { return items.ReplaceAllString(s, "[]") }
	dirs, err := filepath.Glob("testdata/apply/*")
	require.NoError(t, err)
	checked := 0
	for _, dir := range dirs {
		cms, err := readConfigMaps(filepath.Join(dir, "policies.yaml"))
		if err != nil {
			continue
		}
		var all []*Policy
		for _, cm := range cms {
			ps, probs := ParseConfigMap(cm, DefaultOptions())
			if len(probs) == 0 {
				all = append(all, ps...)
			}
		}
		in, err := os.ReadFile(filepath.Join(dir, "in.yaml"))
		require.NoError(t, err)
		for _, doc := range strings.Split(string(in), "\n---\n") {
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil || len(js) < 3 {
				continue
			}
			kind := profiles.KindPod
			if strings.Contains(doc, "kind: Service") {
				kind = profiles.KindService
			} else if !strings.Contains(doc, "kind: Pod") {
				continue
			}
			for _, p := range all {
				res, err := NewSet([]*Policy{p}).Apply(Input{Kind: kind, Object: js, Namespace: "default", Explain: true})
				if err != nil {
					continue
				}
				paths := p.Paths(kind)
				for _, c := range res.Changes {
					for _, f := range c.Fields {
						covered := false
						nf := norm(f)
						parent := nf[:max(strings.LastIndexAny(nf, ".["), 0)]
						for _, q := range paths {
							nq := norm(q)
							covered = covered || strings.HasPrefix(nf, nq) || strings.HasPrefix(nq, nf) || strings.HasPrefix(nq, parent+".")
						}
						require.True(t, covered, "%s: %s changed %s, not among %v", dir, p.Ref, f, paths)
						checked++
					}
				}
			}
		}
	}
	require.Greater(t, checked, 50, "fields checked")
}
