package policies

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// Reference §5, "Enforce on updates": what it means for a stored object to hold an enforce
// policy (holds.go), and the updates it decides.

// wholeElements is a platform policy that brings whole elements the API server defaults into:
// a sidecar with ports, a probe, a lifecycle hook, a downward-API env var and limits without
// requests, and volumes whose sources it defaults (a projected service-account token, a
// ConfigMap, a downward-API volume).
const wholeElements = `template:
  metadata: {labels: {platform.example.com/audited: "true"}}
  spec:
    containers:
    - name: audit-agent
      image: registry.example.com/audit:1.4
      ports: [{containerPort: 9100, name: audit-metrics}]
      readinessProbe: {httpGet: {port: 9100}}
      livenessProbe: {grpc: {port: 9101}}
      lifecycle: {preStop: {httpGet: {port: 9100, path: /drain}}}
      env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
      resources: {limits: {cpu: 100m, memory: 64Mi}}
      volumeMounts: [{name: audit-token, mountPath: /var/run/audit}]
    volumes:
    - name: audit-token
      projected: {sources: [{serviceAccountToken: {path: token, audience: audit}}]}
    - name: audit-config
      configMap: {name: audit}
    - name: audit-labels
      downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}`

// storeLikeAPIServer writes into a Pod what the API server defaults in the shapes
// wholeElements brings (pkg/apis/core/v1/defaults.go), as the stored object has it;
// test/e2e's TestDefaultsTable checks the real API server writes these and no more.
func storeLikeAPIServer(t *testing.T, pod []byte) []byte {
	return edit(t, pod, func(o map[string]any) {
		spec := at(o, "spec")
		setIf := func(m map[string]any, k string, v any) {
			if _, ok := m[k]; !ok {
				m[k] = v
			}
		}
		for _, list := range containerListNames {
			cs, _ := spec[list].([]any)
			for _, c := range cs {
				cm := c.(map[string]any)
				setIf(cm, "terminationMessagePath", "/dev/termination-log")
				setIf(cm, "terminationMessagePolicy", "File")
				setIf(cm, "imagePullPolicy", pullPolicyOf(cm["image"].(string)))
				setIf(cm, "resources", map[string]any{})
				res := cm["resources"].(map[string]any)
				if lim, ok := res["limits"].(map[string]any); ok {
					setIf(res, "requests", map[string]any{})
					for k, v := range lim {
						setIf(res["requests"].(map[string]any), k, v)
					}
				}
				ports, _ := cm["ports"].([]any)
				for _, p := range ports {
					setIf(p.(map[string]any), "protocol", "TCP")
				}
				env, _ := cm["env"].([]any)
				for _, e := range env {
					if fr, ok := at(e.(map[string]any), "valueFrom")["fieldRef"].(map[string]any); ok {
						setIf(fr, "apiVersion", "v1")
					}
				}
				for _, probe := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
					pr, ok := cm[probe].(map[string]any)
					if !ok {
						continue
					}
					setIf(pr, "timeoutSeconds", 1)
					setIf(pr, "periodSeconds", 10)
					setIf(pr, "successThreshold", 1)
					setIf(pr, "failureThreshold", 3)
					if hg, ok := pr["httpGet"].(map[string]any); ok {
						setIf(hg, "path", "/")
						setIf(hg, "scheme", "HTTP")
					}
					if g, ok := pr["grpc"].(map[string]any); ok {
						setIf(g, "service", "")
					}
				}
				if lc, ok := cm["lifecycle"].(map[string]any); ok {
					for _, h := range lc {
						if hg, ok := h.(map[string]any)["httpGet"].(map[string]any); ok {
							setIf(hg, "path", "/")
							setIf(hg, "scheme", "HTTP")
						}
					}
				}
			}
		}
		vols, _ := spec["volumes"].([]any)
		for _, v := range vols {
			vm := v.(map[string]any)
			for _, src := range []string{"projected", "configMap", "secret", "downwardAPI"} {
				if s, ok := vm[src].(map[string]any); ok {
					setIf(s, "defaultMode", 420)
				}
			}
			if p, ok := vm["projected"].(map[string]any); ok {
				for _, s := range p["sources"].([]any) {
					if tok, ok := s.(map[string]any)["serviceAccountToken"].(map[string]any); ok {
						setIf(tok, "expirationSeconds", 3600)
					}
				}
			}
			if d, ok := vm["downwardAPI"].(map[string]any); ok {
				for _, it := range d["items"].([]any) {
					if fr, ok := it.(map[string]any)["fieldRef"].(map[string]any); ok {
						setIf(fr, "apiVersion", "v1")
					}
				}
			}
		}
	})
}

