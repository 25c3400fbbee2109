package managers

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
)

// sparkImage is the image the driver and executor Pods name; nothing pulls it here.
const sparkImage = "apache/spark:4.0.1"

// TestSpark runs spark-submit from the pyspark wheel (Java 17): cluster mode creates the
// driver Pod and its Service; client mode, with the driver running here, creates two executor
// Pods. The driver runs on on-demand Nodes, the executors on spot ones.
func TestSpark(t *testing.T) {
	venv := env.needVenv(t)
	ns, ctl := env.namespaces(t, "mgr-spark")
	submit := filepath.Join(venv, "bin", "spark-submit")
	master := "k8s://" + env.cp.Config.Host
	sparkEnv := append(os.Environ(), "KUBECONFIG="+env.tokenKubeconfig, "SPARK_HOME="+pythonPackageDir(t, venv, "pyspark"),
		"PYSPARK_PYTHON="+filepath.Join(venv, "bin", "python"), "PYSPARK_DRIVER_PYTHON="+filepath.Join(venv, "bin", "python"))
	common := func(n string) []string {
		return []string{"--master", master, "--conf", "spark.kubernetes.namespace=" + n,
			"--conf", "spark.kubernetes.container.image=" + sparkImage,
			"--conf", "spark.executor.instances=2", "--conf", "spark.dynamicAllocation.enabled=false"}
	}
	for _, n := range []string{ns, ctl} {
		// Cluster mode: spark-submit creates the driver Pod, its Service and ConfigMap, and
		// returns without waiting for the application.
		args := append([]string{"--deploy-mode", "cluster", "--name", "spark-pi",
			"--class", "org.apache.spark.examples.SparkPi",
			"--conf", "spark.kubernetes.submission.waitAppCompletion=false"}, common(n)...)
		args = append(args, "local:///opt/spark/examples/jars/spark-examples.jar", "1000")
		cluster := exec.Command(submit, args...)
		cluster.Env = sparkEnv
		start(t, "spark-submit-cluster-"+n, cluster).wait(t, 3*time.Minute)

		// Client mode: the driver is this machine's JVM; it asks for two executor Pods. As a
		// client-mode driver running in a Pod (a notebook) does, it names that Pod — here the
		// cluster-mode driver's — so that the executors are owned by it. It listens on a port
		// of its own choosing (spark.driver.port unset: 0), which its executors name.
		args = append([]string{"--deploy-mode", "client", "--name", "spark-pi",
			"--conf", "spark.kubernetes.driver.pod.name=" + env.sparkDriverPod(t, n),
			"--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
			"--conf", "spark.ui.enabled=false"}, common(n)...)
		args = append(args, filepath.Join(env.root, "test", "managers", "testdata", "spark", "client_app.py"))
		client := exec.Command(submit, args...)
		client.Env = sparkEnv
		start(t, "spark-submit-client-"+n, client)
	}
	want := map[shape]int{
		pod(profiles.ManagerSpark, profiles.RoleScheduler, "spark-pi", ""):     1,
		service(profiles.ManagerSpark, profiles.RoleScheduler, "spark-pi", ""): 1,
		pod(profiles.ManagerSpark, profiles.RoleWorker, "spark-pi", ""):        2,
	}
	control := env.waitGenerated(t, ctl, want, 3*time.Minute)
	served := env.waitGenerated(t, ns, want, 3*time.Minute)
	r := env.checkPatchedWith(t, served, control, ns, ctl, func(r *rewriter) {
		// Executors name their driver's address, its port chosen per run.
		from, to := sparkDriverPort(t, control), sparkDriverPort(t, served)
		r.add("127.0.0.1:"+from, "127.0.0.1:"+to)
		r.add("spark.driver.port="+from, "spark.driver.port="+to)
	})
	_ = r
	// The driver off spot, on default-pool (managers-e2e); the executors on GKE spot (the
	// example spark-spot).
	env.placeServedAndControl(t, ns, ctl, served, map[shape]where{
		pod(profiles.ManagerSpark, profiles.RoleScheduler, "spark-pi", ""): {pool: poolDefault},
		pod(profiles.ManagerSpark, profiles.RoleWorker, "spark-pi", ""):    {pool: poolSpot},
	})
	t.Run("Events on the driver Pod", func(t *testing.T) {
		// spark-submit makes no SparkApplication: the driver Pod owns the executors and the
		// Service, and is its own top.
		env.checkAppliedEvents(t, ns, "Pod", env.sparkDriverPod(t, ns), "spark-pi", served)
	})
	t.Run("manager-aware checks", func(t *testing.T) {
		// The namespace's executors policy raises the executors' memory; their JVM heap stays
		// spark.executor.memory (reference §8).
		env.checkFindings(t, control, ns, map[shape]wantFinding{
			pod(profiles.ManagerSpark, profiles.RoleWorker, "spark-pi", ""): {checks.SparkMemory, ns + "/team/executors"},
		})
	})
	t.Run("spark does not fight the mutation", func(t *testing.T) {
		env.checkSteady(t, ns, ctl)
	})
	env.dumpFixtures(t, "spark", "spark-submit "+strings.TrimSpace(pythonVersion(t, venv, "pyspark")), control, ctl)
}

// sparkDriverPod is the name of the one driver Pod in a namespace.
func (h *harness) sparkDriverPod(t *testing.T, ns string) string {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, h.k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"spark-role": "driver"}))
	require.Len(t, pods.Items, 1, "driver Pods in %s", ns)
	return pods.Items[0].Name
}

// sparkDriverPort is the port of the client-mode driver, as every one of its executor Pods
// names it (SPARK_DRIVER_URL, spark://CoarseGrainedScheduler@host:port).
func sparkDriverPort(t *testing.T, gens []generated) string {
	t.Helper()
	port := ""
	for _, g := range gens {
		if g.Kind != profiles.KindPod || g.Role != profiles.RoleWorker {
			continue
		}
		var p corev1.Pod
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(g.obj.Object, &p))
		url := ""
		for _, c := range p.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == "SPARK_DRIVER_URL" {
					url = e.Value
				}
			}
		}
		addr, ok := strings.CutPrefix(url, "spark://CoarseGrainedScheduler@")
		require.True(t, ok, "executor %s: SPARK_DRIVER_URL %q", p.Name, url)
		_, pt, err := net.SplitHostPort(addr)
		require.NoError(t, err, "executor %s: SPARK_DRIVER_URL %q", p.Name, url)
		if port != "" {
			require.Equal(t, port, pt, "executor %s: the same driver as the others", p.Name)
		}
		port = pt
	}
	require.NotEmpty(t, port, "no executor Pod")
	return port
}
