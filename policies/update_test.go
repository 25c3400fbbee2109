package policies

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// Reference §5, "Enforce on updates": an update cannot undo what a platform enforce policy
// set; default and merge policies shape an object at its creation only.

// applyPatch applies a JSONPatch (none: the object as it is).
func applyPatch(t *testing.T, obj, patch []byte) []byte {
	t.Helper()
	if !hasOps(patch) {
		return obj
	}
	ops, err := jsonpatch.DecodePatch(patch)
	require.NoError(t, err)
	out, err := ops.Apply(obj)
	require.NoError(t, err)
	return out
}

// edit decodes an object, changes it and encodes it again.
func edit(t *testing.T, obj []byte, change func(o map[string]any)) []byte {
	t.Helper()
	var o map[string]any
	require.NoError(t, json.Unmarshal(obj, &o))
	change(o)
	out, err := json.Marshal(o)
	require.NoError(t, err)
	return out
}

func at(o map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, ok := o[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			o[p] = next
		}
		o = next
	}
	return o
}

// updateCase is an update that undoes what an enforce policy set, as a user or a controller
// may write it (each is valid for the API server on an update).
type updateCase struct {
	name    string
	kind    profiles.Kind
	fixture string
	change  func(o map[string]any)
}

var updateCases = []updateCase{
	{"a Service patched to LoadBalancer", profiles.KindService, "dask-operator/scheduler-service.yaml", func(o map[string]any) {
		at(o, "spec")["type"] = "LoadBalancer"
	}},
	{"a Service's enforced annotation removed", profiles.KindService, "dask-operator/scheduler-service.yaml", func(o map[string]any) {
		delete(at(o, "metadata", "annotations"), "networking.gke.io/load-balancer-type")
	}},
	{"a Service's enforced label changed", profiles.KindService, "kuberay/head-service.yaml", func(o map[string]any) {
		at(o, "metadata", "labels")["cost-center"] = "someone-else"
	}},
	{"a Pod's enforced label removed", profiles.KindPod, "dask-operator/worker-pod.yaml", func(o map[string]any) {
		delete(at(o, "metadata", "labels"), "cost-center")
	}},
	{"a Pod's enforced annotation changed", profiles.KindPod, "spark/executor-pod.yaml", func(o map[string]any) {
		at(o, "metadata", "annotations")["platform.example.com/owner"] = "me"
	}},
	{"a Pod's image changed", profiles.KindPod, "kuberay/worker-pod.yaml", func(o map[string]any) {
		for _, c := range containersOf(o, "containers") {
			c["image"] = "attacker.example.com/miner:1"
		}
	}},
}

// updatePolicies are the platform's policies the update cases meet: enforce ones each case
// undoes, and a merge policy whose value an update may change freely.
func updatePolicies(t *testing.T) *Set { return NewSet(updatePolicyList(t)) }

func updatePolicyList(t *testing.T) []*Policy {
	return []*Policy{
		enforcePolicy(t, "cost-label", ModeEnforce, "template: {metadata: {labels: {cost-center: data-platform}, annotations: {platform.example.com/owner: data}}}\nservice: {metadata: {labels: {cost-center: data-platform}}}"),
		enforcePolicy(t, "internal-lb", ModeEnforce, "match: {roles: [scheduler]}\nservice: {metadata: {annotations: {networking.gke.io/load-balancer-type: Internal}}, spec: {type: ClusterIP}}"),
		enforcePolicy(t, "mirror", ModeEnforce, "match: {managers: [ray]}\ntemplate: {spec: {containers: [{name: '@main', image: mirror.example.com/ray:2.9}]}}"),
		enforcePolicy(t, "team-merge", ModeMerge, "template: {metadata: {labels: {team: data}}}\nservice: {metadata: {labels: {team: data}}}"),
	}
}

