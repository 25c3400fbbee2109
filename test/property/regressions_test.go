package property

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
)

// regression is one class of refusal the property test found (issue 20), as a fixed case: a
// policy set that lint accepts, a manager object from the fixtures that the API server accepts,
// and the expectation that the patched object is accepted too (SPEC §8). Each class is
// described, with the server's message and the suggested fix, in the findings the lead keeps
// (docs of issue 20).
type regression struct {
	// class names the kind of refusal; pendingEngineFix refers to it.
	class string
	// fixture is the object, relative to the repository root; ns the namespace it is created in.
	fixture, ns string
	// platform and namespace are the platform's and the namespace's policies: the spec of
	// each PodTemplatePatch document, in YAML (they are named p0, p1, … in order).
	platform, namespace []string
}

// pendingEngineFix lists the classes the engine does not handle yet: their cases are skipped.
// The lead removes a class once the engine fix for it is merged; a case that passes while
// listed says so in its skip message.
var pendingEngineFix = []string{}

// regressions are the classes found so far, one case each (more where a class has variants).
var regressions = []regression{}

// TestRegressions runs every regression case: lint accepts the policies, they match the
// object, the API server accepts the object unpatched, and it must accept it patched.
func TestRegressions(t *testing.T) {
	needCluster(t)
	names := map[string]bool{}
	for _, rc := range regressions {
		name := rc.class + "/" + rc.fixture + "@" + rc.ns
		require.False(t, names[name], "duplicate case %s", name)
		names[name] = true
		t.Run(name, func(t *testing.T) {
			p := regressionPair(t, rc)
			o := apply(p)
			require.NoError(t, o.engineErr)
			require.NotNil(t, o.patched, "the policies must match the object")
			require.NoError(t, dryRun(t, p.fx.instance(p.ns)), "the control (unpatched object) must be accepted")
			err := dryRun(t, o.patched)
			if slices.Contains(pendingEngineFix, rc.class) {
				if err == nil {
					t.Skipf("pending engine fix: %s (passes now: remove it from pendingEngineFix)", rc.class)
				}
				t.Skipf("pending engine fix: %s (%v)", rc.class, err)
			}
			require.NoError(t, err, "the patched object must be accepted (SPEC §8)\npodpatch's patch: %s", o.jsonPatch)
		})
	}
	for _, c := range pendingEngineFix {
		found := slices.ContainsFunc(regressions, func(rc regression) bool { return rc.class == c })
		require.True(t, found, "pendingEngineFix names %q, which no case has", c)
	}
}

// regressionPair builds the pair of a case, requiring lint to accept its documents.
func regressionPair(t *testing.T, rc regression) pair {
	t.Helper()
	idx := slices.IndexFunc(fixtures, func(f *fixture) bool { return f.path == rc.fixture })
	require.GreaterOrEqual(t, idx, 0, "fixture %s", rc.fixture)
	p := pair{fx: fixtures[idx], ns: rc.ns}
	for _, part := range []struct {
		scope policies.Scope
		specs []string
	}{{policies.ScopePlatform, rc.platform}, {policies.ScopeNamespace, rc.namespace}} {
		for _, text := range part.specs {
			var spec map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(text), &spec), "spec %s", text)
			p.docs = append(p.docs, scopedDoc{part.scope, map[string]any{
				"apiVersion": policies.APIVersion, "kind": policies.DocumentKind,
				"metadata": map[string]any{"name": docName(len(p.docs))}, "spec": spec,
			}})
		}
	}
	_, probs := parseDocs(p.ns, p.docs)
	require.Empty(t, probs, "lint must accept the case's policies")
	return p
}
