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
//   - an update: when the old object held every enforce policy that matches it, whatever the
//     update undid of them is put back (Result.Patch); when it did not (it was admitted before
//     the policy, or while podpatch was down), the update is left as it is and Result.NotHeld
//     says so — re-applying could change fields a Pod's update may not (its nodeSelector) and
//     block its owner, and the audit reports such objects (reference §7); an object no
//     profile recognised before the update is left as it is too;
//   - ephemeral containers: the enforce policies' entries for every container ("*") reach the
//     ephemeral containers the request adds, with the fields an ephemeral container may have
//     (ephemeralFields); those already there cannot change and are not touched.
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
	if prev.Denied || hasOps(prev.Patch) {
		refs := make([]string, 0, len(prev.Applied))
		for _, p := range prev.Applied {
			refs = append(refs, p.Ref)
		}
		return Result{Object: in.Object, Recognised: true, Identity: prev.Identity, NotHeld: refs}, nil
	}
	res, err := s.apply(in, true)
	if err != nil {
		return res, err
	}
	// An enforce policy that held and that the object as updated no longer selects (a
	// manager's label removed, a label the policy's selector reads changed): the same write
	// could undo it unseen. Denied, naming it.
	var lost []Skipped
	for _, p := range prev.Applied {
		if !res.Recognised || !slices.Contains(res.Applied, p) {
			lost = append(lost, Skipped{Policy: p, Violation: validity.Violation{Rule: RuleSelectionChanged, Field: "metadata.labels",
				Message: "this update changes the labels that select the object for this enforce policy (its manager, role or the policy's selector); create a new object instead"}})
		}
	}
	if len(lost) > 0 {
		return Result{Object: in.Object, Recognised: true, Identity: prev.Identity, Denied: true, Skipped: lost}, nil
	}
	return res, nil
}

// RuleSelectionChanged is the rule of an update denied for changing the labels that select an
// object for an enforce policy it held (PatchUpdate): a reason of podpatch_enforce_denials_total.
const RuleSelectionChanged = "selection-changed"

// hasOps says whether a JSONPatch changes anything.
func hasOps(patch []byte) bool { return len(patch) > 0 && string(patch) != "[]" }
