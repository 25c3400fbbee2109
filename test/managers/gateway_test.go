package managers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/webhook/ownerevents"
)

var gatewayClusterGVK = schema.GroupVersionKind{Group: "gateway.dask.org", Version: "v1alpha1", Kind: "DaskCluster"}

const (
	// gatewayNode is the node the test binds a gateway's scheduler Pod to, as the scheduler its
	// Pods name (testdata/gateway/dask_gateway_config.py) would; no kube-scheduler places them.
	gatewayNode = "gateway-node-a"
	// gatewayPolicies are the suite's policies for Dask Gateway (testdata/policies/gateway.yaml).
	gatewayPolicies = "podpatch-system/managers-gateway/"
)

// TestDaskGateway runs Dask Gateway's Kubernetes backend from the virtualenv — its API server
// (dask-gateway-server with KubeBackend) and its controller (dask-gateway-server
// kube-controller) — on a cluster a user creates through the API server in each namespace and
// scales to two workers. The controller creates the scheduler Pod; the test binds it and
// reports it running, as a scheduler and a kubelet would (there are none here); the controller
// then creates the scheduler Service and, once kube-controller-manager's endpoints controller
// finds the Pod ready behind it, Traefik routes, sets the DaskCluster Running and creates the
// workers the scheduler's heartbeat asks for.
func TestDaskGateway(t *testing.T) {
	venv := env.needVenv(t)
	dir := filepath.Join(env.root, "test", "managers", "testdata", "gateway")
	env.createCRDs(t, filepath.Join(dir, "crds"))
	ns, ctl := env.namespaces(t, "mgr-gateway")

	// The controller waits for the scheduler Service's Endpoints; the suite's
	// kube-controller-manager runs no endpoints controller.
	ep, err := env.cp.StartControllerManager(env.binDir, []string{"endpoints-controller"})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := ep.Stop(); err != nil {
			t.Errorf("stop the endpoints controller: %v", err)
		}
		if t.Failed() {
			t.Logf("endpoints controller output (tail):\n%s", tail(ep.Output.String(), 4000))
		}
	})

	config := filepath.Join(dir, "dask_gateway_config.py")
	server := filepath.Join(venv, "bin", "dask-gateway-server")
	ctrlPort := holdPort(t)
	ctrl := exec.Command(server, "kube-controller", "-f", config, "--KubeController.address="+ctrlPort.Addr())
	ctrl.Env = append(os.Environ(), "KUBECONFIG="+env.tokenKubeconfig)
	env.startSharing(t, "dask-gateway-controller", ctrl, ctrlPort)
	gw := startGatewayAPI(t, server, config)

	// The same cluster in both namespaces: its name is the API server's (a random hex).
	names := map[string]string{}
	for _, n := range []string{ns, ctl} {
		names[n] = gw.createCluster(t, n)
	}
	for i, n := range []string{ns, ctl} {
		env.runGatewayScheduler(t, n, names[n], i)
	}
	for _, n := range []string{ns, ctl} {
		env.waitGatewayPhase(t, n, names[n], "Running")
	}
	// The scheduler asks for workers in its heartbeat (scale or adapt): two.
	for _, n := range []string{ns, ctl} {
		gw.heartbeat(t, n, names[n], 2)
	}

	want := map[shape]int{
		pod(profiles.ManagerDaskGateway, profiles.RoleScheduler, "*", ""):     1,
		service(profiles.ManagerDaskGateway, profiles.RoleScheduler, "*", ""): 1,
		pod(profiles.ManagerDaskGateway, profiles.RoleWorker, "*", ""):        2,
	}
	control := env.waitGenerated(t, ctl, want, 2*time.Minute)
	served := env.waitGenerated(t, ns, want, 2*time.Minute)

	r := env.checkPatched(t, served, control, ns, ctl)
	t.Run("recognised as Dask Gateway's", func(t *testing.T) {
		// waitGenerated recognised them (manager dask-gateway, its role, the cluster its
		// DaskCluster names); podpatch did too: the policies matching only dask-gateway
		// objects of that role applied, and none in the control namespace.
		for _, g := range served {
			require.Equal(t, names[ns], g.Cluster, "%s %s: gateway.dask.org/cluster", g.Kind, g.obj.GetName())
			policy := gatewayPolicies + "gateway-scheduler"
			if g.Role == profiles.RoleWorker {
				policy = gatewayPolicies + "gateway-workers"
			}
			require.Contains(t, g.obj.GetAnnotations()[policies.AppliedAnnotation], policy+"@", "%s %s", g.Kind, g.obj.GetName())
		}
		for _, g := range control {
			require.NotContains(t, g.obj.GetAnnotations(), policies.AppliedAnnotation, "%s %s/%s", g.Kind, ctl, g.obj.GetName())
		}
	})
	t.Run("Events on the DaskCluster", func(t *testing.T) {
		// The owner chains of the profile: scheduler Pod -> DaskCluster; worker Pods and the
		// Service -> scheduler Pod -> DaskCluster. The controller may create the scheduler
		// Service twice (a reconcile that has not seen its own status yet; the API server
		// refuses the second create as AlreadyExists, after admission): the Event counts
		// objects, not admissions, so it still says one Service.
		var pods []generated
		for _, g := range served {
			if g.Kind == profiles.KindPod {
				pods = append(pods, g)
			}
		}
		env.checkAppliedEvents(t, ns, "DaskCluster", names[ns], names[ns], pods)
		eventually(t, 30*time.Second, func() error {
			evs, err := env.describeEvents(context.Background(), ns, "DaskCluster", names[ns])
			if err != nil {
				return err
			}
			msg := latest(evs, ownerevents.EventPoliciesApplied)["Service/scheduler"]
			for _, want := range []string{"to 1 Service ", gatewayPolicies + "gateway-scheduler", "podpatch-system/cost-center/cost-center"} {
				if !strings.Contains(msg, want) {
					return fmt.Errorf("PoliciesApplied for the scheduler Service: want %q in %q", want, msg)
				}
			}
			return nil
		}, "PoliciesApplied Event for the scheduler Service on DaskCluster %s/%s", ns, names[ns])
	})
	t.Run("the controller does not fight the mutation", func(t *testing.T) {
		env.checkSteady(t, ns, ctl, gatewayClusterGVK)
		env.checkGatewayStatus(t, r, ns, names[ns], ctl, names[ctl])
	})
}

