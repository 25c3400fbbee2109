package celtext

import (
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

// TestGlobRegexpAgreesWithPathMatch: the expression matches what path.Match matches, for names
// and globs drawn from the characters that matter.
func TestGlobRegexpAgreesWithPathMatch(t *testing.T) {
	globs := []string{"*", "a*", "*-gpu-*", "a?c", "a.b", "x+y", "*/*", "", "(a)|b"}
	names := []string{"", "a", "abc", "a.b", "axb", "x+y", "xxy", "w-gpu-1", "a/b", "(a)|b", "b"}
	for _, g := range globs {
		re, ok := GlobRegexp([]string{g})
		require.True(t, ok, g)
		compiled := regexp.MustCompile(re)
		for _, n := range names {
			want, err := path.Match(g, n)
			require.NoError(t, err)
			require.Equal(t, want, compiled.MatchString(n), "glob %q, name %q", g, n)
		}
	}
	for _, g := range []string{"[ab]", `a\*`} {
		_, ok := GlobRegexp([]string{"a", g})
		require.False(t, ok, "%q is not translated", g)
	}
}

// TestSelector: one condition per requirement, in the selector's order, values sorted.
func TestSelector(t *testing.T) {
	tests := LabelTests{
		In:    func(k string, vals []string) string { return k + " in " + strings.Join(vals, ",") },
		Has:   func(k string) string { return "has " + k },
		Lacks: func(k string) string { return "lacks " + k },
	}
	sel, err := labels.Parse("a in (z,y), b, !c, d!=x")
	require.NoError(t, err)
	parts, err := Selector(sel, tests)
	require.NoError(t, err)
	require.Equal(t, []string{"a in y,z", "has b", "lacks c", "!d in x"}, parts)
	parts, err = Selector(labels.Everything(), tests)
	require.NoError(t, err)
	require.Empty(t, parts)
	parts, err = Selector(labels.Nothing(), tests)
	require.NoError(t, err)
	require.Equal(t, []string{"false"}, parts)
}
