// Package e2e runs podpatch behind a real kube-apiserver and etcd (built from source into bin/
// by `make control-plane`), installs the webhook configurations from manifests/ with only the
// client config rewritten to reach the local server, and checks what the API server stores.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/test/cluster"
)

// The shared control plane and the podpatch binary under test.
var (
	repoRoot    string
	restConfig  *rest.Config
	k8s         client.Client
	scheme      *runtime.Scheme
	kubeconfig  string
	podpatchBin string
	// controlPlane also holds the client CA of the certificate the API server presents to
	// webhooks, and makes kubeconfigs for less privileged users.
	controlPlane *cluster.ControlPlane
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
		return 1
	}
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		return fail("%v", err)
	}
	// `go test ./...` on a fresh clone has no control plane: skip, saying how to get one.
	// `make test` sets PODPATCH_E2E=required, so there a missing control plane fails.
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(repoRoot, "bin", bin)); err != nil {
			if os.Getenv("PODPATCH_E2E") == "required" {
				return fail("bin/%s: %v (make control-plane builds it)", bin, err)
			}
			fmt.Fprintf(os.Stderr, "e2e: skipped: bin/%s is missing; `make control-plane` builds the control plane, `make test` runs these tests\n", bin)
			return 0
		}
	}
	tmp, err := os.MkdirTemp("", "podpatch-e2e-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(tmp)
	crds, err := cluster.CertManagerCRDs()
	if err != nil {
		return fail("cert-manager CRDs: %v", err)
	}
	cp, err := cluster.Start(filepath.Join(repoRoot, "bin"), tmp, crds)
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stop control plane: %v\n", err)
		}
	}()
	controlPlane, restConfig, k8s, scheme, kubeconfig = cp, cp.Config, cp.Client, cp.Scheme, cp.Kubeconfig
	podpatchBin = filepath.Join(tmp, "podpatch")
	if err := cluster.BuildPodpatch(repoRoot, podpatchBin); err != nil {
		return fail("build podpatch: %v", err)
	}
	for _, ns := range []string{"dask-gateway", "spark-jobs", "podpatch-system", "team-a"} {
		obj := &corev1.Namespace{}
		obj.Name = ns
		if err := k8s.Create(contextBackground(), obj); err != nil {
			return fail("namespace %s: %v", ns, err)
		}
	}
	return m.Run()
}

// execOutput runs a command and returns its standard output.
func execOutput(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).Output()
}
