// Package e2e runs podpatch behind a real kube-apiserver and etcd (built from source into bin/
// by `make bin/kube-apiserver bin/etcd`), installs the webhook configurations from manifests/
// with only the client config rewritten to reach the local server, and checks what the API
// server stores.
package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The shared control plane and the podpatch binary under test.
var (
	repoRoot    string
	restConfig  *rest.Config
	k8s         client.Client
	scheme      = runtime.NewScheme()
	kubeconfig  string
	podpatchBin string
	env         *envtest.Environment
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	var err error
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
		return 1
	}
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		return fail("%v", err)
	}
	binDir := filepath.Join(repoRoot, "bin")
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fail("%s missing: run `make bin/kube-apiserver bin/etcd` (make test does) — %v", b, err)
		}
	}
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fail("%v", err)
	}
	crds, err := certManagerCRDs()
	if err != nil {
		return fail("cert-manager CRDs: %v", err)
	}
	env = &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDDirectoryPaths:     []string{crds},
		ErrorIfCRDPathMissing: true,
	}
	if restConfig, err = env.Start(); err != nil {
		return fail("start control plane: %v", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stop control plane: %v\n", err)
		}
	}()
	if k8s, err = client.New(restConfig, client.Options{Scheme: scheme}); err != nil {
		return fail("client: %v", err)
	}
	tmp, err := os.MkdirTemp("", "podpatch-e2e-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(tmp)
	user, err := env.AddUser(envtest.User{Name: "podpatch", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fail("user: %v", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fail("kubeconfig: %v", err)
	}
	kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return fail("%v", err)
	}
	podpatchBin = filepath.Join(tmp, "podpatch")
	build := exec.Command("go", "build", "-o", podpatchBin, "./cmd/podpatch")
	build.Dir, build.Stdout, build.Stderr = repoRoot, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
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

// certManagerCRDs finds deploy/crds in the cert-manager module this build uses.
func certManagerCRDs() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		return "", err
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", err
	}
	return filepath.Join(mod.Dir, "deploy", "crds"), nil
}
