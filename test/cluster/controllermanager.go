package cluster

import (
	"strings"
)

// DefaultControllers are the controllers the manager tests need: the cluster managers create
// Deployments (Dask operator, Flink) and Jobs.
var DefaultControllers = []string{"deployment", "replicaset", "job"}

// StartControllerManager runs binDir's kube-controller-manager (KubeBin: KubeBinDirEnv's if set)
// with the given controllers (nil: DefaultControllers) against the control plane, without
// leader election and with its own credentials for every controller, and waits until /healthz
// answers. With it, Deployments, ReplicaSets and Jobs produce Pods.
func (c *ControlPlane) StartControllerManager(binDir string, controllers []string) (*Process, error) {
	if controllers == nil {
		controllers = DefaultControllers
	}
	return c.startSecureComponent("kube-controller-manager", KubeBin(binDir, "kube-controller-manager"),
		"--kubeconfig", c.Kubeconfig,
		"--controllers", strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		// envtest's API server runs without a scheduler or nodes: nothing to wait for.
		"--controller-start-interval=0s",
		"--v=1")
}