// gatewayAPI is Dask Gateway's API server, as its users' clients (dask_gateway.Gateway) call it.
type gatewayAPI struct {
	url string
	p   *process
}

// startGatewayAPI runs dask-gateway-server with the Kubernetes backend and waits until it answers.
func startGatewayAPI(t *testing.T, server, config string) *gatewayAPI {
	t.Helper()
	port := holdPort(t)
	cmd := exec.Command(server, "-f", config, "--DaskGateway.address="+port.Addr())
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.tokenKubeconfig)
	g := &gatewayAPI{url: "http://" + port.Addr() + "/api", p: env.startSharing(t, "dask-gateway-server", cmd, port)}
	eventually(t, time.Minute, func() error {
		select {
		case <-g.p.exited:
			t.Fatalf("dask-gateway-server exited: %v\n%s", g.p.err, tail(g.p.output(), 6000))
		default:
		}
		resp, err := http.Get(g.url + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health: %s", resp.Status)
		}
		return nil
	}, "dask-gateway-server answers")
	return g
}

// call sends one request to the API server and decodes its JSON answer into out (if not nil).
func (g *gatewayAPI) call(method, path, auth string, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(method, g.url+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, raw)
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(raw, out)
	}
	return resp.StatusCode, nil
}

// createCluster asks for a new cluster in a namespace (the cluster option the configuration
// offers), as a user does with Gateway().new_cluster(namespace=...), and returns the name of
// its DaskCluster.
func (g *gatewayAPI) createCluster(t *testing.T, ns string) string {
	t.Helper()
	// SimpleAuthenticator: basic auth, user "analyst", any password.
	auth := "Basic YW5hbHlzdDp4" // analyst:x
	var out struct{ Name string }
	_, err := g.call(http.MethodPost, "/v1/clusters/", auth, map[string]any{"cluster_options": map[string]any{"namespace": ns}}, &out)
	require.NoError(t, err)
	name, ok := strings.CutPrefix(out.Name, ns+".")
	require.True(t, ok, "cluster %q in namespace %s", out.Name, ns)
	return name
}

