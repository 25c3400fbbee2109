package policies

import (
	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/validity"
)

// The value of one evaluation (apply.go): how it runs, what it reads, and the strategies it
// tries.

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

// decoded is the input object in a tree, ready to be patched once.
type decoded struct {
	t   *jsontree.Tree
	obj map[string]any
}
