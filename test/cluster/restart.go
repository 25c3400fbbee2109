package cluster

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Restartable control planes (the fault tier, test/faults): etcd keeps its data directory and
// kube-apiserver its port, serving certificate and client CA across a restart, so that clients
// and the users made by UserKubeconfig keep working.

// StartRestartable is Start with etcd's data directory and kube-apiserver's certificate
// directory under dir, so that RestartEtcd and RestartAPIServer can stop and start them again
// on the same state, ports and credentials.
func StartRestartable(binDir, dir string, crdDirs ...string) (*ControlPlane, error) {
	etcdDir, certDir := filepath.Join(dir, "etcd"), filepath.Join(dir, "kube-apiserver")
	for _, d := range []string{etcdDir, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return start(binDir, dir, func(c *ControlPlane) {
		c.env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
		c.env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certDir}
		// Room for the Services of a long run (envtest's default is a /24: 254 Services).
		c.env.ControlPlane.APIServer.Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
		// kube-apiserver drains its requests on SIGTERM; under load that takes longer than
		// envtest's default 20 s, and a restart must not leave the old one on the port.
		c.env.ControlPlaneStopTimeout = 2 * time.Minute
	}, crdDirs...)
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port and certificates,
// returning once it is healthy. Between the two, between calls to stopped, the caller may act
// (stopped may be nil).
func (c *ControlPlane) RestartAPIServer(stopped func()) error {
	s := c.env.ControlPlane.APIServer
	if err := s.Stop(); err != nil {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	if stopped != nil {
		stopped()
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	return nil
}

// RestartEtcd stops etcd and starts it again on the same data directory and port, returning
// once it is healthy; kube-apiserver keeps running and reconnects.
func (c *ControlPlane) RestartEtcd(stopped func()) error {
	e := c.env.ControlPlane.Etcd
	if err := e.Stop(); err != nil {
		return fmt.Errorf("stop etcd: %w", err)
	}
	if stopped != nil {
		stopped()
	}
	if err := e.Start(); err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	return nil
}

// EtcdURL is etcd's client URL (plain HTTP on loopback), for its v3 API.
func (c *ControlPlane) EtcdURL() *url.URL { return c.env.ControlPlane.Etcd.URL }

// APIServerURL is kube-apiserver's secure URL.
func (c *ControlPlane) APIServerURL() *url.URL {
	return c.env.ControlPlane.APIServer.SecureServing.URL("https", "/")
}
