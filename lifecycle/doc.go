// Package lifecycle is what installers run around `podpatch serve`: removing podpatch's webhook
// configurations before an uninstall (the Helm chart's pre-delete hook), so that an uninstall
// never leaves a webhook pointing at nothing, and the post-install check (`helm test`) that the
// API server's path to podpatch works — the CA bundle verifies the serving certificate, the
// webhook answers, and a dry-run Pod comes back patched.
package lifecycle

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// NewClient returns the typed clientset for what this package reads and writes (webhook
// configurations, Secrets and Pods), from the kubeconfig file named by kubeconfig or, when it
// is empty, as every other client command of podpatch and kubectl load it: $KUBECONFIG,
// ~/.kube/config, and the in-cluster configuration (a hook's ServiceAccount) when neither exists.
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// restConfig loads the client configuration NewClient uses.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}
