// Package managers runs the real cluster managers — the KubeRay operator, the Dask Kubernetes
// operator, spark-submit and Flink's native Kubernetes client — against a real kube-apiserver
// with kube-controller-manager and podpatch in front, and checks that every Pod and Service they
// generate is stored exactly as `podpatch render` predicts from an unpatched control copy.
//
// The lab runs next to them: kube-scheduler binds the Pods to kwok's Nodes of cluster.LabPools
// (GKE, EKS and Karpenter-shaped pools) and kwok brings them to Running, so that each test reads
// which pool the policies put every Pod on (placement_test.go).
//
// Each test creates the same compute cluster twice: in a namespace podpatch serves, and in a
// control namespace that the webhook configuration's namespaceSelector excludes. The control
// copy is the generator's unpatched object; rewritten to the served namespace (and to that
// copy's generated names), rendered with the policies and defaulted by the API server
// (server-side dry run), it must equal what the API server stored.
//
// The suite needs bin/kube-apiserver, bin/etcd, bin/kube-controller-manager, bin/kube-scheduler,
// bin/kwok and its stages (hack/build-control-plane.sh), bin/ray-operator and a virtualenv with the Python and Java
// managers (hack/build-managers.sh); `make test-managers` builds them and sets
// PODPATCH_MANAGERS_VENV. Without PODPATCH_MANAGERS=1 the package skips, so `go test ./...`
// stays fast.
package managers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/podpatch/podpatch/test/cluster"
)

// env is the shared control plane, controller manager and podpatch.
var env *harness

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Getenv("PODPATCH_MANAGERS") != "1" {
		fmt.Println("managers: skipped (run `make test-managers`, or set PODPATCH_MANAGERS=1 after hack/build-managers.sh)")
		return 0
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "managers: "+format+"\n", args...)
		return 1
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return fail("%v", err)
	}
	tmp, err := os.MkdirTemp("", "podpatch-managers-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(tmp)
	binDir := filepath.Join(root, "bin")
	cp, err := cluster.Start(binDir, tmp)
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "managers: stop control plane: %v\n", err)
		}
	}()
	kcm, err := cp.StartControllerManager(binDir, nil)
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		if err := kcm.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "managers: stop kube-controller-manager: %v\n", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := startLab(ctx, cp, binDir)
	if err != nil {
		return fail("lab: %v", err)
	}
	defer func() {
		if err := l.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "managers: stop the lab: %v\n", err)
		}
	}()
	h, err := newHarness(ctx, root, binDir, tmp, cp)
	if err != nil {
		return fail("%v", err)
	}
	defer h.close()
	env = h
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "kube-controller-manager output (tail):\n%s\n", tail(kcm.Output.String(), 4000))
		fmt.Fprintf(os.Stderr, "kube-scheduler output (tail):\n%s\n", tail(l.scheduler.Output.String(), 4000))
		fmt.Fprintf(os.Stderr, "kwok output (tail):\n%s\n", tail(l.kwok.Output.String(), 4000))
	}
	return code
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
