package policies

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/internal/jsontree"
	"github.com/podpatch/podpatch/policies/validity"
)

// The merge stage (doc.go), the entry of every admission: recognise the object, select its
// policies, apply their layers (layers_apply.go, merge.go) to the fixed point of the labels
// they set (settle.go), fall back on fewer layers where they cannot all apply (admit.go), keep
// the result valid (keepvalid.go) and run the manager-aware checks on it.

// Apply patches one object with the matching policies of the set, in the layer order of
// reference §3, working on the raw JSON so that fields unknown to this build survive, and returns the
// patched object (and, with Input.Explain, what each policy changed): `podpatch render` and the
// audit. It is deterministic and idempotent: applying its result again gives the same object.
func (s *Set) Apply(in Input) (Result, error) { return s.apply(in, mode{}) }

// Patch is Apply for the webhook: it returns only the JSONPatch (Result.Object stays the input),
// and trusts that Object is valid JSON, decoded once already with the review that carries it.
// It is the very same code path as Apply, so admission produces what `render` prints.
func (s *Set) Patch(in Input) (Result, error) {
	in.Explain = false
	return s.apply(in, mode{patchOnly: true})
}

// mode is how one evaluation runs beyond its Input: what Patch, updates (update.go) and the
// holding predicate (holds.go) ask of it.
type mode struct {
	// patchOnly returns only the JSONPatch, and trusts the object to be valid JSON (Patch).
	patchOnly bool
	// update applies the platform's enforce policies alone and leaves the provenance as it
	// is: an update (PatchUpdate) or what a stored object holds (Holding).
	update bool
	// keep, for an update, narrows the enforce layer to the policies it keeps (PatchUpdate:
	// not those the object did not hold before the update); nil: every enforce policy selected.
	keep func(*Policy) bool
	// ephemeral, for an update, names the ephemeral containers a pods/ephemeralcontainers
	// update adds: the enforce policies' container entries reach those alone (ephemeralPatch).
	ephemeral []string
	// readmitted is an admission of what an admission made (readmit): it returns the result
	// with its tree, without the checks, and is not admitted again.
	readmitted bool
}

// evaluation is one admission of one object, the value every stage and fallback reads: the
// input and how it runs, what the object is to the selection (subject), the environment its
// result is checked in, and its first selection. Set.apply runs its strategies in order.
type evaluation struct {
	s    *Set
	in   Input
	mode mode
	sub  subject
	env  *validity.Env
	// unpatched is the result that patches nothing: the object as it came, recognised.
	unpatched Result
	// all is the first strategy: every layer the object selects (for an update, its enforce
	// layer alone).
	all strategy
}

// strategy is a selection of layers, and what each selection after it keeps of the layers
// (fixedPoint selects again as the labels policies set change): every layer, the platform's
// alone, the enforce layer alone.
type strategy struct {
	layers layers
	keep   func(*layers) layers
}

// restricted is the strategy whose every selection, the first included, keep restricts.
func restricted(l layers, keep func(*layers) layers) strategy { return strategy{keep(&l), keep} }

// apply is Apply, Patch, or an update's evaluation, by m. Its strategies, in order: every
// layer to the fixed point of the labels policies set, falling back on the platform's alone
// and on the enforce layer alone (admit); the selection settled without the policies left out
// for their result's validity (settleSelection); the result admitted again until that changes
// nothing (readmit); the manager-aware checks on what stands.
func (s *Set) apply(in Input, m mode) (Result, error) {
	var e evaluation
	first, err := e.start(s, in, m)
	if err != nil || first.obj == nil {
		return Result{Object: in.Object}, err
	}
	if e.all.layers.empty() {
		return e.unpatched, nil
	}
	out, err := e.admit(e.all, &first)
	var unsettled, excluded bool
	if err == nil {
		unsettled, _ = e.unsettled(e.all.keep, out)
	}
	if unsettled {
		out, unsettled, excluded, err = e.settleSelection(out)
	}
	if m.readmitted {
		return out, err // for readmit: the result with its tree, without the checks
	}
	if err == nil && !m.update && mayNotSettle(out, unsettled, excluded) {
		out = e.readmit(out)
	}
	if err != nil {
		return e.unpatched, err
	}
	return e.checked(out), nil
}

