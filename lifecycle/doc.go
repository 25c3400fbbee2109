// Package lifecycle is what installers run around `podpatch serve`: removing podpatch's webhook
// configurations before an uninstall (the Helm chart's pre-delete hook), so that an uninstall
// never leaves a webhook pointing at nothing, and the post-install check (`helm test`) that the
// API server's path to podpatch works — the CA bundle verifies the serving certificate, the
// webhook answers, and a dry-run Pod comes back patched.
package lifecycle

import (
	"k8s.io/client-go/kubernetes"

	"github.com/podpatch/podpatch/internal/kube"
)

// NewClient returns the typed clientset for what this package reads and writes (webhook
// configurations, Secrets and Pods), from the kubeconfig file named by kubeconfig or, when it
// is empty, as every other client command of podpatch and kubectl load it (kube.LoadConfig):
// $KUBECONFIG, ~/.kube/config, and the in-cluster configuration (a hook's ServiceAccount).
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, _, err := kube.LoadConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
