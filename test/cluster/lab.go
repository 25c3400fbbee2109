package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The lab: kube-scheduler binds Pods to Nodes created through the API, and kwok (no kubelet)
// keeps those Nodes Ready and brings the Pods bound to them to Running with its default stages
// (bin/kwok.yaml, written by hack/build-control-plane.sh).

// KwokNodeAnnotation marks the Nodes kwok manages (kwok --manage-nodes-with-annotation-selector).
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Process is a control plane component started by the lab (kube-scheduler, kwok).
type Process struct {
	Name string
	// Output collects what the process logged.
	Output *bytes.Buffer
	cmd    *exec.Cmd
	done   chan error
	port   *HeldPort // the port it serves on, if any: released once it has stopped
}

// Stop sends SIGTERM and waits for the process to end (its exit status is not a failure:
// these components exit non-zero on SIGTERM).
func (p *Process) Stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return p.releasePort()
	case <-time.After(30 * time.Second):
		return errors.Join(fmt.Errorf("%s did not stop on SIGTERM", p.Name), p.cmd.Process.Kill(), p.releasePort())
	}
}

func (p *Process) releasePort() error {
	if p.port == nil {
		return nil
	}
	return p.port.Release()
}

// startSecureComponent runs a Kubernetes component that serves /healthz on a secure port
// (kube-scheduler, kube-controller-manager) with args, on a loopback port held for it (ports.go),
// and waits until /healthz answers.
func (c *ControlPlane) startSecureComponent(name, bin string, args ...string) (*Process, error) {
	port, err := HoldPort()
	if err != nil {
		return nil, err
	}
	certDir, err := os.MkdirTemp(c.dir, name+"-")
	if err != nil {
		return nil, errors.Join(err, port.Release())
	}
	args = append(args, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port.Port),
		"--permit-port-sharing=true", "--cert-dir", certDir)
	p, err := startProcess(name, bin, args...)
	if err != nil {
		return nil, errors.Join(err, port.Release())
	}
	p.port = port
	// Its serving certificate is self-signed; only liveness is read.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a local health probe
	if err := waitOK(name, hc, fmt.Sprintf("https://%s/healthz", port.Addr()), p.done, p.Output); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

func startProcess(name, bin string, args ...string) (*Process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s missing: run `make control-plane`: %w", name, err)
	}
	p := &Process{Name: name, Output: &bytes.Buffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.Output, p.Output
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p, nil
}

// StartScheduler runs binDir's kube-scheduler (KubeBin: KubeBinDirEnv's if set) against the
// control plane, without leader election, and waits until /healthz answers.
func (c *ControlPlane) StartScheduler(binDir string) (*Process, error) {
	return c.startSecureComponent("kube-scheduler", KubeBin(binDir, "kube-scheduler"),
		"--kubeconfig", c.Kubeconfig,
		"--authentication-kubeconfig", c.Kubeconfig,
		"--authorization-kubeconfig", c.Kubeconfig,
		"--leader-elect=false",
		"--v=1")
}

// StartKwok runs bin/kwok with the default stages of bin/kwok.yaml against the control plane,
// managing the Nodes annotated KwokNodeAnnotation=fake. Readiness is a Node's: CreatePools
// waits until kwok has marked each Node Ready.
func (c *ControlPlane) StartKwok(binDir string) (*Process, error) {
	stages := filepath.Join(binDir, "kwok.yaml")
	if _, err := os.Stat(stages); err != nil {
		return nil, fmt.Errorf("kwok stages missing: run `make control-plane`: %w", err)
	}
	return startProcess("kwok", filepath.Join(binDir, "kwok"),
		"--kubeconfig", c.Kubeconfig,
		"--config", stages,
		"--manage-nodes-with-annotation-selector", KwokNodeAnnotation+"=fake",
		"--cidr", "10.244.0.0/16",
		"--node-ip", "10.0.0.1")
}

// Pool is a node pool shaped like a real cluster's: every Node carries Labels (its provider's
// pool, capacity-type and instance-type labels), Taints and Allocatable, and is spread over
// Zones (topology.kubernetes.io/zone), one Node per zone.
type Pool struct {
	Name        string
	Labels      map[string]string
	Taints      []corev1.Taint
	Allocatable corev1.ResourceList
	Zones       []string
}

// PoolOf returns the name of the Pool a Node belongs to (LabPoolLabel).
func PoolOf(n *corev1.Node) string { return n.Labels[LabPoolLabel] }

// LabPoolLabel names a lab Node's Pool, whatever its provider's labels.
const LabPoolLabel = "lab.podpatch.io/pool"