// start decodes the object, reads its namespace and recognises it, and makes e its evaluation
// by s: it returns the tree decoded for the first round, none for an object no profile
// recognises.
func (e *evaluation) start(s *Set, in Input, m mode) (decoded, error) {
	if !m.patchOnly && !json.Valid(in.Object) {
		return decoded{}, fmt.Errorf("decode %s: not valid JSON", strings.ToLower(string(in.Kind)))
	}
	t := jsontree.New()
	obj, ok := t.Decode(json.RawMessage(in.Object)).(map[string]any)
	if !ok {
		return decoded{}, fmt.Errorf("decode %s: expected a JSON object", strings.ToLower(string(in.Kind)))
	}
	if in.Explain {
		jsontree.ExpandAll(obj)
	}
	meta, _ := t.GetMap(obj, "metadata")
	// Decided on the very tree the policies are selected from (duplicate and differently cased
	// keys read as the merge reads them). An explicit null is no namespace.
	ns, _ := meta["namespace"].(string)
	if v, set := meta["namespace"]; in.NamespaceFromRequest && set && v != nil && v != "" && v != in.Namespace {
		s, _ := v.(string)
		if len(s) > 63 { // a namespace name is at most 63 bytes; the rest is not repeated
			s = s[:63] + "…"
		}
		return decoded{}, fmt.Errorf("%w: %q, not %q", ErrNamespaceMismatch, s, in.Namespace)
	}
	objLabels, id, recognised := recognise(t, obj, meta, in.Kind)
	if !recognised {
		return decoded{}, nil
	}
	if ns == "" {
		ns = in.Namespace
	}
	*e = evaluation{s: s, in: in, mode: m, env: envOf(in, ns),
		unpatched: Result{Object: in.Object, Recognised: true, Identity: id},
		sub: subject{id: id, kind: in.Kind, namespace: ns, labels: objLabels, namespaceLabels: in.NamespaceLabels,
			skip: objLabels[SkipLabel] == "true"}}
	e.all = strategy{s.selectLayers(&e.sub), allLayers}
	if m.update {
		e.all = strategy{e.all.layers.enforceKept(m.keep), enforceKeep(m.keep)}
	}
	return decoded{t, obj}, nil
}

// mayNotSettle reports whether a result may not be a fixed point of admission: policies were
// left out for the result's validity or what their labels select, kept below the others, or
// the namespace's left out as a whole, decided on the object as it came. A second admission
// reads the result as the object's own, on which such a policy may be harmless (the field or
// label it sets already there, another policy's value that made it invalid now the object's),
// and the policies kept may then order differently. Such a result is admitted again, as the
// API server's reinvocation would, until that changes nothing (readmit); most are a fixed
// point already, and the second admission only confirms it. Only objects with policies left
// out pay for it.
func mayNotSettle(out Result, unsettled, excluded bool) bool {
	return !out.Denied && (unsettled || excluded || len(out.Skipped) > 0 || len(out.selection.under) > 0 || out.Fallback == FallbackNamespace)
}

// checked is a result with the manager-aware checks' findings (reference §8), run on the very
// result the webhook and render return after Kueue's placement findings (applyLayers), at most
// MaxFindings in all, and without what the stages handed each other.
func (e *evaluation) checked(out Result) Result {
	out.Findings = append(out.Findings, checks.Run(e.in.Kind, e.unpatched.Identity, e.in.Object, out.patched, out.Applied)...)
	if len(out.Findings) > checks.MaxFindings {
		out.Findings = out.Findings[:checks.MaxFindings]
	}
	out.violations, out.selection, out.patched, out.labels = nil, layers{}, nil, nil
	out.Recognised, out.Identity = true, e.unpatched.Identity
	return out
}

// hasOps says whether a JSONPatch changes anything.
func hasOps(patch []byte) bool { return len(patch) > 0 && string(patch) != "[]" }
