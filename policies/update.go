package policies

import (
	"encoding/json"
	"slices"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// Updates (reference §5, "Enforce on updates"): the platform's enforce policies hold on every
// write that can undo what they set, not only at creation. Default and merge policies shape an
// object once, at its creation.

// PatchUpdate is Patch for an UPDATE of a Pod or Service (ephemeral false), or for a Pod's
// pods/ephemeralcontainers subresource (ephemeral true); old is the object as stored before it.
// Only the platform's enforce policies apply, and the provenance (AppliedAnnotation) is left as
// admission wrote it:
//
//   - an update: of the enforce policies that match the old object, whatever the update undid
//     of those it held (Set.Holding, holds.go: the value and the effect of every field, the API
//     server's defaults in the elements they bring whole not counting) is put back
//     (Result.Patch); those it did not hold, and those only the updated labels select, are
//     not applied, and Result.NotHeld names them, Result.NotHeldAt where and how — applying
//     one could change fields a Pod's update may not (its nodeSelector): the API server would
//     refuse the update and block its owner; the audit reports such objects (reference §7).
//     An object no profile recognised before the update is left as it is;
//   - ephemeral containers: the enforce policies' entries for every container ("*") reach the
//     ephemeral containers the request adds, with the fields an ephemeral container may have
//     (EphemeralFields); those already there cannot change and are not touched.
//
// An enforce policy that cannot be applied denies the update (Result.Denied), as at creation; so
// does, on an object that holds an enforce policy, an update that changes what the object is
// to podpatch — its recognition, manager, role, cluster, group or "@main" (validity.ReasonIdentityChanged)
// —, that removes or changes a label it is recognised by, which the webhooks' objectSelectors
// read (validity.ReasonRecognitionLabel), or after which it no longer selects an enforce policy it held
// (validity.ReasonSelectionChanged): each would leave that policy behind.
func (s *Set) PatchUpdate(in Input, old []byte, ephemeral bool) (Result, error) {
	in.Explain = false
	if ephemeral {
		return s.patchEphemeral(in, old)
	}
	before := in
	before.Object = old
	h, err := s.holding(before)
	if err != nil || !h.Recognised {
		// Not one of a manager's objects before: labelled as one by this update, it did not
		// hold the enforce policies either, and is left as it is (the audit reports it).
		return Result{Object: in.Object}, err
	}
	if h.outOfTime {
		// Out of time before it is known what the object held: denied, to be retried, as at
		// creation — an update never gets past an enforce policy by being slow to check.
		return Result{Object: in.Object, Recognised: true, Identity: h.Identity, Denied: true, Skipped: h.result.Skipped}, nil
	}
	// Only the enforce policies whose re-application changes nothing of the object as stored
	// are applied to the update (Holding): one it did not hold (or that only the updated labels
	// select) could change what the update may not change (a Pod's nodeSelector), and the API
	// server would refuse the update. One whose fields are all there but whose effect a
	// container's own security field overrides is applied, and named too.
	selected := h.Selected
	held := make(map[*Policy]bool, len(selected))
	for _, p := range selected {
		held[p] = h.reapplies(p)
	}
	var notHeldRefs, notHeldAt []string
	for _, n := range h.NotHeld {
		notHeldRefs, notHeldAt = append(notHeldRefs, n.Policy.Ref), append(notHeldAt, n.String())
	}
	if !slices.ContainsFunc(selected, func(p *Policy) bool { return held[p] }) {
		return Result{Object: in.Object, Recognised: true, Identity: h.Identity, NotHeld: notHeldRefs, NotHeldAt: notHeldAt}, nil
	}
	// The object holds enforce policies: what selects them is not the update's to change.
	if lost := identityChanged(in, old, h); len(lost) > 0 {
		return Result{Object: in.Object, Recognised: true, Identity: h.Identity, Denied: true, Skipped: lost, NotHeld: notHeldRefs, NotHeldAt: notHeldAt}, nil
	}
	var named map[*Policy]bool // selected by the updated labels alone, named once
	keep := func(q *Policy) bool {
		if keep, was := held[q]; !keep && !was && !named[q] {
			if named == nil {
				named = map[*Policy]bool{}
			}
			named[q] = true
			notHeldRefs, notHeldAt = append(notHeldRefs, q.Ref), append(notHeldAt, "selected only by the labels this update writes")
		}
		return held[q]
	}
	res, err := s.apply(in, updating(true, keep, nil))
	if err != nil {
		return res, err
	}
	res.NotHeld, res.NotHeldAt = notHeldRefs, notHeldAt
	if lost := selectionLost(res, selected, held); len(lost) > 0 {
		return Result{Object: in.Object, Recognised: true, Identity: h.Identity, Denied: true, Skipped: lost, NotHeld: notHeldRefs, NotHeldAt: notHeldAt}, nil
	}
	return res, nil
}

// patchEphemeral is PatchUpdate for a Pod's pods/ephemeralcontainers subresource: the enforce
// policies' "*" entries reach the ephemeral containers the request adds (old: the Pod before).
func (s *Set) patchEphemeral(in Input, old []byte) (Result, error) {
	if in.Kind != profiles.KindPod {
		return Result{Object: in.Object}, nil
	}
	added, err := addedEphemeral(in.Object, old)
	if err != nil || len(added) == 0 {
		return Result{Object: in.Object}, err
	}
	res, err := s.apply(in, updating(false, nil, added))
	if err != nil || res.Denied {
		return res, err
	}
	// An added container whose own securityContext overrides a Pod-level field an enforce
	// policy sets would run without that policy's effect: denied.
	if lost := overridesEnforced(res.Object, res.Applied, added); len(lost) > 0 {
		return Result{Object: in.Object, Recognised: true, Identity: res.Identity, Denied: true, Skipped: lost}, nil
	}
	res.Object = in.Object // Patch's: the webhook reads the JSONPatch
	return res, nil
}

// selectionLost are the enforce policies the object held (held, of selected) that the object as
// updated (res) no longer selects — a manager's label removed, a label the policy's selector
// reads changed: the same write could undo them unseen, so the update is denied, naming each.
func selectionLost(res Result, selected []*Policy, held map[*Policy]bool) []Skipped {
	applied := make(map[*Policy]bool, len(res.Applied))
	for _, p := range res.Applied {
		applied[p] = true
	}
	var lost []Skipped
	for _, p := range selected {
		if held[p] && (!res.Recognised || !applied[p]) {
			lost = append(lost, Skipped{Policy: p, Violation: validity.Violation{Rule: validity.ReasonSelectionChanged, Field: "metadata.labels",
				Message: "this update changes the labels that select the object for this enforce policy (its manager, role or the policy's selector); create a new object instead"}})
		}
	}
	return lost
}

// overridesEnforced returns, for each enforce policy applied, the first of the added ephemeral
// containers of a patched Pod whose own securityContext overrides a Pod-level field the policy
// sets with another value (validity.ReasonOverridesEnforced).
func overridesEnforced(patched []byte, applied []*Policy, added []string) []Skipped {
	pod := viewPod(patched)
	only := func(list, name string) bool { return list == "ephemeralContainers" && slices.Contains(added, name) }
	var out []Skipped
	for _, p := range applied {
		if p.Mode != ModeEnforce {
			continue
		}
		if n, ok := overriddenIn(pod, p, only); ok {
			out = append(out, Skipped{Policy: p, Violation: validity.Violation{Rule: validity.ReasonOverridesEnforced, Field: n.Field,
				Message: "the ephemeral container's own value overrides the Pod-level one this enforce policy sets; leave it unset or give the Pod's"}})
		}
	}
	return out
}

// identityOf is what an object is to podpatch: its labels, its identity and "@main".
type identityOf struct {
	labels     map[string]string
	id         profiles.Identity
	recognised bool
	main       string
}

func readIdentity(kind profiles.Kind, raw []byte) identityOf {
	t := jsontree.New()
	obj, ok := t.Decode(json.RawMessage(raw)).(map[string]any)
	if !ok {
		return identityOf{}
	}
	meta, _ := t.GetMap(obj, "metadata")
	l, id, recognised := recognise(t, obj, meta, kind)
	out := identityOf{labels: l, id: id, recognised: recognised}
	if recognised && kind == profiles.KindPod {
		spec, _ := t.GetMap(obj, "spec")
		cs, _ := t.Get(spec, "containers")
		list, _ := cs.([]any)
		out.main = mainName(list, id.Manager)
	}
	return out
}

// mainName is mainContainer of a list whose items are still raw, reading only their names.
func mainName(containers []any, manager profiles.Manager) string {
	first := ""
	for _, c := range containers {
		var name string
		switch x := c.(type) {
		case json.RawMessage:
			jsontree.Members(x, []string{"name"}, func(_ int, v jsontree.Scalar) { name = v.Text })
		case map[string]any:
			name, _ = x["name"].(string)
		}
		if first == "" {
			first = name
		}
		if profiles.IsMainContainer(manager, name) {
			return name
		}
	}
	return first
}

// recognitionLabels are, by manager, the labels an object of its holding enforce policies
// keeps: those its profile recognises objects by (role, required, cluster and group labels) and
// those its Services carry. Another manager's labels (a Flink cluster's app) are not reserved
// on it.
var recognitionLabels = func() map[profiles.Manager][]string {
	out := map[profiles.Manager][]string{}
	for _, pr := range profiles.All() {
		keys := []string{pr.RoleKey}
		if pr.RequireKey != "" {
			keys = append(keys, pr.RequireKey)
		}
		keys = append(keys, pr.ClusterKeys...)
		if pr.GroupKey != "" {
			keys = append(keys, pr.GroupKey)
		}
		for k := range pr.ServiceLabels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out[pr.Manager] = slices.Compact(keys)
	}
	return out
}()

// identityChanged returns, for every enforce policy the object held, why the update changes
// what selects it (validity.ReasonIdentityChanged, validity.ReasonRecognitionLabel); none when it does not.
func identityChanged(in Input, old []byte, h Holding) []Skipped {
	was, now := readIdentity(in.Kind, old), readIdentity(in.Kind, in.Object)
	var v *validity.Violation
	switch {
	case !now.recognised || now.id.Manager != was.id.Manager || now.id.Role != was.id.Role:
		to := "an object no profile recognises"
		if now.recognised {
			to = string(now.id.Manager) + " " + string(now.id.Role)
		}
		v = &validity.Violation{Rule: validity.ReasonIdentityChanged, Field: "metadata.labels",
			Message: "this update makes a " + string(was.id.Manager) + " " + string(was.id.Role) + " " + to +
				": the enforce policies it holds were decided on what it is; create a new object instead"}
	case now.id != was.id:
		v = &validity.Violation{Rule: validity.ReasonIdentityChanged, Field: "metadata.labels",
			Message: "this update moves the object to another compute cluster or group: the enforce policies it holds were decided on its own; create a new object instead"}
	case now.main != was.main:
		v = &validity.Violation{Rule: validity.ReasonIdentityChanged, Field: "spec.containers",
			Message: "this update changes the container \"@main\" names: the enforce policies it holds were decided on the container it named; create a new object instead"}
	default:
		for _, k := range recognitionLabels[was.id.Manager] {
			prev, had := was.labels[k]
			if cur, has := now.labels[k]; had && (!has || cur != prev) {
				v = &validity.Violation{Rule: validity.ReasonRecognitionLabel, Field: "metadata.labels[" + k + "]",
					Message: "this update removes or changes a label podpatch recognises the object by, while it holds the platform's enforce policies: without it no later update would reach them"}
				break
			}
		}
	}
	if v == nil {
		return nil
	}
	var out []Skipped
	for _, p := range h.Selected {
		if h.reapplies(p) {
			out = append(out, Skipped{Policy: p, Violation: *v})
		}
	}
	return out
}