// TestUpdateKeepsEnforce: for every update that undoes an enforce policy's field, the patch
// puts it back — and nothing else: applied again, the enforce policies change nothing, the
// merge policy's label the update changed stays changed, and the provenance is as admission
// wrote it.
//
// With an enforce policy added after the object was admitted, which it therefore did not hold,
// the same holds of the others: each policy that held is put back, the new one is named as not
// held and not applied.
func TestUpdateKeepsEnforce(t *testing.T) {
	list := updatePolicyList(t)
	admittedWith := NewSet(list)
	later := enforcePolicy(t, "added-later", ModeEnforce, "template: {metadata: {annotations: {platform.example.com/later: 'yes'}}}\nservice: {metadata: {annotations: {platform.example.com/later: 'yes'}}}")
	for _, c := range updateCases {
		for _, withLater := range []bool{false, true} {
			name := c.name
			s := admittedWith
			if withLater {
				name += ", an enforce policy added since"
				s = NewSet(append(slices.Clone(list), later))
			}
			t.Run(name, func(t *testing.T) { keepsEnforce(t, c, admittedWith, s, withLater, later) })
		}
	}
}

// keepsEnforce is one case of TestUpdateKeepsEnforce: the object admitted with admittedWith,
// updated under s.
func keepsEnforce(t *testing.T, c updateCase, admittedWith, s *Set, withLater bool, later *Policy) {
	created, err := admittedWith.Apply(Input{Kind: c.kind, Object: fixtureJSON(t, c.fixture, nil), Namespace: "team-a"})
	require.NoError(t, err)
	require.True(t, created.Changed)
	old := created.Object
	updated := edit(t, old, func(o map[string]any) {
		c.change(o)
		at(o, "metadata", "labels")["team"] = "changed-by-update"
	})
	res, err := s.PatchUpdate(Input{Kind: c.kind, Object: updated, Namespace: "team-a"}, old, false)
	require.NoError(t, err)
	if withLater {
		require.Equal(t, []string{later.Ref}, res.NotHeld)
		require.NotContains(t, res.Applied, later)
	} else {
		require.Empty(t, res.NotHeld)
	}
	require.False(t, res.Denied)
	require.True(t, hasOps(res.Patch), "the update undid an enforce policy: it must be put back")
	stored := applyPatch(t, updated, res.Patch)

	again, err := admittedWith.PatchUpdate(Input{Kind: c.kind, Object: stored, Namespace: "team-a"}, stored, false)
	require.NoError(t, err)
	require.False(t, hasOps(again.Patch), "enforce holds on what is stored: %s", again.Patch)
	var got, want map[string]any
	require.NoError(t, json.Unmarshal(stored, &got))
	require.NoError(t, json.Unmarshal(old, &want))
	require.Equal(t, "changed-by-update", at(got, "metadata", "labels")["team"], "a merge policy's value is the update's to change")
	at(want, "metadata", "labels")["team"] = "changed-by-update"
	require.Equal(t, want, got, "the update, with what it undid of the enforce policies put back, is the object as admitted")
	require.Equal(t, at(want, "metadata", "annotations")[AppliedAnnotation], at(got, "metadata", "annotations")[AppliedAnnotation])
}