// Resources is a ResourceList from name=quantity pairs.
func Resources(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// LabPools are the lab's pools, shaped like GKE, EKS and Karpenter clusters: the GKE
// default-pool (on demand), gpu-pool (nvidia-l4, tainted nvidia.com/gpu) and spot-pool
// (cloud.google.com/gke-spot, tainted), an EKS on-demand node group and a Karpenter spot NodePool.
// The example policies (manifests/examples) select gpu-pool and spot Nodes by these labels.
func LabPools() []Pool {
	zones := []string{"europe-west4-a", "europe-west4-b"}
	return []Pool{
		{Name: "default-pool", Zones: zones, Allocatable: Resources("cpu", "8", "memory", "32Gi", "pods", "110"),
			Labels: map[string]string{"cloud.google.com/gke-nodepool": "default-pool", corev1.LabelInstanceTypeStable: "n2-standard-8"}},
		{Name: "gpu-pool", Zones: zones, Allocatable: Resources("cpu", "8", "memory", "64Gi", "nvidia.com/gpu", "4", "pods", "110"),
			Labels: map[string]string{"cloud.google.com/gke-nodepool": "gpu-pool", "cloud.google.com/gke-accelerator": "nvidia-l4",
				corev1.LabelInstanceTypeStable: "g2-standard-8"},
			Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
		{Name: "spot-pool", Zones: zones, Allocatable: Resources("cpu", "8", "memory", "32Gi", "pods", "110"),
			Labels: map[string]string{"cloud.google.com/gke-nodepool": "spot-pool", "cloud.google.com/gke-spot": "true",
				corev1.LabelInstanceTypeStable: "n2-standard-8"},
			Taints: []corev1.Taint{{Key: "cloud.google.com/gke-spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		{Name: "eks-on-demand", Zones: []string{"eu-west-1a"}, Allocatable: Resources("cpu", "4", "memory", "16Gi", "pods", "58"),
			Labels: map[string]string{"eks.amazonaws.com/nodegroup": "on-demand", "eks.amazonaws.com/capacityType": "ON_DEMAND",
				corev1.LabelInstanceTypeStable: "m6i.xlarge"},
			Taints: []corev1.Taint{{Key: "eks.amazonaws.com/nodegroup", Value: "on-demand", Effect: corev1.TaintEffectNoSchedule}}},
		{Name: "karpenter-spot", Zones: []string{"eu-west-1b"}, Allocatable: Resources("cpu", "16", "memory", "64Gi", "pods", "110"),
			Labels: map[string]string{"karpenter.sh/nodepool": "spot", "karpenter.sh/capacity-type": "spot",
				corev1.LabelInstanceTypeStable: "c6i.4xlarge"},
			Taints: []corev1.Taint{{Key: "karpenter.sh/capacity-type", Value: "spot", Effect: corev1.TaintEffectNoSchedule}}},
	}
}

// CreatePools creates the Nodes of the pools through the API (managed by kwok: annotated
// KwokNodeAnnotation=fake) and waits until kwok has marked every one Ready. It returns them.
func CreatePools(ctx context.Context, c client.Client, pools []Pool) ([]*corev1.Node, error) {
	var nodes []*corev1.Node
	for _, p := range pools {
		for _, zone := range p.Zones {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        p.Name + "-" + zone[strings.LastIndexByte(zone, '-')+1:],
				Annotations: map[string]string{KwokNodeAnnotation: "fake"},
				Labels: map[string]string{LabPoolLabel: p.Name, corev1.LabelTopologyZone: zone,
					corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"}},
				Spec:   corev1.NodeSpec{Taints: p.Taints},
				Status: corev1.NodeStatus{Allocatable: p.Allocatable, Capacity: p.Allocatable}}
			for k, v := range p.Labels {
				n.Labels[k] = v
			}
			n.Labels[corev1.LabelHostname] = n.Name
			if err := c.Create(ctx, n); err != nil {
				return nil, fmt.Errorf("node %s: %w", n.Name, err)
			}
			nodes = append(nodes, n)
		}
	}
	for _, n := range nodes {
		err := waitFor(ctx, 60*time.Second, "Node "+n.Name+" Ready (kwok)", func() (bool, error) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
				return false, err
			}
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return nil, err
		}
		// The API server's TaintNodesByCondition admission taints every new Node not-ready; the
		// node lifecycle controller (not run here) lifts it once the Node is Ready, as kwok made it.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
				return err
			}
			var kept []corev1.Taint
			for _, t := range n.Spec.Taints {
				if t.Key != corev1.TaintNodeNotReady {
					kept = append(kept, t)
				}
			}
			if len(kept) == len(n.Spec.Taints) {
				return nil
			}
			n.Spec.Taints = kept
			return c.Update(ctx, n) // kwok updates only the status: a conflict is rare, and retried
		})
		if err != nil {
			return nil, fmt.Errorf("node %s: lift the not-ready taint: %w", n.Name, err)
		}
	}
	return nodes, nil
}

// waitFor polls cond every 100 ms until it holds, fails, or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Placement is where the scheduler put a Pod: its Node and that Node's Pool, and whether kwok
// brought it to Running; or, when it stays Pending, the scheduler's own reason (its
// PodScheduled condition, as the FailedScheduling Event says it).
type Placement struct {
	Node, Pool string
	Running    bool
	// Unschedulable is the scheduler's message when it found no Node for the Pod.
	Unschedulable string
}

// WaitPlaced waits until the scheduler has decided on a Pod: bound and Running, or
// unschedulable (PodScheduled False, reason Unschedulable). No fixed sleep: the condition
// is polled.
func WaitPlaced(ctx context.Context, c client.Client, namespace, name string, timeout time.Duration) (Placement, error) {
	var out Placement
	pod := &corev1.Pod{}
	err := waitFor(ctx, timeout, "Pod "+namespace+"/"+name+" scheduled and Running, or unschedulable", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
			return false, err
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				out = Placement{Unschedulable: cond.Message}
				return true, nil
			}
		}
		return pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil || out.Unschedulable != "" {
		return out, err
	}
	out.Node, out.Running = pod.Spec.NodeName, true
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: out.Node}, n); err != nil {
		return out, err
	}
	out.Pool = PoolOf(n)
	return out, nil
}
