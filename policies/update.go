package policies

import (
	"slices"

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
//     of those it held is put back (Result.Patch); those it did not hold (it was admitted
//     before them, or while podpatch was down), and those only the updated labels select, are
//     not applied, and Result.NotHeld names them — applying one could change fields a Pod's
//     update may not (its nodeSelector): the API server would refuse the update and block its
//     owner; the audit reports such objects (reference §7). When all held, they are applied
//     together; else each is asked alone whether it held. An object no profile recognised
//     before the update is left as it is;
//   - ephemeral containers: the enforce policies' entries for every container ("*") reach the
//     ephemeral containers the request adds, with the fields an ephemeral container may have
//     (EphemeralFields); those already there cannot change and are not touched.
//
// An enforce policy that cannot be applied denies the update (Result.Denied), as at creation; so
// does an update after which the object no longer selects an enforce policy it held
// (RuleSelectionChanged): it would leave that policy behind.
func (s *Set) PatchUpdate(in Input, old []byte, ephemeral bool) (Result, error) {
	in.Explain, in.enforceOnly = false, true
	if ephemeral {
		if in.Kind != profiles.KindPod {
			return Result{Object: in.Object}, nil
		}
		added, err := addedEphemeral(in.Object, old)
		if err != nil || len(added) == 0 {
			return Result{Object: in.Object}, err
		}
		in.ephemeral = added
		return s.apply(in, true)
	}
	before := in
	before.Object = old
	prev, err := s.apply(before, true)
	if err != nil || !prev.Recognised {
		// Not one of a manager's objects before: labelled as one by this update, it did not
		// hold the enforce policies either, and is left as it is (the audit reports it).
		return Result{Object: in.Object}, err
	}
	// Out of time before it is known what the object held: denied, to be retried, as at
	// creation — an update never gets past an enforce policy by being slow to check.
	outOfTime := func(r Result) (Result, bool) {
		if !r.Denied || !enforceOutOfTime(r.Skipped) {
			return Result{}, false
		}
		return Result{Object: in.Object, Recognised: true, Identity: prev.Identity, Denied: true, Skipped: r.Skipped}, true
	}
	if r, stop := outOfTime(prev); stop {
		return r, nil
	}
	// Only the enforce policies the object held are applied to the update: one it did not hold
	// (or that only the updated labels select) could change what the update may not change (a
	// Pod's nodeSelector), and the API server would refuse the update. When some did not hold,
	// each is asked alone.
	selected := enforceOf(prev)
	held := make(map[*Policy]bool, len(selected))
	for _, p := range selected {
		held[p] = true
	}
	var notHeldRefs []string
	if prev.Denied || hasOps(prev.Patch) {
		for _, p := range selected {
			alone := before
			alone.keepEnforce = func(q *Policy) bool { return q == p }
			r, err := s.apply(alone, true)
			if err != nil {
				return Result{}, err
			}
			if r, stop := outOfTime(r); stop {
				return r, nil
			}
			if r.Denied || hasOps(r.Patch) || !slices.Contains(r.Applied, p) {
				held[p] = false // selected before, not held
				notHeldRefs = append(notHeldRefs, p.Ref)
			}
		}
		if len(notHeldRefs) == len(selected) {
			return Result{Object: in.Object, Recognised: true, Identity: prev.Identity, NotHeld: notHeldRefs}, nil
		}
	}
	var named map[*Policy]bool // selected by the updated labels alone, named once
	in.keepEnforce = func(q *Policy) bool {
		if keep, was := held[q]; !keep && !was && !named[q] {
			if named == nil {
				named = map[*Policy]bool{}
			}
			named[q] = true
			notHeldRefs = append(notHeldRefs, q.Ref)
		}
		return held[q]
	}
	res, err := s.apply(in, true)
	if err != nil {
		return res, err
	}
	res.NotHeld = notHeldRefs
	// An enforce policy that held and that the object as updated no longer selects (a
	// manager's label removed, a label the policy's selector reads changed): the same write
	// could undo it unseen. Denied, naming it.
	applied := make(map[*Policy]bool, len(res.Applied))
	for _, p := range res.Applied {
		applied[p] = true
	}
	var lost []Skipped
	for _, p := range selected {
		if held[p] && (!res.Recognised || !applied[p]) {
			lost = append(lost, Skipped{Policy: p, Violation: validity.Violation{Rule: RuleSelectionChanged, Field: "metadata.labels",
				Message: "this update changes the labels that select the object for this enforce policy (its manager, role or the policy's selector); create a new object instead"}})
		}
	}
	if len(lost) > 0 {
		return Result{Object: in.Object, Recognised: true, Identity: prev.Identity, Denied: true, Skipped: lost, NotHeld: notHeldRefs}, nil
	}
	return res, nil
}

// enforceOf lists the enforce policies an enforce-only result selected: those it applied and
// those it left out, each once, in that order (r.Applied itself when none was left out).
func enforceOf(r Result) []*Policy {
	if len(r.Skipped) == 0 {
		return r.Applied
	}
	out := slices.Clone(r.Applied)
	seen := make(map[*Policy]bool, len(out)+len(r.Skipped))
	for _, p := range out {
		seen[p] = true
	}
	for _, sk := range r.Skipped {
		if sk.Policy.Mode == ModeEnforce && !seen[sk.Policy] {
			seen[sk.Policy] = true
			out = append(out, sk.Policy)
		}
	}
	return out
}

// RuleSelectionChanged is the rule of an update denied for changing the labels that select an
// object for an enforce policy it held (PatchUpdate): a reason of podpatch_enforce_denials_total.
const RuleSelectionChanged = "selection-changed"
