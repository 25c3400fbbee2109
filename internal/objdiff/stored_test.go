package objdiff

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPathsAsStored pins the audit's comparison rules (audit/normalise_test.go's TestFieldDiff
// before the comparison moved here).
func TestPathsAsStored(t *testing.T) {
	for _, c := range []struct {
		name       string
		live, want string
		paths      []string
	}{
		{"equal quantities", `{"r":{"limits":{"cpu":"1"}}}`, `{"r":{"limits":{"cpu":"1000m"}}}`, nil},
		{"number quantity", `{"r":{"requests":{"cpu":"2"}}}`, `{"r":{"requests":{"cpu":2}}}`, nil},
		{"different quantities", `{"r":{"limits":{"cpu":"1"}}}`, `{"r":{"limits":{"cpu":"1001m"}}}`, []string{"r.limits.cpu"}},
		{"quantity-looking string elsewhere", `{"labels":{"size":"1"}}`, `{"labels":{"size":"1000m"}}`, []string{"labels.size"}},
		{"missing value", `{"spec":{}}`, `{"spec":{"hostNetwork":true}}`, []string{"spec.hostNetwork"}},
		{"missing object by its members", `{"metadata":{}}`, `{"metadata":{"annotations":{"a":"1","b":{"c":"2"}}}}`, []string{"metadata.annotations.a", "metadata.annotations.b.c"}},
		{"named items", `{"c":[{"name":"a","x":1},{"name":"b"}]}`, `{"c":[{"name":"a","x":2},{"name":"b"},{"name":"s"}]}`, []string{"c[a].x", "c[s]"}},
		{"other lists whole", `{"t":[{"k":"a"}]}`, `{"t":[{"k":"a"},{"k":"b"}]}`, []string{"t"}},
		{"numbers by value", `{"n":30}`, `{"n":30.0}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			live, err := decode([]byte(c.live))
			require.NoError(t, err)
			want, err := decode([]byte(c.want))
			require.NoError(t, err)
			require.Equal(t, c.paths, Paths(live, want, AsStored))
		})
	}
}

// TestCompare: two objects compare in the API server's encoding (a zero value of an omitempty
// field dropped, quantities canonical, pointers' false kept) and without the ignored annotation,
// which takes the annotations with it when it was their only member.
func TestCompare(t *testing.T) {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"%s},"spec":{"hostNetwork":false,
 "containers":[{"name":"c","resources":{"limits":{"cpu":"%s"}}%s}]}}`
	obj := func(annotations, cpu, extra string) []byte { return []byte(fmt.Sprintf(pod, annotations, cpu, extra)) }
	changes, err := Compare("Pod", obj("", "1", ""), obj(`,"annotations":{"podpatch.io/applied":"x"}`, "1000m", ""), "podpatch.io/applied")
	require.NoError(t, err)
	require.Empty(t, changes)
	changes, err = Compare("Pod", obj(`,"annotations":{"a":"1"}`, "1", ""), obj(`,"annotations":{"a":"1","podpatch.io/applied":"x"}`, "2",
		`,"securityContext":{"allowPrivilegeEscalation":false}`), "podpatch.io/applied")
	require.NoError(t, err)
	require.Equal(t, []Change{
		{Path: "spec.containers[c].resources.limits.cpu", Before: "1", After: "2"},
		{Path: "spec.containers[c].securityContext.allowPrivilegeEscalation", After: false},
	}, changes)
	// Another kind is compared as it is: the zero value stays, quantities compare by value.
	changes, err = Compare("ConfigMap", obj("", "1", ""), obj("", "1000m", ""), "podpatch.io/applied")
	require.NoError(t, err)
	require.Empty(t, changes)
	_, err = Compare("Pod", []byte("{"), obj("", "1", ""), "")
	require.Error(t, err)
}
