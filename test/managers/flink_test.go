package managers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
)

// flinkImage is the image the JobManager Pod names; nothing pulls it here.
const flinkImage = "flink:2.1.0-java17"

// flinkTaskManagers is how many TaskManagers the JobManager starts (one slot each).
const flinkTaskManagers = 2

// TestFlink deploys a Flink session cluster with Flink's native Kubernetes client
// (KubernetesSessionCli from flink-dist, the jars of the apache-flink-libraries wheel, Java 17):
// the JobManager Deployment's Pod and the rest and internal Services. The JobManager the Pod
// would run then runs here, against the same cluster: its resource manager creates the
// TaskManager Pods. The JobManager runs on the EKS on-demand node group, the TaskManagers on
// Karpenter's spot capacity.
func TestFlink(t *testing.T) {
	venv := env.needVenv(t)
	// Only the jars are installed (no dependencies), so pyflink itself cannot be imported.
	lib := filepath.Join(sitePackages(t, venv), "pyflink", "lib")
	ns, ctl := env.namespaces(t, "mgr-flink")
	conf := filepath.Join(env.root, "test", "managers", "testdata", "flink")
	for _, n := range []string{ns, ctl} {
		cli := exec.Command("java", "-cp", filepath.Join(lib, "*"), "org.apache.flink.kubernetes.cli.KubernetesSessionCli",
			"-Dkubernetes.cluster-id=basic-example", "-Dkubernetes.namespace="+n,
			"-Dkubernetes.container.image.ref="+flinkImage, "-Dkubernetes.config.file="+env.tokenKubeconfig,
			"-Dexecution.attached=false")
		cli.Env = append(os.Environ(), "FLINK_CONF_DIR="+conf)
		start(t, "kubernetes-session-"+n, cli).wait(t, 3*time.Minute)
	}
	jmDirs := map[string]string{}
	for _, n := range []string{ns, ctl} {
		jmDirs[n] = startJobManager(t, lib, n, "basic-example")
	}
	want := map[shape]int{
		pod(profiles.ManagerFlink, profiles.RoleScheduler, "basic-example", ""):     1,
		service(profiles.ManagerFlink, profiles.RoleScheduler, "basic-example", ""): 2,
		pod(profiles.ManagerFlink, profiles.RoleWorker, "basic-example", ""):        flinkTaskManagers,
	}
	control := env.waitGenerated(t, ctl, want, 3*time.Minute)
	served := env.waitGenerated(t, ns, want, 3*time.Minute)
	env.checkPatchedWith(t, served, control, ns, ctl, func(r *rewriter) {
		// The TaskManagers name their JobManager's directory and ports, one per namespace.
		r.add(jmDirs[ctl], jmDirs[ns])
		c, s := jobManagerPorts(t, control), jobManagerPorts(t, served)
		for k, v := range c {
			r.add(k+"="+v, k+"="+s[k])
		}
	})
	// The JobManager on EKS on-demand, the TaskManagers on Karpenter spot (managers-e2e).
	env.placeServedAndControl(t, ns, ctl, served, map[shape]where{
		pod(profiles.ManagerFlink, profiles.RoleScheduler, "basic-example", ""): {pool: poolEKSOnDemand},
		pod(profiles.ManagerFlink, profiles.RoleWorker, "basic-example", ""):    {pool: poolKarpenterSpt},
	})
	t.Run("Events on the JobManager Deployment", func(t *testing.T) {
		// A native session cluster has no FlinkDeployment: its JobManager Deployment, which
		// owns the Pod's ReplicaSet, the Services and the TaskManager Pods, is the top owner.
		env.checkAppliedEvents(t, ns, "Deployment", "basic-example", "basic-example", served)
	})
	t.Run("manager-aware checks", func(t *testing.T) {
		// The JobManager's memory is changed; Flink sized it from jobmanager.memory.process.size
		// (reference §8).
		env.checkFindings(t, control, ns, map[shape]wantFinding{
			pod(profiles.ManagerFlink, profiles.RoleScheduler, "basic-example", ""): {checks.FlinkMemory, "podpatch-system/managers-checks/flink-jobmanager-memory"},
		})
	})
	t.Run("flink does not fight the mutation", func(t *testing.T) {
		env.checkSteady(t, ns, ctl)
	})
	env.dumpFixtures(t, "flink", "Flink native Kubernetes (flink-dist "+pythonVersion(t, venv, "apache-flink-libraries")+")", control, ctl)
}

