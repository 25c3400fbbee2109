package policies

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// closingCluster is a cluster whose every lookup after the first `after` closes done: the
// request budget runs out in the middle of the leave-out search, at a point the test knows.
type closingCluster struct {
	validity.Lookups
	after int
	calls int
	done  chan struct{}
	once  sync.Once
}

func (c *closingCluster) tick() {
	if c.calls++; c.calls > c.after {
		c.once.Do(func() { close(c.done) })
	}
}

func (c *closingCluster) PriorityClass(n string) (validity.PriorityClassInfo, validity.Presence) {
	c.tick()
	return c.Lookups.PriorityClass(n)
}

func (c *closingCluster) ServiceAccount(ns, n string) validity.Presence {
	c.tick()
	return c.Lookups.ServiceAccount(ns, n)
}

// TestLeaveOutWithinBudget: when the request budget runs out while podpatch looks for the
// policies to leave out, what it has kept so far (highest precedence first: enforce) applies
// and the rest is left out with rule "budget" — the object is never admitted without the
// platform's enforce policies because someone made the search long. The budget is made to run
// out at every lookup of the search in turn.
func TestLeaveOutWithinBudget(t *testing.T) {
	set := platformSet(t,
		"mode: enforce\ntemplate: {metadata: {labels: {baseline: applied}}}",
		"template: {spec: {priorityClassName: missing}}", // refused: no such class
		"template: {metadata: {labels: {team: a}}}",
	)
	js := fixtureJSON(t, "dask-operator/worker-pod.yaml", nil)
	cluster := &fakeCluster{accounts: map[string]bool{}}

	full, err := set.Apply(Input{Kind: profiles.KindPod, Object: js, Namespace: "default", Lookups: cluster})
	require.NoError(t, err)
	require.Len(t, full.Skipped, 1)
	require.Equal(t, validity.RulePriorityClassNotFound, full.Skipped[0].Violation.Rule)

	budgetSkips, enforceKeptAlone := 0, false
	for after := 0; after < 64; after++ {
		c := &closingCluster{Lookups: cluster, after: after, done: make(chan struct{})}
		in := Input{Kind: profiles.KindPod, Object: js, Namespace: "default", Lookups: c, Done: c.done}
		res, err := set.Apply(in)
		if err != nil {
			// Out before the first check finished: the webhook admits the object unchanged.
			require.ErrorIs(t, err, ErrStopped)
			continue
		}
		require.Empty(t, freshViolations(Input{Kind: profiles.KindPod, Object: js, Namespace: "default", Lookups: cluster}, res.Object))
		labels := mapOf(mapOf(objectOf(t, res.Object)["metadata"])["labels"])
		rules := map[string]string{}
		for _, s := range res.Skipped {
			rules[s.Policy.Name] = s.Violation.Rule
			if s.Violation.Rule == validity.ReasonBudget {
				budgetSkips++
			}
		}
		if res.Changed {
			require.Equal(t, "applied", labels["baseline"], "after %d: a patched object carries the enforce policy", after)
		}
		if labels["baseline"] == "applied" && labels["team"] == nil && rules["p3"] == validity.ReasonBudget {
			enforceKeptAlone = true
		}
		if !stopped(c.done) {
			require.Equal(t, full.Object, res.Object, "a budget that lasts gives the full result")
			break
		}
	}
	require.True(t, enforceKeptAlone, "some budget runs out after the enforce policy was kept")
	require.Positive(t, budgetSkips)
}
