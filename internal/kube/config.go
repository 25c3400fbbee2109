package kube

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// LoadConfig loads the client configuration of every podpatch command, `serve` included, as
// kubectl loads its own: the kubeconfig file named (the --kubeconfig flag), else $KUBECONFIG,
// else ~/.kube/config, else the in-cluster configuration (a Pod's ServiceAccount). namespace
// is its current context's (the ServiceAccount's in a cluster; "default" when none says).
func LoadConfig(kubeconfig string) (cfg *rest.Config, namespace string, err error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	if cfg, err = kc.ClientConfig(); err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	if namespace, _, err = kc.Namespace(); err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, namespace, nil
}