// TestUpdateOfObjectNotHeld: an object that did not hold the enforce policies before the update
// (admitted before them, or while podpatch was down) is left as the update makes it, and the
// result names the policies; re-applying might change what a Pod's update may not.
func TestUpdateOfObjectNotHeld(t *testing.T) {
	s := updatePolicies(t)
	for _, c := range updateCases {
		t.Run(c.name, func(t *testing.T) {
			old := fixtureJSON(t, c.fixture, nil)
			updated := edit(t, old, c.change)
			res, err := s.PatchUpdate(Input{Kind: c.kind, Object: updated, Namespace: "team-a"}, old, false)
			require.NoError(t, err)
			require.NotEmpty(t, res.NotHeld)
			require.False(t, hasOps(res.Patch))
		})
	}
	// An update of an unrecognised object, or one no enforce policy matches, is nothing to podpatch.
	plain := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"x"}]}}`)
	res, err := s.PatchUpdate(Input{Kind: profiles.KindPod, Object: plain, Namespace: "team-a"}, plain, false)
	require.NoError(t, err)
	require.False(t, res.Recognised)
	require.Empty(t, res.NotHeld)
}

// TestUpdateOutOfTimeIsDenied: an update whose check runs out of its budget is denied, to be
// retried, whether the object held its enforce policies or not: slowness is no way past them.
func TestUpdateOutOfTimeIsDenied(t *testing.T) {
	s := updatePolicies(t)
	done := make(chan struct{})
	close(done)
	for _, c := range updateCases {
		t.Run(c.name, func(t *testing.T) {
			created, err := s.Apply(Input{Kind: c.kind, Object: fixtureJSON(t, c.fixture, nil), Namespace: "team-a"})
			require.NoError(t, err)
			for _, old := range [][]byte{created.Object, fixtureJSON(t, c.fixture, nil)} {
				updated := edit(t, old, c.change)
				res, err := s.PatchUpdate(Input{Kind: c.kind, Object: updated, Namespace: "team-a", Done: done, EnforceDone: done}, old, false)
				require.NoError(t, err)
				require.True(t, res.Denied, "an update checked out of time must not pass: %+v", res)
				require.Empty(t, res.NotHeld)
				require.True(t, enforceOutOfTime(res.Skipped), "%v", res.Skipped)
			}
		})
	}
}

// TestEphemeralContainersGetEnforce: a container `kubectl debug` adds gets what the enforce
// policies set for every container ("*"), with the fields an ephemeral container may have; the
// ephemeral containers already there, which cannot change, and everything else are not touched.
func TestEphemeralContainersGetEnforce(t *testing.T) {
	s := NewSet([]*Policy{
		enforcePolicy(t, "baseline", ModeEnforce, "template: {spec: {containers: [{name: '*', securityContext: {allowPrivilegeEscalation: false, privileged: false}, resources: {limits: {memory: 4Gi}}, env: [{name: PLATFORM, value: 'yes'}]}]}}"),
		enforcePolicy(t, "merge-sc", ModeMerge, "template: {spec: {containers: [{name: '*', securityContext: {readOnlyRootFilesystem: true}}]}}"),
	})
	created, err := s.Apply(Input{Kind: profiles.KindPod, Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", nil), Namespace: "team-a"})
	require.NoError(t, err)
	withOld := edit(t, created.Object, func(o map[string]any) {
		at(o, "spec")["ephemeralContainers"] = []any{map[string]any{"name": "old-debug", "image": "busybox"}}
	})
	added := edit(t, withOld, func(o map[string]any) {
		spec := at(o, "spec")
		spec["ephemeralContainers"] = append(spec["ephemeralContainers"].([]any),
			map[string]any{"name": "shell", "image": "busybox", "securityContext": map[string]any{"privileged": true}})
	})
	res, err := s.PatchUpdate(Input{Kind: profiles.KindPod, Object: added, Namespace: "team-a"}, withOld, true)
	require.NoError(t, err)
	require.False(t, res.Denied)
	var ops []struct{ Path string }
	require.NoError(t, json.Unmarshal(res.Patch, &ops))
	require.NotEmpty(t, ops)
	for _, op := range ops {
		require.True(t, strings.HasPrefix(op.Path, "/spec/ephemeralContainers/1"), "only the added container changes: %s", op.Path)
	}
	var pod struct {
		Spec struct {
			EphemeralContainers []map[string]any `json:"ephemeralContainers"`
		} `json:"spec"`
	}
	require.NoError(t, json.Unmarshal(applyPatch(t, added, res.Patch), &pod))
	shell := pod.Spec.EphemeralContainers[1]
	require.Equal(t, map[string]any{"allowPrivilegeEscalation": false, "privileged": false}, shell["securityContext"], "enforce wins; the merge policy does not apply on updates")
	require.Equal(t, []any{map[string]any{"name": "PLATFORM", "value": "yes"}}, shell["env"])
	require.NotContains(t, shell, "resources", "an ephemeral container may have no resources")
	require.Equal(t, map[string]any{"name": "old-debug", "image": "busybox"}, pod.Spec.EphemeralContainers[0])

	// Nothing added: nothing to do.
	res, err = s.PatchUpdate(Input{Kind: profiles.KindPod, Object: withOld, Namespace: "team-a"}, withOld, true)
	require.NoError(t, err)
	require.False(t, hasOps(res.Patch))
}

// TestUpdateCannotChangeSelection: an update after which an object no longer selects an enforce
// policy it held — a manager's label removed, a label the policy's selector reads removed — is
// denied, naming the policy; else the same write could undo it unseen (`kubectl patch svc`
// dropping dask.org/component and setting type: LoadBalancer). One that keeps the selection is
// not, whatever labels it changes.
func TestUpdateCannotChangeSelection(t *testing.T) {
	s := updatePolicies(t)
	for _, c := range []struct {
		name, fixture string
		kind          profiles.Kind
		change        func(o map[string]any)
	}{
		{"a Service's manager label and selector removed, and made a LoadBalancer", "dask-operator/scheduler-service.yaml", profiles.KindService, func(o map[string]any) {
			delete(at(o, "metadata", "labels"), "dask.org/component")
			delete(at(o, "spec", "selector"), "dask.org/component")
			at(o, "spec")["type"] = "LoadBalancer"
		}},
		{"every label removed", "kuberay/worker-pod.yaml", profiles.KindPod, func(o map[string]any) {
			delete(o["metadata"].(map[string]any), "labels")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			created, err := s.Apply(Input{Kind: c.kind, Object: fixtureJSON(t, c.fixture, nil), Namespace: "team-a"})
			require.NoError(t, err)
			res, err := s.PatchUpdate(Input{Kind: c.kind, Object: edit(t, created.Object, c.change), Namespace: "team-a"}, created.Object, false)
			require.NoError(t, err)
			require.True(t, res.Denied)
			require.NotEmpty(t, res.Skipped)
			for _, sk := range res.Skipped {
				require.Contains(t, []string{validity.ReasonSelectionChanged, validity.ReasonIdentityChanged, validity.ReasonRecognitionLabel}, sk.Violation.Rule)
			}
			require.NotEmpty(t, res.Denial())
		})
	}
	// The label an enforce policy's selector reads, removed with what the policy set.
	internal := NewSet([]*Policy{enforcePolicy(t, "internal", ModeEnforce,
		"match: {selector: {matchLabels: {exposure: internal}}}\nservice: {metadata: {annotations: {networking.gke.io/load-balancer-type: Internal}}}")})
	labelled := fixtureJSON(t, "kuberay/head-service.yaml", func(o map[string]any) { at(o, "metadata", "labels")["exposure"] = "internal" })
	admitted, err := internal.Apply(Input{Kind: profiles.KindService, Object: labelled, Namespace: "team-a"})
	require.NoError(t, err)
	unselected := edit(t, admitted.Object, func(o map[string]any) {
		delete(at(o, "metadata", "labels"), "exposure")
		delete(at(o, "metadata", "annotations"), "networking.gke.io/load-balancer-type")
	})
	res, err := internal.PatchUpdate(Input{Kind: profiles.KindService, Object: unselected, Namespace: "team-a"}, admitted.Object, false)
	require.NoError(t, err)
	require.True(t, res.Denied)
	require.Contains(t, res.Denial(), "podpatch-system/internal/internal")

	// A worker made a scheduler keeps the only Pod enforce policy there is, but what it is to
	// podpatch changes: denied (TestUpdateCannotChangeIdentity has every pair).
	worker, err := s.Apply(Input{Kind: profiles.KindPod, Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", nil), Namespace: "team-a"})
	require.NoError(t, err)
	res, err = s.PatchUpdate(Input{Kind: profiles.KindPod, Namespace: "team-a", Object: edit(t, worker.Object, func(o map[string]any) {
		at(o, "metadata", "labels")["dask.org/component"] = "scheduler"
	})}, worker.Object, false)
	require.NoError(t, err)
	require.True(t, res.Denied)
	require.Equal(t, validity.ReasonIdentityChanged, res.Skipped[0].Violation.Rule)

	// A Service is recognised by its selector too, but the webhook's objectSelector reads its
	// labels: its label removed, no later update would reach podpatch. Denied.
	created, err := s.Apply(Input{Kind: profiles.KindService, Object: fixtureJSON(t, "dask-operator/scheduler-service.yaml", nil), Namespace: "team-a"})
	require.NoError(t, err)
	updated := edit(t, created.Object, func(o map[string]any) {
		delete(at(o, "metadata", "labels"), "dask.org/component")
		at(o, "spec")["type"] = "LoadBalancer"
	})
	res, err = s.PatchUpdate(Input{Kind: profiles.KindService, Object: updated, Namespace: "team-a"}, created.Object, false)
	require.NoError(t, err)
	require.True(t, res.Denied)
	require.Equal(t, validity.ReasonRecognitionLabel, res.Skipped[0].Violation.Rule)
	require.Contains(t, res.Denial(), "dask.org/component")
}

// TestUpdateIntoRecognition: an object labelled as a manager's by an update (a bare Pod given
// dask.org/component) did not hold the enforce policies before and is left as it is: applying
// them could change what a Pod's update may not, and refuse the update.
func TestUpdateIntoRecognition(t *testing.T) {
	s := updatePolicies(t)
	bare := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"x"}]}}`)
	labelled := edit(t, bare, func(o map[string]any) {
		at(o, "metadata", "labels")["dask.org/component"] = "worker"
		at(o, "metadata", "labels")["dask.org/cluster-name"] = "c"
	})
	res, err := s.PatchUpdate(Input{Kind: profiles.KindPod, Object: labelled, Namespace: "team-a"}, bare, false)
	require.NoError(t, err)
	require.False(t, hasOps(res.Patch))
	require.False(t, res.Denied)
	created, err := s.Apply(Input{Kind: profiles.KindPod, Object: labelled, Namespace: "team-a"})
	require.NoError(t, err)
	require.True(t, hasOps(created.Patch), "created so, the enforce policies would apply")
}

