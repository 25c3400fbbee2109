package audit

import (
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// fieldDiff lists the paths at which the live object and the one the policies produce
// differ, in the form of `render --explain` (policies.DiffPaths): object keys joined by dots,
// items of lists of named objects (containers, env, volumes) by [name], other lists as a whole.
//
// Resource quantities compare by value (the API server stores `1000m` as `1`), numbers too;
// an object only one side has is recorded by its members; other lists compare item by item.
// Check gives both objects the API server's encoding first (canonical).
func fieldDiff(live, want any) []string {
	return policies.DiffPaths(live, want, DiffOptions)
}

// DiffOptions are the audit's choices of policies.DiffPaths: values compared as the API
// server stores them.
var DiffOptions = policies.PathDiffOptions{ByValue: true, DescendMissing: true, ListItems: true}

// Compare lists where two objects of a kind differ, with the value each has there, as the
// audit compares them (reference §7): both in the API server's encoding (`1000m` is `1`,
// zero values of omitempty fields dropped), the provenance annotation left out, paths as
// fieldDiff names them. `podpatch diff` (reference §10) shows its result as old → new.
func Compare(kind profiles.Kind, before, after []byte) ([]policies.PathChange, error) {
	b, err := Canonical(kind, before)
	if err != nil {
		return nil, err
	}
	a, err := Canonical(kind, after)
	if err != nil {
		return nil, err
	}
	dropProvenance(b)
	dropProvenance(a)
	return policies.DiffChanges(b, a, DiffOptions), nil
}
