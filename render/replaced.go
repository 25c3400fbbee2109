package render

import "github.com/podpatch/podpatch/policies"

// Replaced says, for each change of an explained Result (by its index in changes), which of its
// fields a later policy changed again, and which policy that was (the last one): a value this
// policy set that a higher layer then replaced, as a namespace policy's label that a platform
// enforce policy overrides. `render --explain` and `podpatch explain` mark them, so that neither
// says a policy's value is in the object when it is not. A field counts as changed
// again when a later change names it, a field inside it, or a field it lies inside. Linear in
// the fields: each is looked up by itself and its prefixes.
func Replaced(changes []policies.Change) []map[string]*policies.Policy {
	out := make([]map[string]*policies.Policy, len(changes))
	later := map[string]*policies.Policy{} // a field a later change names, and every prefix of it
	exact := map[string]*policies.Policy{} // the fields later changes name
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		for _, f := range c.Fields {
			by := later[f] // f itself, or a field inside it
			for p := range pathPrefixes(f) {
				if by == nil {
					by = exact[p] // a later change replaced a field f lies inside
				}
			}
			if by != nil {
				if out[i] == nil {
					out[i] = map[string]*policies.Policy{}
				}
				out[i][f] = by
			}
		}
		for _, f := range c.Fields {
			if _, ok := exact[f]; !ok {
				exact[f] = c.Policy
			}
			if _, ok := later[f]; !ok {
				later[f] = c.Policy
			}
			for p := range pathPrefixes(f) {
				if _, ok := later[p]; !ok {
					later[p] = c.Policy
				}
			}
		}
	}
	return out
}

// pathPrefixes yields the proper prefixes of a field path that are fields themselves: before
// each '.' or '[' outside brackets (spec.containers[worker].resources: spec, spec.containers,
// spec.containers[worker]).
func pathPrefixes(path string) func(func(string) bool) {
	return func(yield func(string) bool) {
		depth := 0
		for i := 0; i < len(path); i++ {
			switch path[i] {
			case '[':
				if depth == 0 && i > 0 && !yield(path[:i]) {
					return
				}
				depth++
			case ']':
				depth--
			case '.':
				if depth == 0 && i > 0 && !yield(path[:i]) {
					return
				}
			}
		}
	}
}
