package cluster

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// ControllerManager is a kube-controller-manager process against a ControlPlane: with it,
// Deployments, ReplicaSets and Jobs produce Pods. There is no scheduler and no kubelet, so the
// Pods stay Pending; admission is what the tests look at.
type ControllerManager struct {
	// Output collects what the process logged.
	Output *bytes.Buffer
	cmd    *exec.Cmd
	done   chan error
}

// DefaultControllers are the controllers the manager tests need: the cluster managers create
// Deployments (Dask operator, Flink) and Jobs.
var DefaultControllers = []string{"deployment", "replicaset", "job"}

// StartControllerManager runs binDir's kube-controller-manager (KubeBin: KubeBinDirEnv's if set) with the given controllers (nil:
// DefaultControllers) against the control plane, on a free loopback port, without leader
// election and with its own credentials for every controller, and waits until /healthz
// answers.
func (c *ControlPlane) StartControllerManager(binDir string, controllers []string) (*ControllerManager, error) {
	bin := KubeBin(binDir, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s missing: run `make control-plane`: %w", bin, err)
	}
	if controllers == nil {
		controllers = DefaultControllers
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	certDir, err := os.MkdirTemp(c.dir, "kube-controller-manager-")
	if err != nil {
		return nil, err
	}
	list := ""
	for i, ctrl := range controllers {
		if i > 0 {
			list += ","
		}
		list += ctrl
	}
	m := &ControllerManager{Output: &bytes.Buffer{}, done: make(chan error, 1)}
	m.cmd = exec.Command(bin,
		"--kubeconfig", c.Kubeconfig,
		"--controllers", list,
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir", certDir,
		// envtest's API server runs without a scheduler or nodes: nothing to wait for.
		"--controller-start-interval=0s",
		"--v=1")
	m.cmd.Stdout, m.cmd.Stderr = m.Output, m.Output
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { m.done <- m.cmd.Wait() }()
	// Its serving certificate is self-signed; only liveness is read.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a local health probe
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	if err := waitOK("kube-controller-manager", hc, url, m.done, m.Output); err != nil {
		return nil, errors.Join(err, m.Stop())
	}
	return m, nil
}

// Stop sends SIGTERM and waits for the process to end.
func (m *ControllerManager) Stop() error {
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-m.done:
		// kube-controller-manager exits non-zero on SIGTERM; that is not a failure here.
		return nil
	case <-time.After(30 * time.Second):
		return errors.Join(errors.New("kube-controller-manager did not stop on SIGTERM"), m.cmd.Process.Kill())
	}
}
