package policies

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The seeds of the engine's seeded property tests (docs/development.md, "The property tests'
// seeds"). Each such test runs:
//
//   - the commit's seed: PODPATCH_PROPERTY_SEED (`make test` derives it from the commit, so a
//     failure reproduces from the commit), else the test's own fixed seed; every draw of it;
//   - its regression seeds, testdata/regression-seeds/<test>.txt: a seed and a draw that once
//     failed, one a line (`SEED DRAW # what failed`); only that draw is checked, the draws
//     before it generated and not applied, so that the file costs milliseconds;
//   - with PODPATCH_PROPERTY_SEEDS=N, N consecutive seeds from the commit's, every draw of each,
//     in parallel subtests (the long run, hack/property-long.sh), instead of the commit's alone.
//
// PODPATCH_PROPERTY_DRAW=D checks the commit's seed at draw D only, as a regression line does.

// seedCase is one run of a seeded property test: a seed, and the draw to check (-1: all).
type seedCase struct {
	seed uint64
	draw int
	why  string // a regression seed's comment
}

// propertySeeds lists the runs of the seeded property test named test, whose own seed is
// fallback.
func propertySeeds(t *testing.T, test string, fallback uint64) (commit []seedCase, regressions []seedCase) {
	t.Helper()
	seed := fallback
	if s := os.Getenv("PODPATCH_PROPERTY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "PODPATCH_PROPERTY_SEED")
		seed = v
	}
	t.Logf("PODPATCH_PROPERTY_SEED=%d", seed)
	draw := -1
	if s := os.Getenv("PODPATCH_PROPERTY_DRAW"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "PODPATCH_PROPERTY_DRAW")
		draw = v
	}
	n := uint64(1)
	if s := os.Getenv("PODPATCH_PROPERTY_SEEDS"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "PODPATCH_PROPERTY_SEEDS")
		n = max(v, 1)
	}
	for i := range n {
		commit = append(commit, seedCase{seed: seed + i, draw: draw})
	}
	return commit, readRegressionSeeds(t, test)
}

// readRegressionSeeds reads testdata/regression-seeds/<test>.txt; none when it does not exist.
func readRegressionSeeds(t *testing.T, test string) []seedCase {
	t.Helper()
	path := filepath.Join("testdata", "regression-seeds", test+".txt")
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []seedCase
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text, why, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		require.Len(t, fields, 2, "%s:%d: SEED DRAW # comment", path, line)
		seed, err := strconv.ParseUint(fields[0], 10, 64)
		require.NoError(t, err, "%s:%d: the seed", path, line)
		draw, err := strconv.Atoi(fields[1])
		require.NoError(t, err, "%s:%d: the draw", path, line)
		out = append(out, seedCase{seed: seed, draw: draw, why: strings.TrimSpace(why)})
	}
	require.NoError(t, sc.Err())
	return out
}

// runSeeds runs check for the commit's seeds and the regression seeds, each in a subtest named
// by its seed (and draw), so that one failing seed does not hide the next; the long run's
// seeds in parallel.
func runSeeds(t *testing.T, test string, fallback uint64, check func(t *testing.T, c seedCase)) {
	commit, regressions := propertySeeds(t, test, fallback)
	parallel := len(commit) > 1
	for _, c := range commit {
		t.Run(c.name(), func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			check(t, c)
		})
	}
	for _, c := range regressions {
		t.Run("regression/"+c.name(), func(t *testing.T) {
			if c.why != "" {
				t.Logf("once failed: %s", c.why)
			}
			check(t, c)
		})
	}
}

func (c seedCase) name() string {
	if c.draw < 0 {
		return fmt.Sprintf("seed=%d", c.seed)
	}
	return fmt.Sprintf("seed=%d/draw=%d", c.seed, c.draw)
}

// reproduce is the command line that checks one draw of a seed again.
func (c seedCase) reproduce(test string, draw int) string {
	return fmt.Sprintf("reproduce: cd policies && PODPATCH_PROPERTY_SEED=%d PODPATCH_PROPERTY_DRAW=%d go test -run '%s' .", c.seed, draw, test)
}
