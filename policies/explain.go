package policies

// diffPaths lists the paths at which two JSON trees differ, for `render --explain`: leaves of
// objects, lists of named objects by item name, other lists as a whole, values compared
// exactly (DiffPaths with its zero options).
func diffPaths(before, after any) []string {
	return DiffPaths(before, after, PathDiffOptions{})
}
