package policies

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/profiles"
)

// sidecarSet is a platform with an enforced sidecar and init sidecar, a platform "*" in merge
// and one in default mode, and a namespace "*" (with containers allowed to namespaces), for the pre-declared sidecar tests.
func sidecarSet(t *testing.T) *Set {
	t.Helper()
	platform := policyConfigMap(DefaultPlatformNamespace, map[string]string{
		"audit.yaml": docHead + `spec:
  mode: enforce
  match: {managers: [dask]}
  template:
    spec:
      initContainers:
        - {name: init-proxy, image: "registry.example.com/proxy:2", restartPolicy: Always}
      containers:
        - name: audit-agent
          image: registry.example.com/audit-agent:1.4
          env: [{name: AUDIT_SINK, value: "https://audit.example.com"}]
          resources: {limits: {cpu: 100m, memory: 64Mi}}
`,
		"fill.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: fill}\n" + `spec:
  mode: default
  match: {managers: [dask]}
  template:
    spec:
      containers:
        - {name: "*", securityContext: {runAsNonRoot: true}, resources: {requests: {cpu: 100m}}}
`,
		"zone.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: zone}\n" + `spec:
  match: {managers: [dask]}
  template:
    spec:
      containers:
        - {name: "*", env: [{name: CLUSTER_ZONE, value: a}]}
`,
	})
	team := policyConfigMap("team-a", map[string]string{"team.yaml": docHead + `spec:
  template:
    spec:
      containers:
        - {name: "*", env: [{name: TEAM, value: ml}, {name: AUDIT_SINK, value: "https://attacker.example.com"}]}
        - {name: audit-agent, command: [sh]}
`})
	opts := DefaultOptions()
	var err error
	opts.NamespaceAllowed, err = allowlist.ParseFields([]string{"spec.containers"})
	require.NoError(t, err)
	var all []*Policy
	for _, cm := range []*corev1.ConfigMap{platform, team} {
		ps, probs := ParseConfigMap(cm, opts)
		require.Empty(t, probs, "%v", probs)
		all = append(all, ps...)
	}
	return NewSet(all)
}

// randomContainer is a container of the given name with random content of every kind a pod
// creator could hide in a pre-declared sidecar.
func randomContainer(r *rand.Rand, name string) map[string]any {
	c := map[string]any{"name": name, "image": fmt.Sprintf("registry.example.com/x%d:1", r.IntN(5))}
	if r.IntN(2) == 0 {
		c["command"] = []any{"sh", "-c", fmt.Sprintf("steal %d", r.IntN(100))}
	}
	if r.IntN(2) == 0 {
		c["args"] = []any{fmt.Sprintf("--flag=%d", r.IntN(100))}
	}
	if r.IntN(2) == 0 {
		var env []any
		for i := range 1 + r.IntN(4) {
			names := []string{"AUDIT_SINK", "CLUSTER_ZONE", "STEAL", "TEAM", fmt.Sprintf("E%d", i)}
			env = append(env, map[string]any{"name": names[r.IntN(len(names))] + fmt.Sprint(i), "value": "x"})
		}
		c["env"] = env
	}
	if r.IntN(2) == 0 {
		c["volumeMounts"] = []any{map[string]any{"name": "tokens", "mountPath": "/var/run/secrets"}}
	}
	if r.IntN(2) == 0 {
		c["securityContext"] = map[string]any{"privileged": true}
	}
	if r.IntN(2) == 0 {
		c["resources"] = map[string]any{"limits": map[string]any{"cpu": "8"}}
	}
	return c
}

// containersByName decodes a pod's containers of one list.
func containersByName(t *testing.T, pod []byte, list string) (map[string]any, []string) {
	t.Helper()
	var p struct {
		Spec map[string][]map[string]any `json:"spec"`
	}
	require.NoError(t, json.Unmarshal(pod, &p))
	out := map[string]any{}
	var order []string
	for _, c := range p.Spec[list] {
		name, _ := c["name"].(string)
		out[name] = c
		order = append(order, name)
	}
	return out, order
}

// TestPlatformSidecarReplacesPredeclared generates pods that pre-declare the platform's sidecar
// and init sidecar, with random content at random positions among random other containers, and
// checks that the platform's containers come out exactly as on a pod that did not declare them
// (reference §3, "Platform-owned containers"): nothing of the pod creator's survives, and the
// namespace's entries do not reach them; they keep the pod's position; every other container
// is what it is without the pre-declaration; and applying the result again changes nothing.
func TestPlatformSidecarReplacesPredeclared(t *testing.T) {
	s := sidecarSet(t)
	r := rand.New(rand.NewPCG(7, 11))
	apply := func(pod map[string]any) []byte {
		t.Helper()
		b, err := json.Marshal(pod)
		require.NoError(t, err)
		res, err := s.Apply(Input{Kind: profiles.KindPod, Object: b, Namespace: "team-a"})
		require.NoError(t, err)
		require.True(t, res.Changed)
		return res.Object
	}
	for i := range 300 {
		others := []any{map[string]any{"name": "worker", "image": "ghcr.io/dask/dask:latest", "args": []any{"dask-worker"}}}
		for j := range r.IntN(3) {
			others = append(others, randomContainer(r, fmt.Sprintf("user-%d", j)))
		}
		var inits []any
		for j := range r.IntN(2) {
			inits = append(inits, randomContainer(r, fmt.Sprintf("init-%d", j)))
		}
		pod := func(containers, initContainers []any) map[string]any {
			spec := map[string]any{"containers": containers}
			if len(initContainers) > 0 {
				spec["initContainers"] = initContainers
			}
			return map[string]any{"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "w", "namespace": "team-a",
					"labels": map[string]any{"dask.org/component": "worker", "dask.org/cluster-name": "c"}},
				"spec": spec}
		}
		at := r.IntN(len(others) + 1)
		containers := append(append(append([]any{}, others[:at]...), randomContainer(r, "audit-agent")), others[at:]...)
		initAt := r.IntN(len(inits) + 1)
		initContainers := inits
		if r.IntN(2) == 0 {
			initContainers = append(append(append([]any{}, inits[:initAt]...), randomContainer(r, "init-proxy")), inits[initAt:]...)
		}
		got := apply(pod(containers, initContainers))
		want := apply(pod(others, inits))
		for _, list := range []string{"containers", "initContainers"} {
			g, gotOrder := containersByName(t, got, list)
			w, _ := containersByName(t, want, list)
			require.Equal(t, w, g, "case %d %s: the platform's containers must not keep anything of the pod's", i, list)
			if list == "containers" {
				require.Equal(t, "audit-agent", gotOrder[at], "case %d: the sidecar keeps the pod's position", i)
			}
		}
		require.JSONEq(t, string(got), string(apply(mustUnmarshal(t, got))), "case %d: apply twice = apply once", i)
	}
}

func mustUnmarshal(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}