// TestAddedEphemeralIsBounded: among a Pod's thousands of ephemeral containers (they
// accumulate, one per `kubectl debug`; BenchmarkAddedEphemeral shows the read linear) the one
// an update adds is found, and an update adding more than MaxEphemeralAdded is refused by the
// engine (an error: admitted unchanged only where no enforce policy binds it).
func TestAddedEphemeralIsBounded(t *testing.T) {
	pod := ephemeralPod
	old := pod(20000, "d")
	grown := edit(t, old, func(o map[string]any) {
		spec := at(o, "spec")
		spec["ephemeralContainers"] = append(spec["ephemeralContainers"].([]any), map[string]any{"name": "new", "image": "busybox"})
	})
	added, err := addedEphemeral(grown, old)
	require.NoError(t, err)
	require.Equal(t, []string{"new"}, added)
	_, err = addedEphemeral(pod(MaxEphemeralAdded+1, "x"), pod(0, ""))
	require.ErrorContains(t, err, "more than 16 ephemeral containers")
}

// ephemeralPod is a Pod of n ephemeral containers named PREFIX0…
func ephemeralPod(n int, prefix string) []byte {
	var b strings.Builder
	b.WriteString(`{"spec":{"ephemeralContainers":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"%s%d","image":"busybox"}`, prefix, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// BenchmarkAddedEphemeral: finding the added container among 2,000 and 20,000 costs ten times
// as much, not a hundred.
//
//	go test ./policies -run '^$' -bench AddedEphemeral
func BenchmarkAddedEphemeral(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			old, grown := ephemeralPod(n, "d"), ephemeralPod(n+1, "d")
			for b.Loop() {
				if added, err := addedEphemeral(grown, old); err != nil || len(added) != 1 {
					b.Fatal(added, err)
				}
			}
		})
	}
}

