// Package chart tests the Helm chart in manifests/chart/podpatch with the Helm Go SDK against a
// real kube-apiserver (test/cluster): the chart passes `helm lint`'s rules and every object
// rendered under a matrix of values is created with server-side dry-run; with default values the
// chart renders what kustomize builds from manifests/overlays, and with the values that stand
// for manifests/components what an overlay with those components builds; a release is
// installed, patched Pods through podpatch, tested (`helm test`), upgraded and uninstalled with
// its hooks, each TLS mode; and every metric the dashboard and alerts use exists on a running
// podpatch or kube-apiserver. It is a module of its own so that Helm's and Prometheus'
// dependencies stay out of podpatch's go.mod.
package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/test/cluster"
)

// The shared control plane and the podpatch binary under test.
var (
	repoRoot    string
	chartDir    string
	restConfig  *rest.Config
	k8s         client.Client
	kubeconfig  string
	podpatchBin string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "chart: "+format+"\n", args...)
		return 1
	}
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		return fail("%v", err)
	}
	chartDir = filepath.Join(repoRoot, "manifests", "chart", "podpatch")
	tmp, err := os.MkdirTemp("", "podpatch-chart-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(tmp)
	certManager, err := cluster.CertManagerCRDs()
	if err != nil {
		return fail("cert-manager CRDs: %v", err)
	}
	cp, err := cluster.Start(filepath.Join(repoRoot, "bin"), tmp, certManager, filepath.Join("testdata", "crds"))
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "chart: stop control plane: %v\n", err)
		}
	}()
	restConfig, k8s, kubeconfig = cp.Config, cp.Client, cp.Kubeconfig
	if err := cmapi.AddToScheme(cp.Scheme); err != nil { // the client reads Certificates
		return fail("%v", err)
	}
	podpatchBin = filepath.Join(tmp, "podpatch")
	if err := cluster.BuildPodpatch(repoRoot, podpatchBin); err != nil {
		return fail("build podpatch: %v", err)
	}
	for _, ns := range []string{"podpatch-system", "platform", "monitoring"} {
		obj := &corev1.Namespace{}
		obj.Name = ns
		if err := k8s.Create(context.Background(), obj); err != nil {
			return fail("namespace %s: %v", ns, err)
		}
	}
	return m.Run()
}