// jobManagerLogging logs the JobManager's INFO messages to its output, which a failed test shows.
const jobManagerLogging = `rootLogger.level = INFO
rootLogger.appenderRef.console.ref = ConsoleAppender
appender.console.name = ConsoleAppender
appender.console.type = CONSOLE
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss,SSS} %-5p %c{1} - %m%n
`

// jobManagerPorts are the ports of their JobManager that the TaskManager Pods among objs name,
// by option (each is the same in every Pod).
func jobManagerPorts(t *testing.T, objs []generated) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, g := range objs {
		if g.Kind != profiles.KindPod || g.Role != profiles.RoleWorker {
			continue
		}
		js, err := g.obj.MarshalJSON()
		require.NoError(t, err)
		for _, m := range jobManagerPort.FindAllStringSubmatch(string(js), -1) {
			if prev, ok := out[m[1]]; ok {
				require.Equal(t, prev, m[2], "%s in every TaskManager", m[1])
			}
			out[m[1]] = m[2]
		}
	}
	require.Len(t, out, 2, "the JobManager's ports in the TaskManagers' arguments")
	return out
}

var jobManagerPort = regexp.MustCompile(`(jobmanager\.rpc\.port|blob\.server\.port)=('\d+')`)

// startJobManager runs here the JobManager of a native session cluster that
// KubernetesSessionCli deployed in ns: the Pod's entrypoint class
// (KubernetesSessionClusterEntrypoint) with the configuration the Pod mounts (the cluster's
// ConfigMap), reaching the API server through the token kubeconfig. It listens on this
// machine's loopback address, on any free ports (0), and keeps its files in a directory of its
// own, which it returns; the TaskManager Pods name both (they carry the JobManager's settings
// that differ from the ConfigMap). It asks
// for flinkTaskManagers slots without a job (slotmanager.number-of-slots.min): its resource
// manager creates that many TaskManager Pods, owned by the JobManager Deployment. They never
// register (nothing runs in them); the JobManager would replace them after
// resourcemanager.taskmanager-registration.timeout (5 minutes), long after the test.
func startJobManager(t *testing.T, lib, ns, clusterID string) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "flink-config-" + clusterID}, cm))
	dir := t.TempDir()
	confDir := filepath.Join(dir, "conf")
	require.NoError(t, os.Mkdir(confDir, 0o700))
	require.Contains(t, cm.Data, "config.yaml", "the JobManager's configuration")
	for k, v := range cm.Data {
		require.NoError(t, os.WriteFile(filepath.Join(confDir, k), []byte(v), 0o600))
	}
	logConf := filepath.Join(dir, "log4j.properties")
	require.NoError(t, os.WriteFile(logConf, []byte(jobManagerLogging), 0o600))
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o700))
	args := []string{"-Xmx512m", "-Djava.io.tmpdir=" + tmp, "-Dlog4j.configurationFile=" + logConf, "-cp", filepath.Join(lib, "*"),
		"org.apache.flink.kubernetes.entrypoint.KubernetesSessionClusterEntrypoint",
		"-Dkubernetes.config.file=" + env.tokenKubeconfig,
		"-Djobmanager.rpc.address=127.0.0.1", "-Djobmanager.bind-host=127.0.0.1", "-Djobmanager.rpc.port=0",
		"-Drest.address=127.0.0.1", "-Drest.bind-address=127.0.0.1", "-Drest.bind-port=0", "-Dblob.server.port=0",
		fmt.Sprintf("-Dslotmanager.number-of-slots.min=%d", flinkTaskManagers)}
	jm := exec.Command("java", args...)
	jm.Env = append(os.Environ(), "FLINK_CONF_DIR="+confDir)
	jm.Dir = dir
	start(t, "jobmanager-"+ns, jm)
	return tmp
}