// TestUpdateNeverAppliesANewlySelectedPolicy: a label an update adds that makes an enforce
// policy select a running Pod does not bring that policy's fields: the Pod did not hold it, and
// its nodeSelector is one a Pod's update may not change (the API server would refuse the
// update, and the owner could not label its Pod). The policy is named as not held; the ones
// the Pod held still hold.
func TestUpdateNeverAppliesANewlySelectedPolicy(t *testing.T) {
	list := updatePolicyList(t)
	gpu := enforcePolicy(t, "gpu", ModeEnforce, "match: {selector: {matchLabels: {pool: gpu}}}\ntemplate: {spec: {nodeSelector: {pool: gpu}}}")
	s := NewSet(append(slices.Clone(list), gpu))
	created, err := s.Apply(Input{Kind: profiles.KindPod, Object: fixtureJSON(t, "dask-operator/worker-pod.yaml", nil), Namespace: "team-a"})
	require.NoError(t, err)
	require.NotContains(t, created.Applied, gpu)
	for _, undo := range []bool{false, true} {
		updated := edit(t, created.Object, func(o map[string]any) {
			at(o, "metadata", "labels")["pool"] = "gpu"
			if undo {
				delete(at(o, "metadata", "labels"), "cost-center")
			}
		})
		res, err := s.PatchUpdate(Input{Kind: profiles.KindPod, Object: updated, Namespace: "team-a"}, created.Object, false)
		require.NoError(t, err)
		require.False(t, res.Denied)
		require.Equal(t, []string{gpu.Ref}, res.NotHeld)
		stored := string(applyPatch(t, updated, res.Patch))
		require.NotContains(t, stored, "nodeSelector", "a field a Pod's update may not change")
		require.Contains(t, stored, `"cost-center":"data-platform"`, "the policies it held still hold")
	}
}