func sidecarOf(t *testing.T, pod []byte, name string) map[string]any {
	var o map[string]any
	require.NoError(t, json.Unmarshal(pod, &o))
	for _, c := range containersOf(o, "containers") {
		if c["name"] == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

// TestHoldsWholeElementsAsStored: a Pod admitted with a policy that brings whole elements holds
// it as the API server stores it, defaults and all: `kubectl set image` on the platform's
// sidecar and a merge patch removing the policy's label are put back, from the first update on;
// the warning names nothing. A field the creator wrote into the platform's sidecar is no
// default: such a Pod does not hold the policy, and the warning says where.
func TestHoldsWholeElementsAsStored(t *testing.T) {
	p := enforcePolicy(t, "audit-sidecar", ModeEnforce, wholeElements)
	s := NewSet([]*Policy{p})
	for _, fixture := range []string{"dask-operator/worker-pod.yaml", "kuberay/head-pod.yaml", "spark/executor-pod.yaml", "flink/taskmanager-pod.yaml"} {
		t.Run(fixture, func(t *testing.T) {
			created, err := s.Apply(Input{Kind: profiles.KindPod, Object: fixtureJSON(t, fixture, nil), Namespace: "team-a"})
			require.NoError(t, err)
			stored := storeLikeAPIServer(t, created.Object)
			h, err := s.Holding(Input{Kind: profiles.KindPod, Object: stored, Namespace: "team-a"})
			require.NoError(t, err)
			require.Empty(t, h.NotHeld, "the stored object holds the policy it was admitted with")
			require.True(t, h.Holds(p))

			for name, change := range map[string]func(o map[string]any){
				"set image": func(o map[string]any) {
					for _, c := range containersOf(o, "containers") {
						if c["name"] == "audit-agent" {
							c["image"] = "attacker.example.com/audit:1"
						}
					}
				},
				"label removed": func(o map[string]any) {
					delete(at(o, "metadata", "labels"), "platform.example.com/audited")
				},
			} {
				updated := edit(t, stored, change)
				res, err := s.PatchUpdate(Input{Kind: profiles.KindPod, Object: updated, Namespace: "team-a"}, stored, false)
				require.NoError(t, err)
				require.False(t, res.Denied, name)
				require.Empty(t, res.NotHeld, "%s: %v", name, res.NotHeldAt)
				again := storeLikeAPIServer(t, applyPatch(t, updated, res.Patch))
				require.Equal(t, "registry.example.com/audit:1.4", sidecarOf(t, again, "audit-agent")["image"], name)
				require.Contains(t, string(again), `"platform.example.com/audited":"true"`, name)
				require.JSONEq(t, string(stored), string(again), "%s: the update is undone, and the stored object is as before", name)
			}

			// The creator's own command in the platform's sidecar: not a default.
			own := edit(t, stored, func(o map[string]any) {
				for _, c := range containersOf(o, "containers") {
					if c["name"] == "audit-agent" {
						c["command"] = []any{"sh", "-c", "exfiltrate"}
					}
				}
			})
			h, err = s.Holding(Input{Kind: profiles.KindPod, Object: own, Namespace: "team-a"})
			require.NoError(t, err)
			require.Len(t, h.NotHeld, 1)
			require.Equal(t, "spec.containers[audit-agent].command", h.NotHeld[0].Field)
			require.False(t, h.Holds(p))
			// A default's field with another value than the API server's is not a default either.
			other := edit(t, stored, func(o map[string]any) {
				for _, v := range at(o, "spec")["volumes"].([]any) {
					if v.(map[string]any)["name"] == "audit-token" {
						src := at(v.(map[string]any), "projected")["sources"].([]any)[0].(map[string]any)
						at(src, "serviceAccountToken")["expirationSeconds"] = 315360000
					}
				}
			})
			h, err = s.Holding(Input{Kind: profiles.KindPod, Object: other, Namespace: "team-a"})
			require.NoError(t, err)
			require.Len(t, h.NotHeld, 1)
			require.Equal(t, "spec.volumes[audit-token].projected.sources[0].serviceAccountToken.expirationSeconds", h.NotHeld[0].Field)
		})
	}
}

// TestHoldsLastDefinition: of an env name defined twice, the kubelet uses the last; only the
// last counts for holding, and admission sets every definition.
func TestHoldsLastDefinition(t *testing.T) {
	p := enforcePolicy(t, "encryption", ModeEnforce, "template: {spec: {containers: [{name: '*', env: [{name: REQUIRE_ENCRYPTION, value: 'True'}]}]}}")
	s := NewSet([]*Policy{p})
	withEnv := func(values ...string) []byte {
		return fixtureJSON(t, "dask-operator/worker-pod.yaml", func(o map[string]any) {
			c := containersOf(o, "containers")[0]
			env, _ := c["env"].([]any)
			for _, v := range values {
				env = append(env, map[string]any{"name": "REQUIRE_ENCRYPTION", "value": v})
			}
			c["env"] = env
		})
	}
	for _, c := range []struct {
		values []string
		holds  bool
	}{
		{[]string{"True"}, true},
		{[]string{"False", "True"}, true},
		{[]string{"True", "False"}, false},
		{[]string{"True", "False", "True", "False"}, false},
	} {
		h, err := s.Holding(Input{Kind: profiles.KindPod, Object: withEnv(c.values...), Namespace: "team-a"})
		require.NoError(t, err)
		require.Equal(t, c.holds, h.Holds(p), "%v: %v", c.values, h.NotHeld)
		if !c.holds {
			require.Equal(t, "spec.containers[worker].env[REQUIRE_ENCRYPTION].value", h.NotHeld[0].Field)
		}
		// Admitted, every definition is the policy's, and that is a fixed point.
		res, err := s.Apply(Input{Kind: profiles.KindPod, Object: withEnv(c.values...), Namespace: "team-a"})
		require.NoError(t, err)
		var o map[string]any
		require.NoError(t, json.Unmarshal(res.Object, &o))
		n := 0
		for _, e := range containersOf(o, "containers")[0]["env"].([]any) {
			if e.(map[string]any)["name"] == "REQUIRE_ENCRYPTION" {
				require.Equal(t, "True", e.(map[string]any)["value"])
				n++
			}
		}
		require.Len(t, c.values, n, "no definition is removed")
		again, err := s.Apply(Input{Kind: profiles.KindPod, Object: res.Object, Namespace: "team-a"})
		require.NoError(t, err)
		require.JSONEq(t, string(res.Object), string(again.Object))
	}
}

// TestHoldsContainerOverride: a Pod-level security field the policy sets, which a container's
// own securityContext overrides with another value — in any container list, ephemeral
// containers included — does not have the policy's effect there: not held, and said where.
func TestHoldsContainerOverride(t *testing.T) {
	p := enforcePolicy(t, "non-root", ModeEnforce, "template: {spec: {securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}}}")
	s := NewSet([]*Policy{p})
	admitted, err := s.Apply(Input{Kind: profiles.KindPod, Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", nil), Namespace: "team-a"})
	require.NoError(t, err)
	h, err := s.Holding(Input{Kind: profiles.KindPod, Object: admitted.Object, Namespace: "team-a"})
	require.NoError(t, err)
	require.True(t, h.Holds(p))
	for _, c := range []struct {
		list, field string
		value       any
		holds       bool
	}{
		{"containers", "runAsNonRoot", false, false},
		{"containers", "runAsNonRoot", true, true},
		{"initContainers", "seccompProfile", map[string]any{"type": "Unconfined"}, false},
		{"initContainers", "seccompProfile", map[string]any{"type": "RuntimeDefault"}, true},
		{"ephemeralContainers", "seccompProfile", map[string]any{"type": "Unconfined"}, false},
	} {
		obj := edit(t, admitted.Object, func(o map[string]any) {
			spec := at(o, "spec")
			list, _ := spec[c.list].([]any)
			spec[c.list] = append(list, map[string]any{"name": "own", "image": "busybox:1", "securityContext": map[string]any{c.field: c.value}})
		})
		h, err := s.Holding(Input{Kind: profiles.KindPod, Object: obj, Namespace: "team-a"})
		require.NoError(t, err)
		require.Equal(t, c.holds, h.Holds(p), "%+v", c)
		if !c.holds {
			require.Equal(t, "spec."+c.list+"[own].securityContext."+c.field, h.NotHeld[0].Field)
			require.True(t, h.NotHeld[0].Overridden)
		}
	}
}

// podFixtures are the manager's Pods and Services as each generates them, by kind.
func podFixtures(t *testing.T) map[profiles.Kind][]string {
	out := map[profiles.Kind][]string{}
	files, err := filepath.Glob(filepath.Join("testdata", "fixtures", "*", "*.yaml"))
	require.NoError(t, err)
	for _, f := range files {
		rel, _ := filepath.Rel(filepath.Join("testdata", "fixtures"), f)
		var head struct{ Kind string }
		require.NoError(t, json.Unmarshal(fixtureJSON(t, rel, nil), &head))
		switch head.Kind {
		case "Pod":
			out[profiles.KindPod] = append(out[profiles.KindPod], rel)
		case "Service":
			out[profiles.KindService] = append(out[profiles.KindService], rel)
		}
	}
	for _, l := range out {
		sort.Strings(l)
	}
	return out
}

// TestUpdateCannotChangeIdentity: for every pair of a manager's objects of one kind, an update
// that gives an admitted object the other's recognition (its labels, and a Service's selector)
// is denied while the object holds an enforce policy that selects both — whatever it does
// besides (a resize past the enforced cap of "@main"). Removing any label podpatch recognises
// the object by is denied too; an update that changes other labels is not.
func TestUpdateCannotChangeIdentity(t *testing.T) {
	s := NewSet([]*Policy{
		enforcePolicy(t, "cap", ModeEnforce, "template: {metadata: {labels: {cost-center: data}}, spec: {containers: [{name: '@main', resources: {limits: {memory: 4Gi}}}]}}\nservice: {metadata: {labels: {cost-center: data}}}"),
	})
	recognitionOf := func(t *testing.T, rel string) (map[string]any, map[string]any) {
		var o map[string]any
		require.NoError(t, json.Unmarshal(fixtureJSON(t, rel, nil), &o))
		sel, _ := at(o, "spec")["selector"].(map[string]any)
		return at(o, "metadata", "labels"), sel
	}
	for kind, files := range podFixtures(t) {
		for _, from := range files {
			admitted, err := s.Apply(Input{Kind: kind, Object: fixtureJSON(t, from, nil), Namespace: "team-a"})
			require.NoError(t, err)
			require.True(t, admitted.Recognised, from)
			for _, to := range files {
				if to == from {
					continue
				}
				labels, selector := recognitionOf(t, to)
				t.Run(from+" as "+to, func(t *testing.T) {
					updated := edit(t, admitted.Object, func(o map[string]any) {
						l := map[string]any{"cost-center": "data"}
						maps.Copy(l, labels)
						at(o, "metadata")["labels"] = l
						if kind == profiles.KindService {
							at(o, "spec")["selector"] = selector
						}
						for _, c := range containersOf(o, "containers") {
							at(c, "resources", "limits")["memory"] = "64Gi"
						}
					})
					was, now := readIdentity(kind, admitted.Object), readIdentity(kind, updated)
					res, err := s.PatchUpdate(Input{Kind: kind, Object: updated, Namespace: "team-a"}, admitted.Object, false)
					require.NoError(t, err)
					if was.id == now.id && was.main == now.main && slices.Equal(slices.Sorted(maps.Keys(was.labels)), slices.Sorted(maps.Keys(now.labels))) {
						t.Skip("the same recognition") // two fixtures of one manager and role
					}
					require.True(t, res.Denied, "%v → %v", was.id, now.id)
					rule := res.Skipped[0].Violation.Rule
					require.Contains(t, []string{validity.ReasonIdentityChanged, validity.ReasonRecognitionLabel}, rule)
					require.Contains(t, res.Denial(), "("+rule+")")
				})
			}
			t.Run(from+" recognition labels removed one by one", func(t *testing.T) {
				for _, k := range recognitionLabels[admitted.Identity.Manager] {
					var o map[string]any
					require.NoError(t, json.Unmarshal(admitted.Object, &o))
					if _, ok := at(o, "metadata", "labels")[k]; !ok {
						continue
					}
					updated := edit(t, admitted.Object, func(o map[string]any) { delete(at(o, "metadata", "labels"), k) })
					res, err := s.PatchUpdate(Input{Kind: kind, Object: updated, Namespace: "team-a"}, admitted.Object, false)
					require.NoError(t, err)
					require.True(t, res.Denied, k)
				}
				updated := edit(t, admitted.Object, func(o map[string]any) {
					at(o, "metadata", "labels")["team"] = "x"
					for m, keys := range recognitionLabels {
						if m == admitted.Identity.Manager {
							continue
						}
						for _, k := range keys {
							if !slices.Contains(recognitionLabels[admitted.Identity.Manager], k) {
								delete(at(o, "metadata", "labels"), k) // another manager's: not reserved here
							}
						}
					}
				})
				res, err := s.PatchUpdate(Input{Kind: kind, Object: updated, Namespace: "team-a"}, admitted.Object, false)
				require.NoError(t, err)
				require.False(t, res.Denied, "another label is the update's to change: %v", res.Skipped)
			})
		}
	}
}

// TestHoldsEphemeralContainers: an ephemeral container holds an enforce policy only with what
// the policy brings ephemeral containers ("*"'s EphemeralFields); one added while podpatch was
// not asked is named, and an ordinary update of the Pod still gets the policy put back.
func TestHoldsEphemeralContainers(t *testing.T) {
	p := enforcePolicy(t, "baseline", ModeEnforce, "template: {metadata: {labels: {cost-center: data}}, spec: {containers: [{name: '*', securityContext: {allowPrivilegeEscalation: false}}]}}")
	s := NewSet([]*Policy{p})
	admitted, err := s.Apply(Input{Kind: profiles.KindPod, Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", nil), Namespace: "team-a"})
	require.NoError(t, err)
	debug := func(sc map[string]any) []byte {
		return edit(t, admitted.Object, func(o map[string]any) {
			c := map[string]any{"name": "debug", "image": "busybox:1"}
			if sc != nil {
				c["securityContext"] = sc
			}
			at(o, "spec")["ephemeralContainers"] = []any{c}
		})
	}
	h, err := s.Holding(Input{Kind: profiles.KindPod, Object: debug(map[string]any{"allowPrivilegeEscalation": false}), Namespace: "team-a"})
	require.NoError(t, err)
	require.True(t, h.Holds(p), "%v", h.NotHeld)
	for _, sc := range []map[string]any{nil, {"allowPrivilegeEscalation": true}, {"privileged": true}} {
		h, err = s.Holding(Input{Kind: profiles.KindPod, Object: debug(sc), Namespace: "team-a"})
		require.NoError(t, err)
		require.False(t, h.Holds(p), "%v", sc)
		require.Contains(t, h.NotHeld[0].Field, "spec.ephemeralContainers")
		require.True(t, h.NotHeld[0].Ephemeral)
	}
	stored := debug(map[string]any{"allowPrivilegeEscalation": true})

	updated := edit(t, stored, func(o map[string]any) { delete(at(o, "metadata", "labels"), "cost-center") })
	res, err := s.PatchUpdate(Input{Kind: profiles.KindPod, Object: updated, Namespace: "team-a"}, stored, false)
	require.NoError(t, err)
	require.False(t, res.Denied)
	require.Equal(t, []string{p.Ref}, res.NotHeld)
	require.Contains(t, string(applyPatch(t, updated, res.Patch)), `"cost-center":"data"`, "the policy is still put back")
}

// TestEphemeralContainerCannotOverride: a container `kubectl debug` adds whose own
// securityContext overrides a Pod-level field an enforce policy sets is denied; one that leaves
// it to the Pod, or gives the Pod's value, is not.
func TestEphemeralContainerCannotOverride(t *testing.T) {
	p := enforcePolicy(t, "non-root", ModeEnforce, "template: {spec: {securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}}}")
	s := NewSet([]*Policy{p})
	admitted, err := s.Apply(Input{Kind: profiles.KindPod, Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", nil), Namespace: "team-a"})
	require.NoError(t, err)
	for _, c := range []struct {
		sc     map[string]any
		denied bool
	}{
		{nil, false},
		{map[string]any{"runAsNonRoot": true}, false},
		{map[string]any{"runAsNonRoot": false}, true},
		{map[string]any{"seccompProfile": map[string]any{"type": "Unconfined"}}, true},
	} {
		added := edit(t, admitted.Object, func(o map[string]any) {
			ct := map[string]any{"name": "debug", "image": "busybox:1"}
			if c.sc != nil {
				ct["securityContext"] = c.sc
			}
			at(o, "spec")["ephemeralContainers"] = []any{ct}
		})
		res, err := s.PatchUpdate(Input{Kind: profiles.KindPod, Object: added, Namespace: "team-a"}, admitted.Object, true)
		require.NoError(t, err)
		require.Equal(t, c.denied, res.Denied, "%v", c.sc)
		if c.denied {
			require.Equal(t, validity.ReasonOverridesEnforced, res.Skipped[0].Violation.Rule)
			require.Contains(t, res.Denial(), "spec.ephemeralContainers[debug].securityContext.")
		}
	}
}

// TestHoldsQuantitiesAsStored: the API server stores quantities canonicalised (a policy's
// 16000m is stored as 16, 65536Mi as 64Gi): such a stored value holds the policy's.
func TestHoldsQuantitiesAsStored(t *testing.T) {
	p := enforcePolicy(t, "sizes", ModeEnforce, "template: {spec: {containers: [{name: '*', resources: {limits: {cpu: 16000m, memory: 65536Mi}}}], volumes: [{name: scratch, emptyDir: {sizeLimit: 1024Mi}}]}}")
	s := NewSet([]*Policy{p})
	admitted, err := s.Apply(Input{Kind: profiles.KindPod, Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", nil), Namespace: "team-a"})
	require.NoError(t, err)
	require.False(t, admitted.Denied, "%v", admitted.Skipped)
	stored := edit(t, admitted.Object, func(o map[string]any) {
		for _, c := range containersOf(o, "containers") {
			limits := at(c, "resources", "limits")
			limits["cpu"], limits["memory"] = "16", "64Gi"
		}
		for _, v := range at(o, "spec")["volumes"].([]any) {
			if v.(map[string]any)["name"] == "scratch" {
				at(v.(map[string]any), "emptyDir")["sizeLimit"] = "1Gi"
			}
		}
	})
	require.NotEqual(t, string(admitted.Object), string(stored))
	h, err := s.Holding(Input{Kind: profiles.KindPod, Object: stored, Namespace: "team-a"})
	require.NoError(t, err)
	require.True(t, h.Holds(p), "%v", h.NotHeld)
	other := edit(t, stored, func(o map[string]any) { at(containersOf(o, "containers")[0], "resources", "limits")["memory"] = "32Gi" })
	h, err = s.Holding(Input{Kind: profiles.KindPod, Object: other, Namespace: "team-a"})
	require.NoError(t, err)
	require.False(t, h.Holds(p))
}

// TestUpdateCannotChangeRole: generated from the profiles, for every ordered pair of a
// manager's role labels (every profile and every role value it reads, role aliases included),
// a Pod recognised by the first and relabelled to the second while it holds an enforce policy
// selecting every manager is denied; relabelled to the same, it is not. The containers are
// those a Dask worker runs, so that "@main" names another container for most pairs.
func TestUpdateCannotChangeRole(t *testing.T) {
	s := NewSet([]*Policy{enforcePolicy(t, "cap", ModeEnforce, "template: {metadata: {labels: {cost-center: data}}, spec: {containers: [{name: '@main', resources: {limits: {memory: 4Gi}}}]}}")})
	type labelled struct {
		name   string
		labels map[string]any
	}
	var all []labelled
	for _, pr := range profiles.All() {
		for _, value := range slices.Sorted(maps.Keys(pr.Roles)) {
			l := map[string]any{pr.RoleKey: value}
			if pr.RequireKey != "" {
				v := pr.RequireValue
				if v == "" {
					v = "x"
				}
				l[pr.RequireKey] = v
			}
			if len(pr.ClusterKeys) > 0 {
				l[pr.ClusterKeys[0]] = "c"
			}
			all = append(all, labelled{string(pr.Manager) + "/" + value, l})
		}
	}
	pod := func(l map[string]any) []byte {
		return fixtureJSON(t, "dask-operator/worker-pod.yaml", func(o map[string]any) {
			at(o, "metadata")["labels"] = maps.Clone(l)
			cs := at(o, "spec")["containers"].([]any)
			at(o, "spec")["containers"] = append([]any{map[string]any{"name": "helper", "image": "busybox:1"}}, cs...)
		})
	}
	for _, from := range all {
		admitted, err := s.Apply(Input{Kind: profiles.KindPod, Object: pod(from.labels), Namespace: "team-a"})
		require.NoError(t, err)
		require.True(t, admitted.Recognised, from.name)
		require.False(t, admitted.Denied, from.name)
		for _, to := range all {
			t.Run(from.name+" as "+to.name, func(t *testing.T) {
				updated := edit(t, admitted.Object, func(o map[string]any) {
					l := maps.Clone(to.labels)
					l["cost-center"] = "data"
					at(o, "metadata")["labels"] = l
				})
				res, err := s.PatchUpdate(Input{Kind: profiles.KindPod, Object: updated, Namespace: "team-a"}, admitted.Object, false)
				require.NoError(t, err)
				require.Equal(t, from.name != to.name, res.Denied, "%v", res.Skipped)
				if res.Denied {
					require.Contains(t, []string{validity.ReasonIdentityChanged, validity.ReasonRecognitionLabel}, res.Skipped[0].Violation.Rule)
				}
			})
		}
	}
}

// TestOtherManagersLabelsNotReserved: the labels reserved on an object holding enforce are its
// own manager's: a Dask worker's app label (a Flink cluster's key) is the update's to change.
func TestOtherManagersLabelsNotReserved(t *testing.T) {
	s := NewSet([]*Policy{enforcePolicy(t, "cost", ModeEnforce, "template: {metadata: {labels: {cost-center: data}}}")})
	admitted, err := s.Apply(Input{Kind: profiles.KindPod, Namespace: "team-a",
		Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", func(o map[string]any) { at(o, "metadata", "labels")["app"] = "web" })})
	require.NoError(t, err)
	for _, change := range []func(l map[string]any){
		func(l map[string]any) { l["app"] = "other" },
		func(l map[string]any) { delete(l, "app") },
	} {
		updated := edit(t, admitted.Object, func(o map[string]any) { change(at(o, "metadata", "labels")) })
		res, err := s.PatchUpdate(Input{Kind: profiles.KindPod, Object: updated, Namespace: "team-a"}, admitted.Object, false)
		require.NoError(t, err)
		require.False(t, res.Denied, "%v", res.Skipped)
	}
	updated := edit(t, admitted.Object, func(o map[string]any) { at(o, "metadata", "labels")["dask.org/workergroup-name"] = "other" })
	res, err := s.PatchUpdate(Input{Kind: profiles.KindPod, Object: updated, Namespace: "team-a"}, admitted.Object, false)
	require.NoError(t, err)
	require.True(t, res.Denied, "its own group label is reserved")
}
