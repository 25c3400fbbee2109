// Package faults is podpatch's fault tier: a real kube-apiserver, etcd and
// kube-controller-manager, 2–3 `podpatch serve` replicas built from this tree behind an in-test
// load balancer, continuous creation of Dask, Spark, Ray and Flink Pods and Services with policy
// churn, and, one at a time, the faults a production cluster sees: restarts of kube-apiserver
// and etcd, an etcd compaction that makes the policy informer relist, replicas killed, the
// leader killed, rolling updates under failurePolicy Fail and Ignore, the API server
// unreachable from podpatch, policy bursts, a certificate rotation, and a soak. For each fault
// it counts admissions attempted, failed and admitted unpatched, and checks that every patched
// object is what policies.Set.Apply (`podpatch render`) makes of it under the policy versions its
// podpatch.io/applied annotation names.
//
// It runs only with PODPATCH_FAULTS set: `short` (inside `make test`) or `long`
// (`make test-faults`); see docs/faults.md.
package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/podpatch/podpatch/test/cluster"
)

var (
	repoRoot    string
	podpatchBin string
	cp          *cluster.ControlPlane
	long        bool
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "faults: "+format+"\n", args...)
		return 1
	}
	switch os.Getenv("PODPATCH_FAULTS") {
	case "":
		fmt.Fprintln(os.Stderr, "faults: skipped: set PODPATCH_FAULTS=short (make test) or long (make test-faults)")
		return 0
	case "short":
	case "long":
		long = true
	default:
		return fail("PODPATCH_FAULTS=%q: want short or long", os.Getenv("PODPATCH_FAULTS"))
	}
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		return fail("%v", err)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(repoRoot, "bin", bin)); err != nil {
			return fail("bin/%s: %v (make control-plane builds it)", bin, err)
		}
	}
	tmp, err := os.MkdirTemp("", "podpatch-faults-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(tmp)
	// The binary under test is built from this tree, never a stale bin/podpatch.
	podpatchBin = filepath.Join(tmp, "podpatch")
	if err := cluster.BuildPodpatch(repoRoot, podpatchBin); err != nil {
		return fail("build podpatch: %v", err)
	}
	if cp, err = cluster.StartRestartable(filepath.Join(repoRoot, "bin"), tmp); err != nil {
		return fail("%v", err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "faults: stop control plane: %v\n", err)
		}
	}()
	return m.Run()
}
