package versions

// Learner is a Server that has asked its API server what it does with the fields of Fields
// (internal/references' probe: a server-side dry-run of each field's Sample), so that a
// cluster whose feature gates differ from its version's defaults (an alpha gate on, a beta
// gate off, a managed cloud's choice) is served as it is, not as the table assumes.
type Learner interface {
	Server
	// FieldOutcome is what the API server did with f at the version KubeVersion reports;
	// false: not known (not asked yet, or the answer said nothing of f), the table answers.
	FieldOutcome(f Field) (Outcome, bool)
}

// OutcomeOf is what the API server of s, at version v, does with f: what s learned from it if
// s is a Learner that knows, else the table's answer, f.At(v) (Kept on a version podpatch does
// not support: it has no table for it).
func OutcomeOf(s Server, f Field, v Version) Outcome {
	if l, ok := s.(Learner); ok {
		if o, known := l.FieldOutcome(f); known {
			return o
		}
	}
	if !v.Supported() {
		return Kept // no table for a version podpatch does not support: only what was learned
	}
	return f.At(v)
}

// AffectedOn is Affected for the API server of s, at version v: each field's outcome is
// OutcomeOf, what the server was seen to do before what the table says of v.
func AffectedOn(kind string, patch map[string]any, s Server, v Version) []Effect {
	var out []Effect
	for _, f := range Fields {
		if f.Kind != kind {
			continue
		}
		at, ok := f.find(patch) // first: most patches set none of the fields
		if !ok {
			continue
		}
		if o := OutcomeOf(s, f, v); o != Kept {
			out = append(out, Effect{Field: f, Outcome: o, At: at})
		}
	}
	return out
}
