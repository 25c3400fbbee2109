package property

import (
	"reflect"
	"testing"
)

// TestGenerator checks the generator without an API server: it makes documents that lint
// accepts often enough, in every scope and mode, and over the run it reaches every field of
// the policy schema (corev1.PodSpec and ServiceSpec, recursively).
func TestGenerator(t *testing.T) {
	// Pair i is a function of (seed, i) alone: a failure is reproducible from the two numbers.
	for i := range 50 {
		a, _ := generate(7, i, map[string]int{})
		b, _ := generate(7, i, map[string]int{})
		if !reflect.DeepEqual(a.docs, b.docs) || a.fx != b.fx || a.ns != b.ns {
			t.Fatalf("pair %d differs between two generations with the same seed", i)
		}
	}
	r := newRunner()
	const n = 3000
	for i := range n {
		cov := map[string]int{}
		p, discarded := generate(42, i, cov)
		for k, v := range cov {
			r.coverage[k] += v
		}
		r.stats.discardedDocs += discarded
		r.stats.acceptedDocs += len(p.docs)
		for _, d := range p.docs {
			r.stats.byScopeMode[string(d.scope)+"/"+docMode(d)]++
		}
	}
	t.Logf("documents accepted %d, discarded %d; by scope/mode %v", r.stats.acceptedDocs, r.stats.discardedDocs, r.stats.byScopeMode)
	missing := r.uncovered()
	t.Logf("never generated (%d of %d): %v", len(missing), len(r.coverage)+len(missing), missing)
	if r.stats.acceptedDocs < n {
		t.Errorf("only %d documents accepted for %d pairs", r.stats.acceptedDocs, n)
	}
	if len(missing) > 0 {
		t.Errorf("the generator never set %v: give their types a pool or required fields in gen_test.go", missing)
	}
	for _, k := range []string{"platform/default", "platform/merge", "platform/enforce", "namespace/default", "namespace/merge"} {
		if r.stats.byScopeMode[k] < n/20 {
			t.Errorf("only %d accepted %s documents", r.stats.byScopeMode[k], k)
		}
	}
}
