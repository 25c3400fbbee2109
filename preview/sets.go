// Package preview is `podpatch diff` (reference §10): what a change to the policy ConfigMaps
// would do to objects, before it is pushed. The base set is the policies live in the cluster
// (or files: a checkout of the target branch), the new set the base with the changed
// ConfigMaps; each object is patched by both with the engine the webhook runs
// (policies.Set.Apply), the results compared as the audit compares (objdiff.Compare), and the
// §8 findings, left-out policies and placement (package placement) of both told apart.
//
// sets.go builds the two sets, object.go previews one object, report.go gathers the results
// into bounded groups by compute cluster, print.go writes them (table, JSON, YAML, Markdown).
package preview

import (
	"fmt"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/policies"
)

// Sets are the two policy sets a preview compares.
type Sets struct {
	Base, New *policies.Set
	// Changed are the ConfigMaps (namespace/name) the change adds, replaces or deletes: the
	// policies of their base versions are the ones whose traces a live object may carry.
	Changed map[string]bool
	// admitting are the base policies, by provenance entry without @resourceVersion: those a
	// live object's provenance names admitted it.
	admitting map[string]*policies.Policy
}

// NewSets builds the base set from base, and the new set from base with every ConfigMap of
// changes replacing the one of the same namespace/name (or added) and the ConfigMaps named in
// deletes ("namespace/name") left out (reference §10). A base ConfigMap that does not compile
// is left out of both with a problem in baseProblems (the webhook serves its last good version,
// which a reader cannot know); a changed one that does not compile is in problems, and the
// preview cannot be made.
func NewSets(base, changes []policies.SourcedConfigMap, deletes []string, opts policies.Options) (s Sets, problems, baseProblems []policies.FileProblems, err error) {
	s.Changed = map[string]bool{}
	key := func(c policies.SourcedConfigMap) string { return c.ConfigMap.Namespace + "/" + c.ConfigMap.Name }
	inBase := map[string]bool{}
	for _, c := range base {
		inBase[key(c)] = true
	}
	for _, d := range deletes {
		ns, name, ok := strings.Cut(d, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return s, nil, nil, fmt.Errorf("--delete %q: want NAMESPACE/NAME", d)
		}
		if !inBase[d] {
			return s, nil, nil, fmt.Errorf("--delete %s: no such policy ConfigMap in the base", d)
		}
		s.Changed[d] = true
	}
	for _, c := range changes {
		if slices.Contains(deletes, key(c)) {
			return s, nil, nil, fmt.Errorf("ConfigMap %s is both changed (%s) and deleted", key(c), c.File)
		}
		s.Changed[key(c)] = true
	}
	s.Base, baseProblems = policies.Compile(base, opts)
	s.admitting = map[string]*policies.Policy{}
	for _, c := range base {
		ps, errs := policies.ParseConfigMap(c.ConfigMap, opts)
		if len(errs) > 0 {
			continue // left out of the base: nothing of it to take out
		}
		for _, p := range ps {
			s.admitting[refOf(p)] = p
		}
	}
	var next []policies.SourcedConfigMap
	for _, c := range base {
		if !s.Changed[key(c)] {
			next = append(next, c)
		}
	}
	next = append(next, changes...)
	s.New, problems = policies.Compile(next, opts)
	// A base ConfigMap that failed is left out of the new set too: it is no part of the change.
	var onlyChanged []policies.FileProblems
	for _, p := range problems {
		if s.Changed[p.ConfigMap] || !hasProblem(baseProblems, p.ConfigMap) {
			onlyChanged = append(onlyChanged, p)
		}
	}
	return s, onlyChanged, baseProblems, nil
}

func hasProblem(fps []policies.FileProblems, name string) bool {
	for _, p := range fps {
		if p.ConfigMap == name {
			return true
		}
	}
	return false
}

// refOf is a policy's provenance entry without its @resourceVersion: a policy read from a file
// has none, the same policy live has one.
func refOf(p *policies.Policy) string {
	ref, _, _ := strings.Cut(p.Ref, "@")
	return ref
}
