package policies

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/checks"
)

// The merge stage (doc.go), the entry of every admission: recognise the object, select its
// policies, apply their layers (layers_apply.go, merge.go) to the fixed point of the labels
// they set (fixedpoint.go, settle.go), fall back on fewer layers where they cannot all apply
// (admit.go), keep the result valid (keepvalid.go), admit the result again where policies were
// left out (readmit), and run the manager-aware checks on it. The evaluation's value is
// evaluation.go's.

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
		out, unsettled, excluded, err = e.settleSelection(e.all, out)
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

// maxReadmissions bounds readmit.
const maxReadmissions = 3

// readmit admits out's object again, as the API server's reinvocation would, until that
// changes nothing (at most maxReadmissions times), and returns what the last admission made of
// it, said against the object as it came: its Patch, the policies it applied, its warnings and
// fallback, what the admissions left out that it neither applied nor left out, and what they
// changed. When an admission fails or is denied, out stands.
func (e *evaluation) readmit(out Result) Result {
	m := e.mode
	m.readmitted = true
	for range maxReadmissions {
		cur, err := jsontree.Encode(out.patched)
		if err != nil {
			return out
		}
		again := e.in
		again.Object = cur
		r, err := e.s.apply(again, m)
		if err != nil || r.Denied || r.patched == nil || !hasOps(r.Patch) {
			return out
		}
		if out, err = e.readmitted(out, r); err != nil {
			return out
		}
	}
	return out
}

// readmitted is what a readmission r of out's object makes of it, said against the object as
// it came (readmit).
func (e *evaluation) readmitted(out, r Result) (Result, error) {
	cur, err := jsontree.Encode(r.patched)
	if err != nil {
		return out, err
	}
	t := jsontree.New()
	tree := t.Decode(json.RawMessage(cur))
	jsontree.ExpandAll(tree)
	patch, err := jsontree.Diff(t, json.RawMessage(e.in.Object), tree)
	if err != nil {
		return out, err
	}
	next := r
	next.Object, next.Patch = e.in.Object, patch
	if !e.mode.patchOnly {
		next.Object = cur
	}
	for _, sk := range out.Skipped {
		if !slices.Contains(r.Applied, sk.Policy) && !slices.ContainsFunc(r.Skipped, func(q Skipped) bool { return q.Policy == sk.Policy }) {
			next.Skipped = append(next.Skipped, sk)
		}
	}
	next.NoEffect = union(out.NoEffect, r.NoEffect)
	next.Adjusted = union(out.Adjusted, r.Adjusted)
	next.Findings = union(out.Findings, r.Findings)
	if e.in.Explain {
		next.Changes = orderChanges(append(slices.Clone(out.Changes), r.Changes...), r.Applied)
	}
	return next, nil
}

// union is a followed by the items of b it lacks.
func union[T comparable](a, b []T) []T {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
