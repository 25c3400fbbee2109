package audit

import "github.com/podpatch/podpatch/policies"

// fieldDiff lists the paths at which the live object and the one the policies produce
// differ, in the form of `render --explain` (policies.DiffPaths): object keys joined by dots,
// items of lists of named objects (containers, env, volumes) by [name], other lists as a whole.
//
// Resource quantities compare by value (the API server stores `1000m` as `1`), numbers too;
// an object only one side has is recorded by its members; other lists compare item by item.
// Check gives both objects the API server's encoding first (canonical).
func fieldDiff(live, want any) []string {
	return policies.DiffPaths(live, want, auditDiff)
}

// auditDiff are the audit's choices of policies.DiffPaths.
var auditDiff = policies.PathDiffOptions{ByValue: true, DescendMissing: true, ListItems: true}
