package policies

// deepCopy copies a JSON tree as it is, nulls included.
func deepCopy(v any) any {
	out, _ := copyTree(v, false)
	return out
}

// copyTree copies a tree and counts the nodes it copied.
func copyTree(v any, dropNulls bool) (any, int) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		n := 1
		for k, x := range t {
			if x != nil || !dropNulls {
				c, cn := copyTree(x, dropNulls)
				out[k], n = c, n+cn
			}
		}
		return out, n
	case []any:
		out := make([]any, len(t))
		n := 1
		for i, x := range t {
			c, cn := copyTree(x, dropNulls)
			out[i], n = c, n+cn
		}
		return out, n
	default:
		return v, 1
	}
}
