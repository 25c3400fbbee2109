package yamljson

import "math"

// Prescan is prescan without a depth bound, for the tests of package yamljson_test.
func Prescan(text []byte, max int) (count, line int) {
	count, line, _ = prescan(text, max, math.MaxInt)
	return count, line
}
