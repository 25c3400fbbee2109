package policies

import (
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
//     block its owner, and the audit reports such objects (reference §7);
//   - ephemeral containers: the enforce policies' entries for every container ("*") reach the
//     ephemeral containers the request adds, with the fields an ephemeral container may have
//     (ephemeralFields); those already there cannot change and are not touched.
//
// An enforce policy that cannot be applied denies the update (Result.Denied), as at creation; so
// does an update that changes the labels recognising an object that held its enforce policies
// (RuleRecognitionChanged): it would leave them behind.
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
	if err != nil {
		return Result{Object: in.Object}, err
	}
	if prev.Recognised && (prev.Denied || hasOps(prev.Patch)) {
		refs := make([]string, 0, len(prev.Applied))
		for _, p := range prev.Applied {
			refs = append(refs, p.Ref)
		}
		return Result{Object: in.Object, Recognised: true, Identity: prev.Identity, NotHeld: refs}, nil
	}
	res, err := s.apply(in, true)
	if err == nil && prev.Recognised && len(prev.Applied) > 0 && (!res.Recognised || res.Identity != prev.Identity) {
		// The labels that recognise the object changed (a manager's label removed, a worker
		// made a scheduler): the enforce policies that held would no longer be looked at, and
		// the update could then undo them in the same write. Denied, naming them.
		v := validity.Violation{Rule: RuleRecognitionChanged, Field: "metadata.labels",
			Message: "this update changes the labels that recognise the object (manager, role), which the platform's enforce policies bind; create a new object instead"}
		out := Result{Object: in.Object, Recognised: true, Identity: prev.Identity, Denied: true}
		for _, p := range prev.Applied {
			out.Skipped = append(out.Skipped, Skipped{Policy: p, Violation: v})
		}
		return out, nil
	}
	return res, err
}

// RuleRecognitionChanged is the rule of an update denied for changing the labels that
// recognise an object the platform's enforce policies bind (PatchUpdate): a reason of
// podpatch_enforce_denials_total.
const RuleRecognitionChanged = "recognition-changed"

// hasOps says whether a JSONPatch changes anything.
func hasOps(patch []byte) bool { return len(patch) > 0 && string(patch) != "[]" }
