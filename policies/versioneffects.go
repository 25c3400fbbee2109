package policies

import (
	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
)

// What the cluster's Kubernetes version does not keep of the applied policies' fields
// (policies/versions): the fields it drops are taken out of the object, as the API server
// would, and a policy that set nothing else is not named in the provenance (reference §8:
// never claimed); the fields it refuses are violations.

// kubeEffects are what the cluster's Kubernetes version does not keep of the applied
// policies' fields (policies/versions), by policy.
type kubeEffects struct {
	version versions.Version
	by      []policyEffects
}

type policyEffects struct {
	policy  *Policy
	effects []versions.Effect
}

// versionEffectsOf finds the fields of the applied policies that the lookups' Kubernetes version
// drops or refuses; none when the version is unknown (and on a version podpatch does not
// support, only what the probe learned). What the API server was
// seen to do (versions.Learner, the probe of internal/references) comes before what the table
// says of its version.
func versionEffectsOf(applied []*Policy, kind profiles.Kind, lookups validity.Lookups) kubeEffects {
	server, ok := lookups.(versions.Server)
	if !ok {
		return kubeEffects{}
	}
	v, known := server.KubeVersion()
	if !known {
		return kubeEffects{}
	}
	k := kubeEffects{version: v} // a version podpatch does not support: what the probe learned only
	for _, p := range applied {
		if es := versions.AffectedOn(string(kind), p.Patch(kind), server, v); len(es) > 0 {
			k.by = append(k.by, policyEffects{p, es})
		}
	}
	return k
}

// drop takes the fields the version drops out of the object, as its API server would, says
// each in res.NoEffect, and returns the policies that set nothing else.
func (k kubeEffects) drop(obj map[string]any, kind profiles.Kind, res *Result) map[*Policy]bool {
	var only map[*Policy]bool
	for _, pe := range k.by {
		var dropped []versions.Field
		for _, e := range pe.effects {
			if e.Outcome != versions.Dropped {
				continue
			}
			res.NoEffect = append(res.NoEffect, NoEffect{Policy: pe.policy, Field: e.At, Gate: e.Field.Gate, Message: e.String(k.version)})
			e.Field.Strip(obj) // the members the merge wrote are decoded; raw ones it never touched keep theirs, as the server drops them too
			dropped = append(dropped, e.Field)
		}
		if len(dropped) > 0 && !setsBeyond(pe.policy, kind, dropped) {
			if only == nil {
				only = map[*Policy]bool{}
			}
			only[pe.policy] = true
		}
	}
	return only
}

// refused are the violations of the fields the version refuses: the policy is left out, or
// the object denied for an enforce one.
func (k kubeEffects) refused() []validity.Violation {
	var out []validity.Violation
	for _, pe := range k.by {
		for _, e := range pe.effects {
			if e.Outcome == versions.Refused {
				out = append(out, validity.Violation{Rule: validity.ReasonKubeVersion, Field: e.At, Message: e.String(k.version)})
			}
		}
	}
	return out
}

// setsBeyond reports whether a policy's part for kind sets a field besides the dropped ones.
func setsBeyond(p *Policy, kind profiles.Kind, dropped []versions.Field) bool {
	c, _ := jsontree.Copy(p.Patch(kind), false)
	patch, _ := c.(map[string]any)
	for _, f := range dropped {
		f.Strip(patch)
	}
	pruneEmpty(patch)
	return len(objdiff.Paths(skeleton(patch), patch, objdiff.Options{DescendMissing: true})) > 0
}

// pruneEmpty removes the objects a removal left empty ({spec: {}}), which set nothing.
func pruneEmpty(v any) (empty bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if pruneEmpty(c) {
				delete(x, k)
			}
		}
		return len(x) == 0
	case []any:
		for _, c := range x {
			pruneEmpty(c)
		}
	}
	return false
}
