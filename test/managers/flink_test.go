package managers

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/podpatch/podpatch/policies"
)

// flinkImage is the image the JobManager Pod names; nothing pulls it here.
const flinkImage = "flink:2.1.0-java17"

// TestFlink deploys a Flink session cluster with Flink's native Kubernetes client
// (KubernetesSessionCli from flink-dist, the jars of the apache-flink-libraries wheel, Java 17):
// the JobManager Deployment's Pod and the rest and internal Services. TaskManager Pods are
// created only by a running JobManager, which never starts here. The JobManager runs on the EKS
// on-demand node group.
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
	want := map[shape]int{
		pod(policies.ManagerFlink, policies.RoleScheduler, "basic-example", ""):     1,
		service(policies.ManagerFlink, policies.RoleScheduler, "basic-example", ""): 2,
	}
	control := env.waitGenerated(t, ctl, want, 2*time.Minute)
	served := env.waitGenerated(t, ns, want, 2*time.Minute)
	env.checkPatched(t, served, control, ns, ctl)
	// The JobManager on the EKS on-demand node group (managers-e2e).
	env.placeServedAndControl(t, ns, ctl, served, map[shape]where{
		pod(policies.ManagerFlink, policies.RoleScheduler, "basic-example", ""): {pool: poolEKSOnDemand},
	})
	t.Run("Events on the JobManager Deployment", func(t *testing.T) {
		// A native session cluster has no FlinkDeployment: its JobManager Deployment, which
		// owns the Pod's ReplicaSet and the Services, is the top owner.
		env.checkAppliedEvents(t, ns, "Deployment", "basic-example", "basic-example", served)
	})
	t.Run("manager-aware checks", func(t *testing.T) {
		// The JobManager's memory is changed; Flink sized it from jobmanager.memory.process.size
		// (reference §8). A session cluster has no TaskManager until a job runs.
		env.checkFindings(t, control, ns, map[shape]wantFinding{
			pod(policies.ManagerFlink, policies.RoleScheduler, "basic-example", ""): {policies.CheckFlinkMemory, "podpatch-system/managers-checks/flink-jobmanager-memory"},
		})
	})
	t.Run("flink does not fight the mutation", func(t *testing.T) {
		env.checkSteady(t, ns, ctl)
	})
	env.dumpFixtures(t, "flink", "Flink native Kubernetes (flink-dist "+pythonVersion(t, venv, "apache-flink-libraries")+")", control, ctl)
}
