package policies

import (
	"fmt"
	"strings"

	"github.com/podpatch/podpatch/policies/profiles"
)

// The fixed point of the labels policies set (reference §3): a second admission of the result
// selects the same policies and changes nothing.

// MaxSelectionRounds bounds how often one admission re-selects policies because labels that
// policies set make other policies' selectors match (or stop matching).
const MaxSelectionRounds = 4

// fixedPoint applies the layers and, while the labels they set change which policies match,
// selects again and applies the new selection to the object as it came in, so that a second
// admission of the result selects the same policies and changes nothing. Beyond
// MaxSelectionRounds the selection oscillates: the object is not patched (admit then tries
// without namespace policies, then the enforce layer alone). st.keep restricts every selection
// to the layers of such a fallback.
func (e *evaluation) fixedPoint(st strategy, first *decoded) (Result, error) {
	l, selected := st.layers, e.sub.labels // the labels l was selected with
	for round := 1; ; round++ {
		res, labels, err := e.applyLayers(first, l)
		first = nil
		if err != nil || (round == 1 && !l.any(func(p *Policy) bool { return setsLabels(p, e.in.Kind) })) {
			// Without labels set by policies, the first selection cannot change. A later one
			// that sets none leaves the object's own labels, which select the first selection
			// again: selectionReads compares the labels this one was selected with.
			return res, err
		}
		if !e.s.selectionReads(&e.sub, selected, labels) {
			return res, nil // nor when no selector reads the labels they changed
		}
		next := e.s.selectLayers(e.sub.relabelled(labels))
		next = st.keep(&next)
		if next.equal(l) {
			return res, nil
		}
		if round == MaxSelectionRounds {
			return Result{Object: e.in.Object}, fmt.Errorf("%s not patched: %w for more than %d rounds (their selectors contradict each other)",
				strings.ToLower(string(e.in.Kind)), ErrSelectionDiverges, MaxSelectionRounds)
		}
		l, selected = next, labels
	}
}

// setsLabels reports whether a policy sets or removes a label of a kind of object.
func setsLabels(p *Policy, kind profiles.Kind) bool {
	meta, ok := p.Patch(kind)["metadata"].(map[string]any)
	return ok && meta["labels"] != nil
}
