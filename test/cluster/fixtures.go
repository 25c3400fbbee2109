package cluster

// FixtureDir holds objects shaped as each cluster manager generates them, relative to the
// repository root.
const FixtureDir = "policies/testdata/fixtures/"

// ManagerFixtures are the Pods and Services of every manager that the end-to-end tests and the
// demo create through the API server (relative to FixtureDir).
var ManagerFixtures = []string{
	"dask-operator/scheduler-pod.yaml",
	"dask-operator/worker-pod.yaml",
	"dask-operator/scheduler-service.yaml",
	"dask-operator/job-runner-pod.yaml",
	"spark/driver-pod.yaml",
	"spark/executor-pod.yaml",
	"spark/driver-service.yaml",
	"kuberay/head-pod.yaml",
	"kuberay/worker-pod.yaml",
	"kuberay/head-service.yaml",
	"flink/jobmanager-pod.yaml",
	"flink/taskmanager-pod.yaml",
	"flink/rest-service.yaml",
}
