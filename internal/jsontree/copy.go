package jsontree

// Copy copies a decoded JSON tree (maps, lists, scalars; members still raw are shared, they are
// never changed in place) and counts the nodes it copied. With dropNulls, null members of
// objects are left out: what a merge writes into an object, where a null has nothing to remove.
func Copy(v any, dropNulls bool) (any, int) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		n := 1
		for k, x := range t {
			if x != nil || !dropNulls {
				c, cn := Copy(x, dropNulls)
				out[k], n = c, n+cn
			}
		}
		return out, n
	case []any:
		out := make([]any, len(t))
		n := 1
		for i, x := range t {
			c, cn := Copy(x, dropNulls)
			out[i], n = c, n+cn
		}
		return out, n
	default:
		return v, 1
	}
}
