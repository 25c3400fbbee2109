package cluster

import (
	"path/filepath"
	"testing"
)

// A lane's directory replaces bin/ for the three Kubernetes binaries only: etcd and the rest
// are not looked up through KubeBin.
func TestKubeBin(t *testing.T) {
	t.Setenv(KubeBinDirEnv, "")
	if got, want := KubeBin("/repo/bin", "kube-apiserver"), filepath.Join("/repo/bin", "kube-apiserver"); got != want {
		t.Errorf("without %s: %s, want %s", KubeBinDirEnv, got, want)
	}
	t.Setenv(KubeBinDirEnv, "/repo/bin/kube-v1.33")
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if got, want := KubeBin("/repo/bin", name), filepath.Join("/repo/bin/kube-v1.33", name); got != want {
			t.Errorf("with %s: %s, want %s", KubeBinDirEnv, got, want)
		}
	}
}