// heartbeat sends what a gateway scheduler sends the API server when it wants count workers,
// authenticated with the cluster's API token (its credentials Secret); the API server sets the
// DaskCluster's spec.replicas.
func (g *gatewayAPI) heartbeat(t *testing.T, ns, cluster string, count int) {
	t.Helper()
	secret, err := env.clientset.CoreV1().Secrets(ns).Get(context.Background(), "dask-credentials-"+cluster, metav1.GetOptions{})
	require.NoError(t, err)
	msg := map[string]any{"count": count, "active_workers": []string{}, "closing_workers": []string{}, "closed_workers": []string{}}
	// The API server knows the token once it has read the Secret of a cluster it saw start.
	eventually(t, 30*time.Second, func() error {
		_, err := g.call(http.MethodPost, "/v1/clusters/"+ns+"."+cluster+"/heartbeat", "token "+string(secret.Data["api-token"]), msg, nil)
		return err
	}, "heartbeat of %s/%s", ns, cluster)
	eventually(t, 30*time.Second, func() error {
		o, err := env.gatewayCluster(ns, cluster)
		if err != nil {
			return err
		}
		if n, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas"); n != int64(count) {
			return fmt.Errorf("spec.replicas %d", n)
		}
		return nil
	}, "DaskCluster %s/%s scaled to %d", ns, cluster, count)
}

func (h *harness) gatewayCluster(ns, name string) (*unstructured.Unstructured, error) {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(gatewayClusterGVK)
	return o, h.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, o)
}

// runGatewayScheduler does for a gateway's scheduler Pod what a scheduler and a kubelet do:
// binds it to gatewayNode and reports its container running and the Pod ready, with an IP
// (the i-th of the test's), so that its Service gets a ready endpoint.
func (h *harness) runGatewayScheduler(t *testing.T, ns, cluster string, i int) {
	t.Helper()
	ctx := context.Background()
	pods := h.clientset.CoreV1().Pods(ns)
	name := "dask-scheduler-" + cluster
	eventually(t, time.Minute, func() error {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		return err
	}, "scheduler Pod %s/%s", ns, name)
	require.NoError(t, pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Target: corev1.ObjectReference{Kind: "Node", Name: gatewayNode}}, metav1.CreateOptions{}))
	p, err := pods.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	now := metav1.Now()
	hostIP, podIP := "10.0.0.1", fmt.Sprintf("10.244.0.%d", 10+i)
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.HostIP, p.Status.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	p.Status.PodIP, p.Status.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	p.Status.Conditions = nil
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	started := true
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			Ready: true, Started: &started, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err, "scheduler Pod %s/%s: status", ns, name)
}

// waitGatewayPhase waits for a gateway DaskCluster's status.phase.
func (h *harness) waitGatewayPhase(t *testing.T, ns, name, phase string) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		o, err := h.gatewayCluster(ns, name)
		if err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedString(o.Object, "status", "phase"); got != phase {
			st, _, _ := unstructured.NestedMap(o.Object, "status")
			return fmt.Errorf("status %v", st)
		}
		return nil
	}, "DaskCluster %s/%s phase %s", ns, name, phase)
}

// checkGatewayStatus compares the status of the served and the control DaskCluster (the
// objects the controller made, named after each), with times dropped and names rewritten.
func (h *harness) checkGatewayStatus(t *testing.T, r *rewriter, ns, name, ctl, ctlName string) {
	t.Helper()
	get := func(ns, name string) string {
		o, err := h.gatewayCluster(ns, name)
		require.NoError(t, err)
		st, _, _ := unstructured.NestedMap(o.Object, "status")
		b, err := yaml.Marshal(withoutTimes(st))
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, r.apply(get(ctl, ctlName)), get(ns, name), "DaskCluster %s: status as in the control namespace", name)
}
